package chat_test

import (
	"fmt"

	"github.com/moonlm/moonlm/engine/chat"
)

func ExampleApply() {
	src := "{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}\n{% endfor %}" +
		"{% if add_generation_prompt %}<|assistant|>{% endif %}"
	msgs := []chat.Message{{Role: "user", Content: " Hi! "}}
	out, info, err := chat.Apply(src, msgs, true, "<s>", "</s>")
	fmt.Printf("%q %v %v\n", out, info.Fallback(), err)

	// A template using something the interpreter lacks falls back to the
	// family its markers name.
	out, info, err = chat.Apply("{% include 'x' %}<|im_start|>", msgs, true, "", "")
	fmt.Printf("%q %s %v\n", out, info.Family, err)
	// Output:
	// "<|user|>Hi!\n<|assistant|>" false <nil>
	// "<|im_start|>user\n Hi! <|im_end|>\n<|im_start|>assistant\n" chatml <nil>
}
