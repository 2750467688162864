package arch

import (
	"bytes"
	"testing"

	"github.com/moonlm/moonlm/gguf"
)

// readMeta reads the hyperparameters of a metadata-only GGUF image of
// architecture a with the given keys (after "a.").
func readMeta(t *testing.T, a string, keys map[string]any) Params {
	t.Helper()
	w := gguf.NewWriter()
	set := func(k string, v any) {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	set("general.architecture", a)
	for k, v := range keys {
		set(a+"."+k, v)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	_, p, err := Read(f)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestExaone4Layers: as in llama.cpp, only the 64-layer model slides,
// three layers of four, and its fourth (global) layers skip RoPE; the
// sliding ones rotate as a model without a window does. Other sizes have
// neither. Multi-token-prediction layers are not counted.
func TestExaone4Layers(t *testing.T) {
	keys := func(layers int) map[string]any {
		return map[string]any{
			"context_length": uint32(131072), "embedding_length": uint32(5120), "block_count": uint32(layers),
			"feed_forward_length": uint32(27392), "attention.head_count": uint32(40), "attention.head_count_kv": uint32(8),
			"attention.key_length": uint32(128), "attention.value_length": uint32(128),
			"attention.layer_norm_rms_epsilon": float32(1e-5), "attention.sliding_window": uint32(4096),
		}
	}
	p := readMeta(t, "exaone4", keys(64))
	if p.SWAWindow != 4096 || p.RopeSWA != 0 {
		t.Fatalf("64 layers: window %d, sliding RoPE base %v", p.SWAWindow, p.RopeSWA)
	}
	for il := 0; il < 8; il++ {
		global := il%4 == 3
		if p.Sliding(il) == global || p.Rotates(il) == global {
			t.Errorf("layer %d: sliding %v, rotates %v; want %v, %v", il, p.Sliding(il), p.Rotates(il), !global, !global)
		}
	}
	p = readMeta(t, "exaone4", keys(30))
	if p.SWAWindow != 0 || !p.Rotates(3) || p.Sliding(0) {
		t.Errorf("30 layers: window %d, layer 3 rotates %v, layer 0 slides %v", p.SWAWindow, p.Rotates(3), p.Sliding(0))
	}
	k := keys(31)
	k["nextn_predict_layers"] = uint32(1)
	if p = readMeta(t, "exaone4", k); p.Layers != 30 {
		t.Errorf("31 blocks with one prediction layer: %d layers, want 30", p.Layers)
	}
}
