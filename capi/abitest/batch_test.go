package abitest

import (
	"fmt"
	"os/exec"
	"runtime"
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
	Continues uintptr
}

// OldBatchEntry mirrors the first published moonlm_batch_entry, which
// ended at status (no continues).
type OldBatchEntry struct {
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
	printf("%zu %zu %zu %zu %zu %zu %zu %zu\n", sizeof(moonlm_batch_entry), offsetof(moonlm_batch_entry, session),
	       offsetof(moonlm_batch_entry, tokens), offsetof(moonlm_batch_entry, n_tokens),
	       offsetof(moonlm_batch_entry, logits), offsetof(moonlm_batch_entry, logits_cap),
	       offsetof(moonlm_batch_entry, status), offsetof(moonlm_batch_entry, continues));
	return 0;
}
`
	out, err := exec.Command(compileC(t, l, src)).Output()
	require.NoError(t, err)
	var e BatchEntry
	assert.Equal(t, fmt.Sprintf("%d %d %d %d %d %d %d %d\n", unsafe.Sizeof(e), unsafe.Offsetof(e.Session), unsafe.Offsetof(e.Tokens),
		unsafe.Offsetof(e.NTokens), unsafe.Offsetof(e.Logits), unsafe.Offsetof(e.LogitsCap), unsafe.Offsetof(e.Status),
		unsafe.Offsetof(e.Continues)), string(out))
	// continues starts where the first struct ended, so that struct's
	// size names it.
	assert.Equal(t, unsafe.Sizeof(OldBatchEntry{}), unsafe.Offsetof(e.Continues))
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
	// The last error is the calling thread's: decode and read it on one.
	runtime.LockOSThread()
	st := bl.Decode(m, &entries[0], uintptr(len(entries)))
	lastErr := l.LastError()
	runtime.UnlockOSThread()
	require.EqualValues(t, InvalidArg, st, lastErr)
	assert.Contains(t, lastErr, "entries[1]")
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
	entries[0].Size = unsafe.Offsetof(BatchEntry{}.Continues) + 1
	requireStatus(t, l, InvalidArg, bl.Decode(m, &entries[0], 1), "a size between the first struct's and the current")
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

// TestBatchDecodeContinues feeds a prompt in chunks through
// moonlm_batch_decode to the synthetic qwen35 (a hybrid model whose
// sessions keep checkpoints of their recurrent state): with continues set
// on every chunk but the last, the session holds the checkpoints of one
// moonlm_prefill of the whole prompt; without, those of one prefill per
// chunk. A caller of the first struct size (no continues) gets the latter
// too, even where the memory after its entry is not zero.
func TestBatchDecodeContinues(t *testing.T) {
	l, bl := batchFuncs(t)
	_, c := checkpointFuncs(t)
	const name = "synth-qwen35-Q8_0.gguf"
	var m uintptr
	requireStatus(t, l, OK, l.ModelOpen(shareddata.SynthModel(t, name), nil, &m), "opening "+name)
	t.Cleanup(func() { l.ModelFree(m) })
	vocab := int(modelInfo(t, l, m).NVocab)
	const chunk = 4
	prompt := tokenizeText(t, l, m, storiesText)
	require.GreaterOrEqual(t, len(prompt), 3*chunk)
	prompt = prompt[:3*chunk]
	lg := make([]float32, vocab)

	whole := newSession(t, l, m, 128, 0)
	requireStatus(t, l, OK, l.Prefill(whole, &prompt[0], uintptr(len(prompt)), &lg[0], uintptr(vocab)), "prefill")
	wantJoined := checkpointPositions(t, l, c, whole)
	perChunk := newSession(t, l, m, 128, 0)
	for i := 0; i < len(prompt); i += chunk {
		requireStatus(t, l, OK, l.Prefill(perChunk, &prompt[i], chunk, &lg[0], uintptr(vocab)), "prefill of a chunk")
	}
	wantSplit := checkpointPositions(t, l, c, perChunk)
	require.NotEqual(t, wantJoined, wantSplit, "the test needs a prompt whose chunks leave checkpoints of their own")

	joined, split := newSession(t, l, m, 128, 0), newSession(t, l, m, 128, 0)
	old, other := newSession(t, l, m, 128, 0), newSession(t, l, m, 128, 0)
	lj, ls := make([]float32, vocab), make([]float32, vocab)
	one := []int32{prompt[0]}
	for i := 0; i < len(prompt); i += chunk {
		more := uintptr(0)
		if i+chunk < len(prompt) {
			more = 1
		}
		sz := unsafe.Sizeof(BatchEntry{})
		entries := []BatchEntry{
			{Size: sz, Session: joined, Tokens: &prompt[i], NTokens: chunk, Logits: &lj[0], LogitsCap: uintptr(vocab), Continues: more},
			{Size: sz, Session: split, Tokens: &prompt[i], NTokens: chunk, Logits: &ls[0], LogitsCap: uintptr(vocab)},
		}
		requireStatus(t, l, OK, bl.Decode(m, &entries[0], uintptr(len(entries))), fmt.Sprintf("chunk at %d", i))
		// The first struct size: where continues would be, the next
		// entry's size (nonzero) lies.
		osz := unsafe.Sizeof(OldBatchEntry{})
		olds := []OldBatchEntry{
			{Size: osz, Session: old, Tokens: &prompt[i], NTokens: chunk},
			{Size: osz, Session: other, Tokens: &one[0], NTokens: 1},
		}
		requireStatus(t, l, OK, bl.Decode(m, (*BatchEntry)(unsafe.Pointer(&olds[0])), uintptr(len(olds))), fmt.Sprintf("old-size chunk at %d", i))
	}
	assert.Equal(t, wantJoined, checkpointPositions(t, l, c, joined), "chunks marked continues")
	assert.Equal(t, wantSplit, checkpointPositions(t, l, c, split), "chunks not marked")
	assert.Equal(t, wantSplit, checkpointPositions(t, l, c, old), "chunks in entries of the first struct size")
	// The flag changes the checkpoints only.
	requireSameBits(t, "the last chunk's logits", lj, ls)
	assert.EqualValues(t, len(prompt), position(t, l, joined))
	assert.EqualValues(t, len(prompt), position(t, l, old))
}
