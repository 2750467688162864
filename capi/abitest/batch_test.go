package abitest

import (
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/moonlm/moonlm/internal/shareddata"
)

// BatchEntry mirrors moonlm_batch_entry.
type BatchEntry struct {
	Size      uintptr
	Session   uintptr
	Tokens    *int32
	NTokens   uintptr
	Logits    *float32
	LogitsCap uintptr
	Status    int32
}

// batchLib holds the batched-decoding functions (a section of its own in
// moonlm.h), loaded from the same library as Lib.
type batchLib struct {
	Decode    func(m uintptr, entries *BatchEntry, n uintptr) int32
	MaxTokens func(m uintptr, n *uintptr) int32
}

var (
	batchOnce sync.Once
	theBatch  *batchLib
	batchErr  error
)

func batchFuncs(t testing.TB) (*Lib, *batchLib) {
	t.Helper()
	l := lib(t)
	batchOnce.Do(func() {
		h, err := purego.Dlopen(l.Path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			batchErr = err
			return
		}
		b := &batchLib{}
		purego.RegisterLibFunc(&b.Decode, h, "moonlm_batch_decode")
		purego.RegisterLibFunc(&b.MaxTokens, h, "moonlm_batch_max_tokens")
		theBatch = b
	})
	require.NoError(t, batchErr)
	return l, theBatch
}

func TestBatchEntryLayout(t *testing.T) {
	l := lib(t)
	src := `#include <stdio.h>
#include <stddef.h>
#include "moonlm.h"
int main(void) {
	printf("%zu %zu %zu %zu %zu %zu %zu\n", sizeof(moonlm_batch_entry), offsetof(moonlm_batch_entry, session),
	       offsetof(moonlm_batch_entry, tokens), offsetof(moonlm_batch_entry, n_tokens),
	       offsetof(moonlm_batch_entry, logits), offsetof(moonlm_batch_entry, logits_cap),
	       offsetof(moonlm_batch_entry, status));
	return 0;
}
`
	out, err := exec.Command(compileC(t, l, src)).Output()
	require.NoError(t, err)
	var e BatchEntry
	assert.Equal(t, fmt.Sprintf("%d %d %d %d %d %d %d\n", unsafe.Sizeof(e), unsafe.Offsetof(e.Session), unsafe.Offsetof(e.Tokens),
		unsafe.Offsetof(e.NTokens), unsafe.Offsetof(e.Logits), unsafe.Offsetof(e.LogitsCap), unsafe.Offsetof(e.Status)), string(out))
}

// TestBatchDecodeMatchesAlone decodes three sessions in shared steps (each
// prompt prefilled in the first step) and checks every step's logits
// against the same session run alone with moonlm_prefill and
// moonlm_decode, bit for bit.
func TestBatchDecodeMatchesAlone(t *testing.T) {
	l, bl := batchFuncs(t)
	batchMatchesAlone(t, l, bl, openModel(t, l, stories))
}

// TestBatchDecodeSynthMatchesAlone is TestBatchDecodeMatchesAlone on the
// synthetic gemma4 (layers of different shapes) and the hybrids qwen35
// and qwen3next (recurrent layers, whose state each session keeps).
func TestBatchDecodeSynthMatchesAlone(t *testing.T) {
	l, bl := batchFuncs(t)
	for _, name := range []string{"synth-gemma4-Q8_0.gguf", "synth-qwen35-Q8_0.gguf", "synth-qwen3next-Q8_0.gguf"} {
		t.Run(name, func(t *testing.T) {
			var m uintptr
			requireStatus(t, l, OK, l.ModelOpen(shareddata.SynthModel(t, name), nil, &m), "opening "+name)
			t.Cleanup(func() { l.ModelFree(m) })
			batchMatchesAlone(t, l, bl, m)
		})
	}
}

// batchMatchesAlone is TestBatchDecodeMatchesAlone on model m.
func batchMatchesAlone(t *testing.T, l *Lib, bl *batchLib, m uintptr) {
	vocab := int(modelInfo(t, l, m).NVocab)
	var maxTok uintptr
	requireStatus(t, l, OK, bl.MaxTokens(m, &maxTok), "batch_max_tokens")
	require.GreaterOrEqual(t, maxTok, uintptr(8))
	prompts := [][]int32{
		tokenizeText(t, l, m, storiesText),
		tokenizeText(t, l, m, "The cat sat"),
		tokenizeText(t, l, m, "Tom and Lily went to the park"),
	}
	const steps = 6
	want := make([][]float32, len(prompts))
	for i, p := range prompts {
		s := newSession(t, l, m, 256, 0)
		lg := make([]float32, vocab)
		requireStatus(t, l, OK, l.Prefill(s, &p[0], uintptr(len(p)), &lg[0], uintptr(vocab)), "reference prefill")
		want[i] = append(append([]float32(nil), lg...), greedySteps(t, l, s, lg, steps)...)
	}
	sess := make([]uintptr, len(prompts))
	logits := make([][]float32, len(prompts))
	got := make([][]float32, len(prompts))
	entries := make([]BatchEntry, len(prompts))
	next := make([]int32, len(prompts))
	for i, p := range prompts {
		sess[i] = newSession(t, l, m, 256, 0)
		logits[i] = make([]float32, vocab)
		entries[i] = BatchEntry{Size: unsafe.Sizeof(BatchEntry{}), Session: sess[i], Tokens: &p[0], NTokens: uintptr(len(p)), Logits: &logits[i][0], LogitsCap: uintptr(vocab)}
	}
	for step := 0; step <= steps; step++ {
		requireStatus(t, l, OK, bl.Decode(m, &entries[0], uintptr(len(entries))), fmt.Sprintf("step %d", step))
		for i := range entries {
			require.EqualValues(t, OK, entries[i].Status)
			got[i] = append(got[i], logits[i]...)
			next[i] = argmax(logits[i])
			entries[i].Tokens, entries[i].NTokens = &next[i], 1
		}
	}
	for i := range prompts {
		requireSameBits(t, fmt.Sprintf("sequence %d", i), got[i], want[i])
		assert.EqualValues(t, len(prompts[i])+steps, position(t, l, sess[i]))
	}
}

// TestBatchDecodeEntryStatus checks the per-entry statuses: a bad entry
// fails alone, the call returns the first failure, the rest are evaluated.
func TestBatchDecodeEntryStatus(t *testing.T) {
	l, bl := batchFuncs(t)
	m := openModel(t, l, stories)
	other := openModel(t, l, stories)
	vocab := int(modelInfo(t, l, m).NVocab)
	good := newSession(t, l, m, 64, 0)
	foreign := newSession(t, l, other, 64, 0)
	f32 := newSession(t, l, m, 64, 1)
	s5, s6 := newSession(t, l, m, 64, 0), newSession(t, l, m, 64, 0)
	freed := newSession(t, l, m, 64, 0)
	l.SessionFree(freed)
	toks := []int32{1, 2, 3}
	bad := []int32{int32(vocab)}
	lg := make([]float32, vocab)
	sz := unsafe.Sizeof(BatchEntry{})
	entries := []BatchEntry{
		{Size: sz, Session: good, Tokens: &toks[0], NTokens: 3, Logits: &lg[0], LogitsCap: uintptr(vocab)},
		{Size: sz, Session: foreign, Tokens: &toks[0], NTokens: 1},
		{Size: sz, Session: good, Tokens: &toks[0], NTokens: 1},
		{Size: sz, Session: freed, Tokens: &toks[0], NTokens: 1},
		{Size: sz, Session: f32, Tokens: &bad[0], NTokens: 1},
		{Size: sz, Session: s5, Tokens: &toks[0], NTokens: 1, Logits: &lg[0], LogitsCap: 2},
		{Size: sz, Session: s6, Tokens: nil, NTokens: 1},
	}
	st := bl.Decode(m, &entries[0], uintptr(len(entries)))
	require.EqualValues(t, InvalidArg, st, l.LastError())
	assert.Contains(t, l.LastError(), "entries[1]")
	wantSt := []int32{OK, InvalidArg, Busy, InvalidArg, InvalidArg, BufferTooSmall, InvalidArg}
	for i, w := range wantSt {
		assert.EqualValues(t, w, entries[i].Status, "entry %d", i)
	}
	assert.EqualValues(t, 3, position(t, l, good))
	assert.EqualValues(t, 0, position(t, l, f32))

	// A session of another KV type than the first entry's.
	entries = entries[:2]
	entries[0] = BatchEntry{Size: sz, Session: good, Tokens: &toks[0], NTokens: 1}
	entries[1] = BatchEntry{Size: sz, Session: f32, Tokens: &toks[0], NTokens: 1}
	require.EqualValues(t, InvalidArg, bl.Decode(m, &entries[0], 2))
	assert.EqualValues(t, OK, entries[0].Status)
	assert.EqualValues(t, InvalidArg, entries[1].Status)

	// Whole-call errors.
	requireStatus(t, l, InvalidArg, bl.Decode(m, nil, 1), "NULL entries")
	entries[0].Size = 8
	requireStatus(t, l, InvalidArg, bl.Decode(m, &entries[0], 1), "small size")
	entries[0].Size = sz
	entries[1].Size = sz + 8
	requireStatus(t, l, InvalidArg, bl.Decode(m, &entries[0], 2), "unequal sizes")
	requireStatus(t, l, InvalidArg, bl.Decode(0, &entries[0], 1), "NULL model")
	requireStatus(t, l, OK, bl.Decode(m, nil, 0), "no entries")
}

// TestBatchDecodeLargerEntries checks that entries of a newer, larger
// struct are read at their own stride.
func TestBatchDecodeLargerEntries(t *testing.T) {
	l, bl := batchFuncs(t)
	m := openModel(t, l, stories)
	type bigEntry struct {
		BatchEntry
		Extra [3]uint64
	}
	toks := []int32{1, 2}
	sessions := []uintptr{newSession(t, l, m, 64, 0), newSession(t, l, m, 64, 0)}
	entries := make([]bigEntry, 2)
	for i := range entries {
		entries[i].BatchEntry = BatchEntry{Size: unsafe.Sizeof(bigEntry{}), Session: sessions[i], Tokens: &toks[0], NTokens: uintptr(1 + i)}
		entries[i].Extra = [3]uint64{7, 7, 7}
	}
	requireStatus(t, l, OK, bl.Decode(m, &entries[0].BatchEntry, 2), "larger entries")
	assert.EqualValues(t, 1, position(t, l, sessions[0]))
	assert.EqualValues(t, 2, position(t, l, sessions[1]))
	assert.Equal(t, [3]uint64{7, 7, 7}, entries[1].Extra)
}
