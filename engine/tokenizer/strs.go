package tokenizer

import (
	"fmt"
	"strings"
)

// strs is a list of strings packed into one: string i is
// data[ends[i-1]:ends[i]]. A vocabulary's 10^5 tokens and merges take two
// allocations this way, with nothing for the GC to scan.
type strs struct {
	data string
	ends []uint32
}

func (s *strs) len() int { return len(s.ends) }

func (s *strs) at(i int) string {
	start := uint32(0)
	if i > 0 {
		start = s.ends[i-1]
	}
	return s.data[start:s.ends[i]]
}

func packStrings(list []string) (strs, error) {
	var b strings.Builder
	ends := make([]uint32, len(list))
	for i, x := range list {
		if b.Len()+len(x) > 1<<32-1 {
			return strs{}, fmt.Errorf("%w: strings exceed 4 GiB", ErrBadVocab)
		}
		b.WriteString(x)
		ends[i] = uint32(b.Len())
	}
	return strs{data: b.String(), ends: ends}, nil
}

func (s *strs) unpack() []string {
	out := make([]string, s.len())
	for i := range out {
		out[i] = s.at(i)
	}
	return out
}
