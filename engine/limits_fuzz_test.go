package engine

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/moonlm/moonlm/internal/testmodel"
	"golang.org/x/sys/unix"
)

// fuzzAddressSpace is the RLIMIT_AS a fuzz worker runs under, so that an
// allocation bomb (a count from the file trusted before it is checked)
// fails the fuzzer instead of swapping the machine.
const fuzzAddressSpace = 4 << 30

var limitFuzzWorker sync.Once

// FuzzOpenMetadata opens the tiny test model with the metadata that drives
// allocations replaced by fuzzed values (block count, dimensions, head
// counts, context, vocabulary and per-token array lengths, per-layer
// arrays, tensors left out). Every open either succeeds (then a session
// decodes a token) or fails with a classified error; none may panic,
// return ErrInternal, or allocate more than a small multiple of the file.
// While fuzzing, the worker process runs under RLIMIT_AS 4 GiB, so a
// runaway allocation kills it and the fuzzer reports the input.
func FuzzOpenMetadata(f *testing.F) {
	sm := testmodel.Small
	f.Add(uint64(sm.Layers), uint64(sm.Dim), uint64(sm.FF), uint64(sm.Heads), uint64(sm.KVHeads), uint64(0), uint64(0), uint64(sm.Ctx), uint32(0), uint32(0), uint8(0), uint8(0))
	f.Add(uint64(1<<31-1), uint64(sm.Dim), uint64(sm.FF), uint64(sm.Heads), uint64(sm.KVHeads), uint64(0), uint64(0), uint64(sm.Ctx), uint32(0), uint32(0), uint8(0), uint8(0))
	f.Add(uint64(sm.Layers), uint64(1<<31-1), uint64(1<<30), uint64(1<<20), uint64(1), uint64(1<<30), uint64(2), uint64(1<<31-1), uint32(1<<20), uint32(1<<22), uint8(3), uint8(7))
	f.Fuzz(func(t *testing.T, layers, dim, ff, heads, kv, keyLen, rot, ctx uint64, nTokens, nScores uint32, perLayer, drop uint8) {
		if fl := flag.Lookup("test.fuzzworker"); fl != nil && fl.Value.String() == "true" {
			limitFuzzWorker.Do(func() {
				lim := unix.Rlimit{Cur: fuzzAddressSpace, Max: fuzzAddressSpace}
				if err := unix.Setrlimit(unix.RLIMIT_AS, &lim); err != nil {
					t.Fatalf("setrlimit: %v", err)
				}
			})
		}
		s := testmodel.Small
		s.Meta = map[string]any{
			"llama.block_count":             layers,
			"llama.embedding_length":        dim,
			"llama.feed_forward_length":     ff,
			"llama.attention.head_count":    heads,
			"llama.attention.head_count_kv": kv,
			"llama.context_length":          ctx,
		}
		if perLayer%4 == 1 {
			// Per-layer arrays (as llama.cpp accepts them): one entry per
			// fuzzed layer count, up to 64.
			s.Meta["llama.feed_forward_length"] = repeatU64(ff, int(layers%64))
			s.Meta["llama.attention.head_count"] = repeatU64(heads, int(layers%64))
		}
		if keyLen != 0 {
			s.Meta["llama.attention.key_length"] = keyLen
			s.Meta["llama.attention.value_length"] = keyLen
		}
		if rot != 0 {
			s.Meta["llama.rope.dimension_count"] = rot
		}
		if nTokens != 0 {
			// Bounded so that building the input stays cheap; the lengths
			// still reach far past the 267-row embedding.
			toks := make([]string, nTokens%(1<<16))
			for i := range toks {
				toks[i] = strconv.Itoa(i)
			}
			s.Meta["tokenizer.ggml.tokens"] = toks
		}
		if nScores != 0 {
			s.Meta["tokenizer.ggml.scores"] = make([]uint8, nScores%(1<<22))
		}
		switch drop % 8 {
		case 1:
			s.Drop = map[string]bool{"blk.1.attn_norm.weight": true}
		case 2:
			s.Drop = map[string]bool{"token_embd.weight": true}
		case 3:
			s.Drop = map[string]bool{"blk.0.ffn_up.weight": true, "output_norm.weight": true}
		}
		b, err := testmodel.Build(s)
		if err != nil {
			t.Skip("the writer refuses these values:", err)
		}
		path := filepath.Join(t.TempDir(), "fuzz.gguf")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		before := heapAllocs()
		m, err := Open(path, ModelParams{Threads: 1, Pack: PackOff})
		if grew := heapAllocs() - before; grew > uint64(64<<20+4*len(b)) {
			t.Fatalf("open allocated %d bytes for a %d-byte file (err %v)", grew, len(b), err)
		}
		if err != nil {
			if errors.Is(err, ErrInternal) {
				t.Fatalf("open: %v", err)
			}
			if !errors.Is(err, ErrBadFile) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("open: an error that is neither ErrBadFile nor ErrUnsupported: %v", err)
			}
			return
		}
		defer m.Close()
		sess, err := m.NewSession(SessionParams{NCtx: 8})
		if err != nil {
			if errors.Is(err, ErrInternal) {
				t.Fatalf("session: %v", err)
			}
			return
		}
		defer sess.Close()
		logits := make([]float32, m.Info().VocabSize)
		if err := sess.Decode(1, logits); err != nil && errors.Is(err, ErrInternal) {
			t.Fatalf("decode: %v", err)
		}
	})
}

func repeatU64(x uint64, n int) []uint64 {
	out := make([]uint64, max(n, 1))
	for i := range out {
		out[i] = x
	}
	return out
}
