package sample_test

import (
	"fmt"

	"github.com/moonlm/moonlm/engine/sample"
)

func ExampleSampler() {
	s, err := sample.New(sample.Params{Temperature: 0}) // greedy
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Sample([]float32{0.1, 2.5, 2.5, -1}))
	// Output: 1
}

func ExampleStopMatcher() {
	m := sample.NewStopMatcher([]string{"<|im_end|>"})
	for _, piece := range []string{"Hello", " world<|im", "_end|> ignored"} {
		emit, stopped := m.Push(piece)
		fmt.Printf("%q %v\n", emit, stopped)
	}
	// Output:
	// "Hello" false
	// " world" false
	// "" true
}
