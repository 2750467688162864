package tokenizer

import (
	"math/rand"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// uncuttableTexts are texts with no "▁" after another character, so the
// SentencePiece merge runs over them whole.
func uncuttableTexts(n int) map[string]string {
	var cjk strings.Builder
	const han = "東京大阪日本語中文漢字学生先生今日明日天気電車"
	for cjk.Len() < n {
		cjk.WriteString(han)
	}
	return map[string]string{
		"a-run": strings.Repeat("a", n),
		"cjk":   cjk.String(),
	}
}

// A text the merge cannot cut allocates a small multiple of its length: the
// merge state is some 4 bytes per byte and the queue 8 bytes per character
// (it was about 50 bytes per character).
func TestEncodeMemoryBoundedUncuttable(t *testing.T) {
	texts := uncuttableTexts(4 << 20)
	for _, name := range []string{"llama-spm", "phi-3"} {
		tok := openTokenizer(t, "vocab/ggml-vocab-"+name+".gguf")
		_, err := tok.Encode("warm up", false, false)
		require.NoError(t, err)
		for kind, text := range texts {
			runtime.GC()
			before := totalAlloc()
			ids, err := tok.Encode(text, false, false)
			allocated := totalAlloc() - before
			require.NoError(t, err)
			require.NotEmpty(t, ids)
			t.Logf("%s %s: %d bytes, %d tokens, %.1f bytes allocated per byte", name, kind, len(text), len(ids), float64(allocated)/float64(len(text)))
			assert.Less(t, allocated, uint64(16*len(text)), "%s %s: %d bytes allocated for %d bytes of text", name, kind, allocated, len(text))
		}
	}
}

// The compact merge gives exactly the tokens of the linked-symbol merge it
// replaced (kept below as the reference), on the vocabulary test texts, on
// uncuttable runs and on random mixes of characters that merge often.
func TestSPMCompactMergeSameTokens(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	alphabet := []string{"a", "b", "e", "n", "t", " ", "  ", "東", "京", "é", "ü", "\n", "1", ".", "\u2581", "\xff"}
	for _, name := range []string{"llama-spm", "phi-3"} {
		tok := openTokenizer(t, "vocab/ggml-vocab-"+name+".gguf")
		var texts []string
		for _, c := range readCases(t, name) {
			texts = append(texts, c.text)
		}
		for _, text := range uncuttableTexts(64 << 10) {
			texts = append(texts, text, text[:1001], text[:7777])
		}
		for i := 0; i < 300; i++ {
			var b strings.Builder
			for n := rng.Intn(400); n > 0; n-- {
				b.WriteString(alphabet[rng.Intn(len(alphabet))])
			}
			texts = append(texts, b.String())
		}
		sc := &scratch{}
		for _, text := range texts {
			buf := []byte(strings.ReplaceAll(" "+text, " ", spmSpace))
			got := tok.encodeSPM(nil, buf, sc)
			want := tok.encodeSPMReference(nil, buf, &scratch{})
			require.Equal(t, want, got, "%s: %q", name, text)
		}
	}
}

// encodeSPMReference is the SentencePiece merge over linked symbols and a
// queue of sized bigrams, as the tokenizer did it before the compact merge.
func (t *Tokenizer) encodeSPMReference(dst []int32, text []byte, sc *scratch) []int32 {
	syms := sc.syms[:0]
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		i := int32(len(syms))
		syms = append(syms, symbol{prev: i - 1, next: i + 1, start: int32(off), n: int32(n)})
		off += n
	}
	if len(syms) == 0 {
		return dst
	}
	syms[len(syms)-1].next = -1

	h := sc.heap[:0]
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		s := syms[l].start
		e := syms[r].start + syms[r].n
		id := t.ids.getBytes(text[s:e])
		if id < 0 {
			return
		}
		h = push(h, bigram{key: scoreKey(t.scores[id])<<32 | uint64(l), size: e - s, id: id})
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		try(i-1, i)
	}
	for len(h) > 0 {
		var b bigram
		b, h = pop(h)
		// The pair is still as queued iff the sizes add up: symbols only
		// grow, and the left one's next changes only by absorbing it.
		left := b.left()
		ls := &syms[left]
		if ls.n == 0 || ls.next < 0 {
			continue
		}
		rs := &syms[ls.next]
		if ls.n+rs.n != b.size {
			continue
		}
		ls.n += rs.n
		rs.n = 0
		ls.next = rs.next
		if rs.next >= 0 {
			syms[rs.next].prev = left
		}
		try(ls.prev, left)
		try(left, ls.next)
	}
	for i := int32(0); i != -1; i = syms[i].next {
		s := &syms[i]
		piece := text[s.start : s.start+s.n]
		if id := t.ids.getBytes(piece); id >= 0 {
			dst = append(dst, id)
			continue
		}
		// Every merged span is a token, so this is a single character
		// missing from the vocabulary: byte fallback.
		for _, c := range piece {
			if id := t.byteTok[c]; id >= 0 {
				dst = append(dst, id)
			} else if t.unk >= 0 {
				dst = append(dst, t.unk)
			}
		}
	}
	sc.syms, sc.heap = syms, h
	return dst
}

// On a vocabulary where many merges tie in score, and where a pair's score
// repeats after its symbols change, the compact merge, which tells stale
// queue entries only by score, still makes the reference's merges.
func TestSPMCompactMergeTiedScores(t *testing.T) {
	toks := []string{"<unk>", "<s>", "</s>", "a", "b", "\u2581"}
	for _, s := range []string{"aa", "ab", "ba", "bb", "aaa", "aab", "aba", "abb", "baa", "bab", "bba", "bbb", "aaaa", "abab", "baba", "aabb", "\u2581a", "\u2581b", "\u2581ab"} {
		toks = append(toks, s)
	}
	rng := rand.New(rand.NewSource(2))
	for round := 0; round < 20; round++ {
		scores := make([]float32, len(toks))
		for i := range scores {
			scores[i] = float32(rng.Intn(3)) // few distinct scores: many ties
		}
		tok, err := New(&Vocab{Model: "llama", Tokens: toks, Scores: scores})
		require.NoError(t, err)
		sc := &scratch{}
		for i := 0; i < 200; i++ {
			var b strings.Builder
			for n := rng.Intn(200); n > 0; n-- {
				b.WriteByte("aab "[rng.Intn(4)])
			}
			buf := []byte(strings.ReplaceAll(b.String(), " ", spmSpace))
			want := tok.encodeSPMReference(nil, buf, &scratch{})
			require.Equal(t, want, tok.encodeSPM(nil, buf, sc), "round %d: %q", round, b.String())
		}
	}
}
