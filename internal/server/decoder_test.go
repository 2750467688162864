package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/internal/testmodel"
)

// echoDecoder is a Decoder of the test's own: it answers every sequence
// with "n=<prompt tokens>" in three pieces, as a batched decoder would
// plug in through StartDecoder.
type echoDecoder struct {
	slots  int
	runs   atomic.Int64
	closed atomic.Bool
}

func (d *echoDecoder) Slots() int { return d.slots }

func (d *echoDecoder) Run(ctx context.Context, slot int, seq *Sequence) (engine.GenerateResult, error) {
	if slot < 0 || slot >= d.slots {
		return engine.GenerateResult{}, fmt.Errorf("slot %d", slot)
	}
	d.runs.Add(1)
	res := engine.GenerateResult{PromptTokens: len(seq.Prompt), LastToken: -1, Finish: engine.FinishLength}
	for i, piece := range []string{"n=", fmt.Sprint(len(seq.Prompt)), ""} {
		if ctx.Err() != nil || !seq.Emit([]byte(piece), int32(i)) {
			res.Finish = engine.FinishCancelled
			return res, nil
		}
		res.Tokens++
	}
	seq.Reused = 1
	return res, nil
}

func (d *echoDecoder) KVUsage() (used, capacity int64) { return 7, 100 }

func (d *echoDecoder) Close() { d.closed.Store(true) }

// The scheduler and the HTTP side run any Decoder: the seam a batched
// decode step plugs into.
func TestStartDecoder(t *testing.T) {
	data, err := testmodel.Build(testmodel.Small)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := engine.Open(path, engine.ModelParams{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	dec := &echoDecoder{slots: 3}
	s, err := New(Config{Alias: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StartDecoder(m, dec); err != nil {
		t.Fatal(err)
	}
	if err := s.StartDecoder(m, dec); err == nil {
		t.Error("a second start was accepted")
	}
	if c := s.Config(); c.Ctx != 33 || c.MaxPromptTokens != 32 {
		t.Errorf("context from the decoder's capacity (100 over 3 slots): %d, prompts up to %d", c.Ctx, c.MaxPromptTokens)
	}
	h := newTestServer(t, s)
	toks, _ := m.Tokenize("the a", true, true)
	resp, b := post(t, h+"/v1/completions", `{"prompt":["the a","the"],"n":2,"max_tokens":5}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	r := decode[chatResp](t, b)
	if len(r.Choices) != 4 || r.Choices[0].Text != fmt.Sprintf("n=%d", len(toks)) || r.Choices[3].FinishReason != "length" ||
		r.Usage.CompletionTokens != 4*3 {
		t.Errorf("response %s", b)
	}
	if dec.runs.Load() != 4 {
		t.Errorf("%d runs for 4 sequences", dec.runs.Load())
	}
	if v := metricValue(t, h, "moonlm_prompt_tokens_reused_total"); v != 4 {
		t.Errorf("reused %g", v)
	}
	if v := metricValue(t, h, "moonlm_slots"); v != 3 {
		t.Errorf("slots %g", v)
	}
	if v := metricValue(t, h, "moonlm_kv_cache_used_tokens"); v != 7 {
		t.Errorf("KV used %g", v)
	}
	s.Close()
	if !dec.closed.Load() {
		t.Error("Close did not close the decoder")
	}
}
