package grammar

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moonlm/moonlm/engine/tokenizer"
)

// Masks against llama.cpp's own grammar sampler. The folder named by
// MOONLM_GRAMMAR_REFDIR holds, per vocabulary NAME (smollm2, qwen3) and
// grammar G (any G.gbnf there): NAME.tokens (token ids of a document, one a
// line; TestWriteGrammarRefTokens writes them and ours.gbnf) and
// NAME.G.bin, written by a small program over llama.cpp's
// llama_sampler_init_grammar with a vocabulary-only model: a little-endian
// uint32 vocabulary size, then per token of NAME.tokens the bitset of the
// tokens llama.cpp allows before that token is accepted.
//
// The masks must be equal except where we differ by design: control and
// other special tokens never match characters here (llama.cpp matches their
// text), pieces that are not valid UTF-8 are refused (llama.cpp decodes
// them leniently), tokens llama.cpp ends generation with by their text
// that our tokenizer does not list as end-of-generation, and tokens ending
// inside a character that llama.cpp refuses when the character's possible
// range touches a negated class's exclusions although some completion
// fits (we test the range exactly).
func TestLlamaCppMasks(t *testing.T) {
	dir := os.Getenv("MOONLM_GRAMMAR_REFDIR")
	if dir == "" {
		t.Skip("MOONLM_GRAMMAR_REFDIR is not set: no llama.cpp grammar-sampler dumps to compare with")
	}
	grammars, _ := filepath.Glob(filepath.Join(dir, "*.gbnf"))
	compared := 0
	for _, name := range []string{"smollm2", "qwen3"} {
		var tok *tokenizer.Tokenizer
		for _, gf := range grammars {
			gname := strings.TrimSuffix(filepath.Base(gf), ".gbnf")
			dump, err := os.ReadFile(filepath.Join(dir, name+"."+gname+".bin"))
			if err != nil {
				continue
			}
			ids := readTokens(t, dir, name, gname)
			if tok == nil {
				tok = openVocab(t, name)
			}
			compared++
			n := int(binary.LittleEndian.Uint32(dump))
			row := (n + 7) / 8
			steps := (len(dump) - 4) / row
			if n != tok.VocabSize() || (len(dump)-4)%row != 0 || steps > len(ids) {
				t.Fatalf("%s.%s.bin: %d tokens, %d bytes; want %d tokens, at most %d steps", name, gname, n, len(dump), tok.VocabSize(), len(ids))
			}
			ids = ids[:steps]
			m := mustMatcher(t, readGrammar(t, gf), tok)
			logits := make([]float32, n)
			byDesign := map[string]int{}
			for step, id := range ids {
				clear(logits)
				m.Mask(logits)
				r := dump[4+step*row : 4+(step+1)*row]
				for i := int32(0); i < int32(n); i++ {
					theirs := r[i/8]&(1<<(i%8)) != 0
					ours := logits[i] == 0
					if theirs == ours {
						continue
					}
					switch p := string(tok.PieceSpecial(i)); {
					case theirs && tok.IsSpecial(i):
						byDesign["special"]++
					case theirs && !truncatedUTF8(tok.Piece(i)):
						byDesign["invalid UTF-8"]++
					case llamaEOGText[p]:
						byDesign["end of generation by text"]++
					case !theirs && endsInsideChar(tok.Piece(i)):
						byDesign["partial character"]++
					default:
						t.Fatalf("%s %s step %d: token %d %q: llama.cpp allows=%v, we allow=%v", name, gname, step, i, p, theirs, ours)
					}
				}
				if err := m.Accept(id); err != nil {
					t.Fatalf("%s %s step %d: %v", name, gname, step, err)
				}
			}
			t.Logf("%s %s: %d steps equal but for the differences by design %v", name, gname, len(ids), byDesign)
		}
	}
	if compared == 0 {
		t.Fatalf("no dumps in %s", dir)
	}
}

// readTokens reads NAME.G.tokens, or NAME.tokens.
func readTokens(t *testing.T, dir, name, gname string) []int32 {
	tb, err := os.ReadFile(filepath.Join(dir, name+"."+gname+".tokens"))
	if err != nil {
		if tb, err = os.ReadFile(filepath.Join(dir, name+".tokens")); err != nil {
			t.Fatal(err)
		}
	}
	var ids []int32
	for _, f := range strings.Fields(string(tb)) {
		var v int32
		if _, err := fmt.Sscan(f, &v); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v)
	}
	return ids
}

// endsInsideChar reports whether p ends with an incomplete UTF-8 character.
func endsInsideChar(p []byte) bool {
	var d utf8State
	for _, c := range p {
		var ok bool
		if d, _, ok = d.push(c); !ok {
			return false
		}
	}
	return d.remain > 0
}

// llamaEOGText are texts llama.cpp makes end-of-generation tokens of.
var llamaEOGText = map[string]bool{
	"</s>": true, "<|return|>": true, "<|call|>": true, "<|flush|>": true, "<|calls|>": true,
	"_<EOT>": true, "[EOT]": true, "[EOS]": true, "<|end_of_text|>": true, "<end_of_utterance>": true,
	"<eos>": true, "<turn|>": true,
}

// TestWriteGrammarRefTokens writes the token files and ours.gbnf that the
// llama.cpp driver reads, when MOONLM_GRAMMAR_REFDIR_WRITE is set.
func TestWriteGrammarRefTokens(t *testing.T) {
	dir := os.Getenv("MOONLM_GRAMMAR_REFDIR")
	if dir == "" || os.Getenv("MOONLM_GRAMMAR_REFDIR_WRITE") == "" {
		t.Skip("set MOONLM_GRAMMAR_REFDIR and MOONLM_GRAMMAR_REFDIR_WRITE to write the inputs of the llama.cpp driver")
	}
	for _, name := range []string{"smollm2", "qwen3"} {
		tok := openVocab(t, name)
		doc := `{"k": "` + "\xe6\x97\xa5 \u00e9 <|im_start|> \\u00e9" + `", "d": ` + longJSON(4) + "}"
		ids, err := tok.Encode(doc, false, false)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, id := range ids {
			fmt.Fprintf(&b, "%d\n", id)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".tokens"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ours.gbnf"), []byte(JSONObjectText), 0o644); err != nil {
		t.Fatal(err)
	}
	// every grammar of llama.cpp's folder and ours: a random walk each
	files, _ := filepath.Glob(filepath.Join("testdata", "grammars", "*.gbnf"))
	if ld := os.Getenv("MOONLM_LLAMACPP_DIR"); ld != "" {
		more, _ := filepath.Glob(filepath.Join(ld, "grammars", "*.gbnf"))
		files = append(files, more...)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		gname := "walk-" + strings.TrimSuffix(filepath.Base(f), ".gbnf")
		if strings.HasPrefix(f, "testdata") {
			gname += "-own"
		}
		if err := os.WriteFile(filepath.Join(dir, gname+".gbnf"), src, 0o644); err != nil {
			t.Fatal(err)
		}
		g := mustParse(t, string(src))
		for k, name := range []string{"smollm2", "qwen3"} {
			tok := openVocab(t, name)
			m := mustMatcher(t, g, tok)
			rng := rand.New(rand.NewPCG(uint64(k), uint64(len(src))))
			logits := make([]float32, tok.VocabSize())
			var b strings.Builder
			for range 200 {
				if m.Done() {
					break
				}
				id := sampleFast(m, logits, rng, 1.5)
				if id < 0 || tok.IsEOG(id) {
					break
				}
				if err := m.Accept(id); err != nil {
					t.Fatal(err)
				}
				fmt.Fprintf(&b, "%d\n", id)
			}
			if err := os.WriteFile(filepath.Join(dir, name+"."+gname+".tokens"), []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
