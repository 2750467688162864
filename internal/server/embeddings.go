package server

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"

	"github.com/moonlm/moonlm/engine"
)

// /v1/embeddings: OpenAI's embeddings endpoint. The input is a string, an
// array of strings, an array of token ids or an array of arrays of them;
// each becomes one vector, pooled as the model file says (mean when it
// names none) and scaled to unit length, as OpenAI's and llama-server's
// are. encoding_format "base64" sends each vector as the base64 of its
// little-endian float32 bytes (what the official clients ask for and
// decode); "float" (the default) as a JSON array.

type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

type embeddingData struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

type embeddingResponse struct {
	Object string          `json:"object"`
	Data   []embeddingData `json:"data"`
	Model  string          `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

// maxEmbeddingInputs bounds the inputs of one request (OpenAI's limit).
const maxEmbeddingInputs = 2048

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	var req embeddingRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	m, _, e := s.ready()
	if e != nil {
		writeError(w, e)
		return
	}
	switch req.EncodingFormat {
	case "", "float", "base64":
	default:
		writeError(w, invalid("encoding_format", "invalid_value", "encoding_format: %q, want \"float\" or \"base64\"", req.EncodingFormat))
		return
	}
	if p := m.Pooling(); p == engine.PoolingNone || p == engine.PoolingRank {
		writeError(w, invalid("model", "unsupported_model", "this model's pooling is %s, which gives no embedding per input", p))
		return
	}
	size, err := m.EmbedSize(engine.PoolingModel)
	if err != nil {
		writeError(w, invalid("model", "unsupported_model", "this model cannot embed: %v", err))
		return
	}
	if req.Dimensions != nil && *req.Dimensions != size {
		writeError(w, invalid("dimensions", "unsupported_parameter", "dimensions: this model's embeddings have %d, not %d", size, *req.Dimensions))
		return
	}
	seqs, e := s.embeddingInputs(m, req.Input)
	if e != nil {
		writeError(w, e)
		return
	}
	// One request embeds at a time: each uses the model's whole worker
	// pool, and holds a session as long as its longest input.
	s.embedMu.Lock()
	vecs, err := m.EmbedTokens(seqs, engine.EmbedParams{Normalize: true})
	s.embedMu.Unlock()
	if err != nil {
		switch {
		case errors.Is(err, engine.ErrInvalidArgument), errors.Is(err, engine.ErrContextFull):
			writeError(w, invalid("input", "invalid_value", "input: %v", err))
		default:
			writeError(w, serverError(http.StatusInternalServerError, "internal_error", "embedding failed: %v", err))
		}
		return
	}
	resp := embeddingResponse{Object: "list", Model: s.cfg.Alias, Data: make([]embeddingData, len(vecs))}
	for i, v := range vecs {
		resp.Data[i] = embeddingData{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			b := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
			}
			resp.Data[i].Embedding = base64.StdEncoding.EncodeToString(b)
		}
		resp.Usage.PromptTokens += len(seqs[i])
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	writeJSON(w, http.StatusOK, resp)
}

// embeddingInputs reads input: a string, an array of strings, token ids,
// or an array of arrays of token ids. Text is tokenized with the model's
// special tokens ([CLS] ... [SEP] for BERT), special-token text not parsed.
func (s *Server) embeddingInputs(m *engine.Model, raw json.RawMessage) ([][]int32, *apiError) {
	if isNull(raw) {
		return nil, invalid("input", "missing_input", "input is required")
	}
	limit := s.cfg.Ctx
	if ctx := m.Info().ContextLength; limit <= 0 || m.Encoder() && ctx < limit {
		limit = ctx // an encoder's learned positions end there
	}
	vocab := int64(m.Tokenizer().VocabSize())
	check := func(toks []int32, param string) *apiError {
		if len(toks) == 0 {
			return invalid(param, "invalid_value", "%s: the input is empty", param)
		}
		if len(toks) > limit {
			return invalid(param, "context_length_exceeded", "%s: the input is %d tokens; this model embeds at most %d", param, len(toks), limit)
		}
		return nil
	}
	text := func(t, param string) ([]int32, *apiError) {
		toks, err := m.Tokenize(t, true, false)
		if err != nil {
			return nil, invalid(param, "invalid_value", "%s: %v", param, err)
		}
		return toks, check(toks, param)
	}
	tokens := func(ids []int64, param string) ([]int32, *apiError) {
		out := make([]int32, len(ids))
		for i, id := range ids {
			if id < 0 || id >= vocab {
				return nil, invalid(param, "invalid_value", "%s: token %d is outside the vocabulary of %d", param, id, vocab)
			}
			out[i] = int32(id)
		}
		return out, check(out, param)
	}
	tooMany := func(n int) *apiError {
		if n > maxEmbeddingInputs {
			return invalid("input", "invalid_value", "input: %d inputs, at most %d", n, maxEmbeddingInputs)
		}
		return nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		t, e := text(one, "input")
		return [][]int32{t}, e
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil && len(strs) > 0 {
		if e := tooMany(len(strs)); e != nil {
			return nil, e
		}
		out := make([][]int32, len(strs))
		for i, t := range strs {
			var e *apiError
			if out[i], e = text(t, fmt.Sprintf("input[%d]", i)); e != nil {
				return nil, e
			}
		}
		return out, nil
	}
	var ids []int64
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		t, e := tokens(ids, "input")
		return [][]int32{t}, e
	}
	var idss [][]int64
	if json.Unmarshal(raw, &idss) == nil && len(idss) > 0 {
		if e := tooMany(len(idss)); e != nil {
			return nil, e
		}
		out := make([][]int32, len(idss))
		for i, ids := range idss {
			var e *apiError
			if out[i], e = tokens(ids, fmt.Sprintf("input[%d]", i)); e != nil {
				return nil, e
			}
		}
		return out, nil
	}
	return nil, invalid("input", "invalid_type", "input: expected a string, an array of strings, or token ids")
}
