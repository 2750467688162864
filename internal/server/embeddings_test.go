package server

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"testing"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/internal/shareddata"
)

// synthBert opens the engine's generated synthetic BERT encoder.
func synthBert(t *testing.T) *engine.Model {
	t.Helper()
	m, err := engine.Open(shareddata.SynthModel(t, "synth-bert-Q8_0.gguf"), engine.ModelParams{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

type embResp struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// /v1/embeddings answers as OpenAI's endpoint does, with the engine's
// normalized vectors, as floats or base64, for text and token inputs.
func TestEmbeddings(t *testing.T) {
	m := synthBert(t)
	_, ts := start(t, m, Config{Alias: "bert"})
	t.Cleanup(func() { m.Close() })
	texts := []string{"hello world", "The quick brown fox jumps over the lazy dog."}
	want, err := m.Embed(texts, engine.EmbedParams{Normalize: true})
	if err != nil {
		t.Fatal(err)
	}
	tokens := 0
	for _, s := range texts {
		ids, _ := m.Tokenize(s, true, false)
		tokens += len(ids)
	}
	for _, format := range []string{"", "float", "base64"} {
		body, _ := json.Marshal(map[string]any{"model": "bert", "input": texts, "encoding_format": format})
		resp, b := post(t, ts.URL+"/v1/embeddings", string(body))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("format %q: status %d: %s", format, resp.StatusCode, b)
		}
		var r embResp
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if r.Object != "list" || r.Model != "bert" || len(r.Data) != 2 || r.Usage.PromptTokens != tokens || r.Usage.TotalTokens != tokens {
			t.Fatalf("format %q: %s", format, b)
		}
		for i, d := range r.Data {
			var got []float32
			if format == "base64" {
				var s string
				if err := json.Unmarshal(d.Embedding, &s); err != nil {
					t.Fatalf("base64 embedding is not a string: %s", d.Embedding)
				}
				raw, err := base64.StdEncoding.DecodeString(s)
				if err != nil || len(raw) != 4*256 {
					t.Fatalf("base64: %v, %d bytes", err, len(raw))
				}
				for j := 0; j < len(raw); j += 4 {
					got = append(got, math.Float32frombits(binary.LittleEndian.Uint32(raw[j:])))
				}
			} else if err := json.Unmarshal(d.Embedding, &got); err != nil {
				t.Fatal(err)
			}
			if d.Index != i || d.Object != "embedding" || len(got) != 256 {
				t.Fatalf("entry %d: index %d, object %q, %d values", i, d.Index, d.Object, len(got))
			}
			for j := range got {
				if got[j] != want[i][j] {
					t.Fatalf("format %q, input %d, value %d: %g, want %g", format, i, j, got[j], want[i][j])
				}
			}
		}
	}

	// One string, token ids, and arrays of them.
	ids, _ := m.Tokenize("hello world", true, false)
	for _, in := range []any{"hello world", ids, [][]int32{ids, ids}} {
		body, _ := json.Marshal(map[string]any{"input": in})
		resp, b := post(t, ts.URL+"/v1/embeddings", string(body))
		var r embResp
		if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil {
			t.Fatalf("input %v: status %d: %s", in, resp.StatusCode, b)
		}
		var got []float32
		json.Unmarshal(r.Data[0].Embedding, &got)
		if len(got) != 256 || got[0] != want[0][0] {
			t.Fatalf("input %v: first value %v, want %g", in, got[:1], want[0][0])
		}
	}

	for _, c := range []struct{ body, code string }{
		{`{}`, "missing_input"},
		{`{"input": ""}`, ""},
		{`{"input": []}`, "invalid_type"},
		{`{"input": {"a": 1}}`, "invalid_type"},
		{`{"input": "x", "encoding_format": "int8"}`, "invalid_value"},
		{`{"input": "x", "dimensions": 128}`, "unsupported_parameter"},
		{`{"input": [101, 99999, 102]}`, "invalid_value"},
		{`{"input": [[101], []]}`, "invalid_value"},
	} {
		resp, b := post(t, ts.URL+"/v1/embeddings", c.body)
		if c.code == "" { // an empty text is [CLS] [SEP]: two tokens, embedded
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: status %d: %s", c.body, resp.StatusCode, b)
			}
			continue
		}
		checkError(t, c.body, resp, b, http.StatusBadRequest, c.code)
	}
	long := make([]int32, 513)
	for i := range long {
		long[i] = 101
	}
	body, _ := json.Marshal(map[string]any{"input": long})
	resp, b := post(t, ts.URL+"/v1/embeddings", string(body))
	checkError(t, "513 tokens", resp, b, http.StatusBadRequest, "context_length_exceeded")
	resp, b = do(t, http.MethodGet, ts.URL+"/v1/embeddings", "")
	checkError(t, "GET", resp, b, http.StatusMethodNotAllowed, "method_not_allowed")
}

// A decoder embeds too (mean pooling when its file names none).
func TestEmbeddingsDecoder(t *testing.T) {
	m, err := engine.Open(shareddata.Path(t, "models/stories260K.gguf"), engine.ModelParams{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	_, ts := start(t, m, Config{Ctx: 128})
	resp, b := post(t, ts.URL+"/v1/embeddings", `{"input": ["Once upon a time", "Lily"]}`)
	var r embResp
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil || len(r.Data) != 2 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var v []float32
	json.Unmarshal(r.Data[1].Embedding, &v)
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	if len(v) != m.Info().EmbeddingSize || math.Abs(norm-1) > 1e-4 {
		t.Fatalf("%d values of norm %g", len(v), norm)
	}
}

// An encoder served has no logits: completions are refused (400
// unsupported_model), and the server keeps embedding.
func TestEmbeddingsEncoderRefusesCompletions(t *testing.T) {
	m := synthBert(t)
	_, ts := start(t, m, Config{Alias: "bert"})
	t.Cleanup(func() { m.Close() })
	resp, b := post(t, ts.URL+"/v1/completions", `{"prompt": "hello", "max_tokens": 2}`)
	checkError(t, "completions", resp, b, http.StatusBadRequest, "unsupported_model")
	resp, b = post(t, ts.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}]}`)
	checkError(t, "chat", resp, b, http.StatusBadRequest, "unsupported_model")
	resp, b = post(t, ts.URL+"/v1/embeddings", `{"input": "still serving"}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("embeddings after a refused completion: %d %s", resp.StatusCode, b)
	}
}
