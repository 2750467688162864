package engine

import (
	"fmt"
	"math"
	"strings"

	"github.com/moonlm/moonlm/engine/arch"
	"github.com/moonlm/moonlm/engine/tokenizer"
	"github.com/moonlm/moonlm/gguf"
	"github.com/moonlm/moonlm/kernels"
)

// Pooling is how a text's per-token hidden states become its embedding.
type Pooling int

const (
	// PoolingModel is the model file's ARCH.pooling_type, or mean pooling
	// when the file names none (llama.cpp would return per-token vectors
	// there; a library call asking for one vector per text wants one).
	PoolingModel Pooling = iota
	// PoolingNone returns every token's hidden state, one row each.
	PoolingNone
	// PoolingMean averages the tokens' hidden states.
	PoolingMean
	// PoolingCLS takes the first token's (BERT's [CLS]).
	PoolingCLS
	// PoolingLast takes the last token's (Qwen3-Embedding).
	PoolingLast
	// PoolingRank applies the model's classifier head to the first
	// token's hidden state: a reranker's relevance score(s).
	PoolingRank
)

var poolingNames = [...]string{"model", "none", "mean", "cls", "last", "rank"}

func (p Pooling) String() string {
	if p >= 0 && int(p) < len(poolingNames) {
		return poolingNames[p]
	}
	return fmt.Sprintf("Pooling(%d)", int(p))
}

// ParsePooling reads a pooling name: model, none, mean, cls, last or rank.
func ParsePooling(s string) (Pooling, error) {
	for i, n := range poolingNames {
		if strings.EqualFold(s, n) {
			return Pooling(i), nil
		}
	}
	return 0, fmt.Errorf("engine: %w: pooling %q (want one of %s)", ErrInvalidArgument, s, strings.Join(poolingNames[:], ", "))
}

// EmbedParams configure embedding.
type EmbedParams struct {
	// Pooling is the pooling; the zero value is the model's.
	Pooling Pooling
	// Normalize scales each vector (each token's, with PoolingNone) to
	// unit Euclidean length. Rank scores are never normalized.
	Normalize bool
}

// Pooling is the pooling PoolingModel stands for with this model.
func (m *Model) Pooling() Pooling {
	// ARCH.pooling_type in llama.cpp's numbering is ours minus one.
	if p := m.cfg.Pooling; p >= 0 {
		return Pooling(p + 1)
	}
	return PoolingMean
}

// resolvePooling checks p against the model and resolves PoolingModel.
func (m *Model) resolvePooling(p Pooling) (Pooling, error) {
	if p == PoolingModel {
		p = m.Pooling()
	}
	switch p {
	case PoolingNone, PoolingMean, PoolingCLS, PoolingLast:
		return p, nil
	case PoolingRank:
		if !m.encoder && m.glob.mats[arch.ClsOut].Data == nil {
			return p, fmt.Errorf("%w: rank pooling on %s without a reranker head (cls.output)", ErrUnsupported, m.cfg.Arch)
		}
		return p, nil
	}
	return p, fmt.Errorf("%w: pooling %d", ErrInvalidArgument, int(p))
}

// EmbedSize is the length of one vector of pooling p: the hidden size, or
// for rank pooling the classifier's outputs (cls.output's rows, or a
// head of cls alone, as jina-reranker-v1's, cls's; the hidden size for a
// model without a classifier head). With PoolingNone each token has one.
func (m *Model) EmbedSize(p Pooling) (int, error) {
	p, err := m.resolvePooling(p)
	if err != nil {
		return 0, fmt.Errorf("engine: embed: %w", err)
	}
	if p == PoolingRank {
		if co := &m.glob.mats[arch.ClsOut]; co.Data != nil {
			return co.Rows, nil
		}
		if cls := &m.glob.mats[arch.Cls]; cls.Data != nil {
			return cls.Rows, nil
		}
	}
	return m.cfg.Dim, nil
}

// embedState is one embedding pass's pooling, read by embedChunk after
// each forward chunk: one text (Embed, a decoder's texts) or several packed
// into one batch (an encoder's EmbedBatch).
type embedState struct {
	pooling Pooling
	texts   []embedText
	active  bool      // a pass is running (eval pools instead of computing logits)
	acc     []float64 // mean pooling's sums, hidden size per text
	rows    []float32 // rank pooling's first-token states, hidden size per text
	head    []float32 // the classifier's dense output (hidden size)
	xq      []byte    // a head's input in its vec-dot type
	tokens  []int32   // the packed pass's tokens
}

// embedText is one text of a pass: its result and token count.
type embedText struct {
	out []float32
	n   int
}

// embedding reports whether an embedding pass is running (eval then pools
// each chunk instead of computing logits).
func (s *Session) embedding() bool { return s.embed != nil && s.embed.active }

// embedCheck checks tokens and out for pooling and returns the values the
// result takes.
func (s *Session) embedCheck(tokens []int32, pooling Pooling, out []float32) (int, error) {
	size, err := s.m.EmbedSize(pooling)
	if err != nil {
		return 0, err
	}
	if len(tokens) == 0 {
		return 0, fmt.Errorf("engine: embed: %w: no tokens", ErrInvalidArgument)
	}
	if len(tokens) > s.nCtx {
		return 0, fmt.Errorf("engine: embed: %w: %d tokens > context %d", ErrContextFull, len(tokens), s.nCtx)
	}
	need := size
	if pooling == PoolingNone {
		need = len(tokens) * s.m.cfg.Dim
	}
	if len(out) < need {
		return 0, fmt.Errorf("engine: embed: %w: output of %d values for %d", ErrInvalidArgument, len(out), need)
	}
	return need, nil
}

// Embed computes the embedding of one text's tokens into out and returns
// how many values it wrote: EmbedSize values, or one row of the hidden size
// per token with PoolingNone. The session is used from position 0 and left
// empty (Pos 0). An encoder's text must fit the session's context in one
// piece; a decoder's goes in chunks, attending causally.
func (s *Session) Embed(tokens []int32, p EmbedParams, out []float32) (n int, err error) {
	pooling, err := s.m.resolvePooling(p.Pooling)
	if err != nil {
		return 0, fmt.Errorf("engine: embed: %w", err)
	}
	need, err := s.embedCheck(tokens, pooling, out)
	if err != nil {
		return 0, err
	}
	if err := s.enter("embed"); err != nil {
		return 0, err
	}
	defer s.leave()
	if err := s.embedPass(tokens, []embedText{{out: out[:need], n: len(tokens)}}, pooling, p.Normalize); err != nil {
		return 0, err
	}
	return need, nil
}

// EmbedBatch embeds each token list into the matching outs entry (as
// Embed writes one). An encoder's texts are packed, as many as the
// session's context holds, into one forward pass each: every token
// attends to its own text only, and a batch of short texts costs few
// passes. A decoder's are computed one after another.
func (s *Session) EmbedBatch(seqs [][]int32, p EmbedParams, outs [][]float32) error {
	pooling, err := s.m.resolvePooling(p.Pooling)
	if err != nil {
		return fmt.Errorf("engine: embed: %w", err)
	}
	if len(outs) != len(seqs) {
		return fmt.Errorf("engine: embed: %w: %d outputs for %d texts", ErrInvalidArgument, len(outs), len(seqs))
	}
	texts := make([]embedText, len(seqs))
	for i, sq := range seqs {
		need, err := s.embedCheck(sq, pooling, outs[i])
		if err != nil {
			return fmt.Errorf("text %d: %w", i, err)
		}
		texts[i] = embedText{out: outs[i][:need], n: len(sq)}
	}
	if err := s.enter("embed"); err != nil {
		return err
	}
	defer s.leave()
	if !s.m.encoder {
		for i, sq := range seqs {
			if err := s.embedPass(sq, texts[i:i+1], pooling, p.Normalize); err != nil {
				return fmt.Errorf("text %d: %w", i, err)
			}
		}
		return nil
	}
	s.ensurePacking()
	e := s.embed
	for i := 0; i < len(seqs); {
		// Texts i..j-1 fill one pass.
		j, total := i, 0
		for j < len(seqs) && total+len(seqs[j]) <= s.nb {
			total += len(seqs[j])
			j++
		}
		e.tokens = e.tokens[:0]
		for k := i; k < j; k++ {
			for pos := range seqs[k] {
				t := len(e.tokens)
				s.packText[t], s.packPos[t] = int32(k-i), int32(pos)
				s.packFirst[t], s.packLast[t] = int32(t-pos), int32(t-pos+len(seqs[k])-1)
				e.tokens = append(e.tokens, seqs[k][pos])
			}
		}
		s.packed = true
		err := s.embedPass(e.tokens, texts[i:j], pooling, p.Normalize)
		s.packed = false
		if err != nil {
			return fmt.Errorf("texts %d to %d: %w", i, j-1, err)
		}
		i = j
	}
	return nil
}

// ensurePacking makes an encoder session's per-token packing tables.
func (s *Session) ensurePacking() {
	if s.packPos == nil {
		s.packPos = make([]int32, s.nb)
		s.packFirst = make([]int32, s.nb)
		s.packLast = make([]int32, s.nb)
		s.packText = make([]int32, s.nb)
	}
	s.embedScratch(1)
	if cap(s.embed.tokens) < s.nb {
		s.embed.tokens = make([]int32, 0, s.nb)
	}
}

// embedScratch sizes the pooling state for n texts.
func (s *Session) embedScratch(n int) {
	dim := s.m.cfg.Dim
	if s.embed == nil {
		s.embed = &embedState{head: make([]float32, dim), xq: make([]byte, kernels.RowBytes(gguf.F32, dim))}
	}
	e := s.embed
	if len(e.acc) < n*dim {
		e.acc = make([]float64, n*dim)
		e.rows = make([]float32, n*dim)
	}
}

// embedPass runs tokens (one text, or with s.packed the texts' tokens
// packed) from position 0 and pools them into texts' outputs.
func (s *Session) embedPass(tokens []int32, texts []embedText, pooling Pooling, normalize bool) error {
	s.embedScratch(len(texts))
	e := s.embed
	dim := s.m.cfg.Dim
	e.pooling, e.texts, e.active = pooling, texts, true
	clear(e.acc[:len(texts)*dim])
	s.setPos(0)
	err := s.eval("embed", tokens, nil, len(tokens))
	e.active, e.texts = false, nil
	s.setPos(0)
	if err != nil {
		return err
	}
	for ti, tx := range texts {
		switch pooling {
		case PoolingMean:
			for j, v := range e.acc[ti*dim : (ti+1)*dim] {
				tx.out[j] = float32(v / float64(tx.n))
			}
		case PoolingRank:
			s.rankHead(e.rows[ti*dim:(ti+1)*dim], tx.out)
		}
		if normalize && pooling != PoolingRank {
			for r := 0; r+dim <= len(tx.out); r += dim {
				normalizeL2(tx.out[r : r+dim])
			}
		}
	}
	return nil
}

// embedChunk pools the hidden states of the chunk just computed: tokens
// done.. done+n of the pass.
func (s *Session) embedChunk(done, n int) {
	e := s.embed
	dim := s.m.cfg.Dim
	for t := 0; t < n; t++ {
		ti, i := 0, done+t // the token's text and its position there
		if s.packed {
			ti, i = int(s.packText[t]), int(s.packPos[t])
		}
		tx := &e.texts[ti]
		// Rank pooling reads an encoder's first token, a decoder's last
		// (the one that has seen the whole text), as llama.cpp.
		rankAt := 0
		if !s.c.NonCausal {
			rankAt = tx.n - 1
		}
		rankHere := e.pooling == PoolingRank && i == rankAt
		want := e.pooling == PoolingNone || e.pooling == PoolingMean || rankHere ||
			(i == 0 && e.pooling == PoolingCLS) ||
			(i == tx.n-1 && e.pooling == PoolingLast)
		if !want {
			continue
		}
		h := s.hidden(t)
		switch e.pooling {
		case PoolingNone:
			copy(tx.out[i*dim:], h)
		case PoolingMean:
			acc := e.acc[ti*dim : (ti+1)*dim]
			for j, v := range h {
				acc[j] += float64(v)
			}
		case PoolingRank:
			copy(e.rows[ti*dim:], h)
		default:
			copy(tx.out, h)
		}
	}
}

// hidden is chunk token t's final hidden state: the residual stream after
// the output norm (decoders, as llama.cpp's embeddings) or as the last
// block left it (encoders).
func (s *Session) hidden(t int) []float32 {
	x := s.tok(arch.X, t)
	if s.m.encoder {
		return x
	}
	xn := s.tok(arch.XN, t)
	s.ops.RMSNorm(xn, x, s.m.outputNorm, s.c.Eps)
	return xn
}

// rankHead applies the classifier head to x, a text's first-token hidden
// state (a decoder's: its last token's, after the output norm): tanh(cls .
// x + cls.bias), then cls.output and its bias, each present only if the
// file has it, then a softmax where the family asks for one
// (Params.RankSoftmax), as llama.cpp's rank pooling.
func (s *Session) rankHead(x, out []float32) {
	m, e := s.m, s.embed
	g := &m.glob
	if cls := &g.mats[arch.Cls]; cls.Data != nil {
		y := e.head[:cls.Rows]
		s.rowsTimes(cls, x, y)
		if b := g.vecs[arch.ClsB]; b != nil {
			kernels.Add(y, y, b)
		}
		for i, v := range y {
			y[i] = float32(math.Tanh(float64(v)))
		}
		x = y
	}
	if co := &g.mats[arch.ClsOut]; co.Data != nil {
		s.rowsTimes(co, x, out)
		if b := g.vecs[arch.ClsOutB]; b != nil {
			kernels.Add(out, out, b)
		}
		if s.c.RankSoftmax {
			softmax(out[:co.Rows])
		}
		return
	}
	copy(out, x)
}

// rowsTimes sets y = mt . x with the activations converted to the
// matrix's vec-dot type, as ggml multiplies (the head's matrices are never
// packed: Tensor.Lookup).
func (s *Session) rowsTimes(mt *kernels.Matrix, x, y []float32) {
	e := s.embed
	at := kernels.VecDotType(mt.Type)
	xq := e.xq[:kernels.RowBytes(at, len(x))]
	kernels.QuantizeRow(at, x, xq)
	s.kern.MatVec(mt, xq, y[:mt.Rows], 0, mt.Rows)
}

// softmax replaces v by its softmax.
func softmax(v []float32) {
	mx := float32(math.Inf(-1))
	for _, x := range v {
		mx = max(mx, x)
	}
	var sum float64
	for i, x := range v {
		e := math.Exp(float64(x - mx))
		v[i] = float32(e)
		sum += e
	}
	for i := range v {
		v[i] = float32(float64(v[i]) / sum)
	}
}

// normalizeL2 scales v to unit Euclidean length (a zero vector stays zero).
func normalizeL2(v []float32) {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum == 0 {
		return
	}
	inv := float32(1 / math.Sqrt(sum))
	for i := range v {
		v[i] *= inv
	}
}

// EmbedTokens embeds each token list (Session.EmbedBatch) in a session of
// its own, closed before returning, and returns one result per list. An
// encoder's session holds as many tokens as its training context allows
// (the texts are packed into passes of that size); a decoder's, the
// longest list.
func (m *Model) EmbedTokens(seqs [][]int32, p EmbedParams) ([][]float32, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	longest, total := 0, 0
	for i, sq := range seqs {
		if len(sq) == 0 {
			return nil, fmt.Errorf("engine: embed: %w: text %d has no tokens", ErrInvalidArgument, i)
		}
		longest = max(longest, len(sq))
		total += len(sq)
	}
	if limit := min(m.cfg.CtxTrain, maxEncoderCtx); m.encoder && longest > limit {
		return nil, fmt.Errorf("engine: embed: %w: a text of %d tokens > the encoder's %d positions", ErrContextFull, longest, limit)
	}
	size, err := m.EmbedSize(p.Pooling)
	if err != nil {
		return nil, err
	}
	pooling, _ := m.resolvePooling(p.Pooling)
	nCtx := longest
	if m.encoder {
		nCtx = min(m.cfg.CtxTrain, maxEncoderCtx, max(longest, total))
	}
	s, err := m.NewSession(SessionParams{NCtx: nCtx})
	if err != nil {
		return nil, fmt.Errorf("engine: embed: %w", err)
	}
	defer s.Close()
	res := make([][]float32, len(seqs))
	for i, sq := range seqs {
		n := size
		if pooling == PoolingNone {
			n = len(sq) * m.cfg.Dim
		}
		res[i] = make([]float32, n)
	}
	if err := s.EmbedBatch(seqs, p, res); err != nil {
		return nil, err
	}
	return res, nil
}

// Embed tokenizes each text (with the model's special tokens added, as
// BERT's [CLS] ... [SEP]; special-token text in it is not parsed) and
// embeds it (EmbedTokens).
func (m *Model) Embed(texts []string, p EmbedParams) ([][]float32, error) {
	seqs := make([][]int32, len(texts))
	for i, t := range texts {
		ids, err := m.Tokenize(t, true, false)
		if err != nil {
			return nil, fmt.Errorf("engine: embed: text %d: %w", i, err)
		}
		seqs[i] = ids
	}
	return m.EmbedTokens(seqs, p)
}

// RerankTokens is the token list a reranker scores for a query and a
// document, as llama.cpp makes it. A model with a rerank prompt template
// (tokenizer.chat_template.rerank, as Qwen3-Reranker's files carry) gets
// the template with {query} and {document} replaced, tokenized with its
// special tokens; others get the query as Tokenize frames it, SEP when
// the vocabulary joins pairs with it (add_sep: <s> query </s> </s>
// document </s> for jina-reranker-v1's BPE vocabulary), then the document
// framed the same way without a leading BOS ([CLS] query [SEP] document
// [SEP] for BERT), as llama-embedding joins a pair.
func (m *Model) RerankTokens(query, doc string) ([]int32, error) {
	if v, ok := m.f.Lookup("tokenizer.chat_template.rerank"); ok {
		if tmpl, err := v.String(); err == nil && tmpl != "" {
			text := strings.NewReplacer("{query}", query, "{document}", doc).Replace(tmpl)
			ids, err := m.Tokenize(text, true, true)
			if err != nil {
				return nil, fmt.Errorf("engine: rerank: %w", err)
			}
			return ids, nil
		}
	}
	q, err := m.Tokenize(query, true, false)
	if err != nil {
		return nil, fmt.Errorf("engine: rerank: query: %w", err)
	}
	d, err := m.Tokenize(doc, true, false)
	if err != nil {
		return nil, fmt.Errorf("engine: rerank: document: %w", err)
	}
	if bos := m.tok.BOS(); m.tok.AddBOS() && len(d) > 0 && d[0] == bos {
		d = d[1:]
	}
	if sep := m.tok.SEP(); m.tok.AddSep() && m.tok.Kind() != tokenizer.WPM && sep >= 0 {
		q = append(q, sep) // WordPiece's framing has put it there already
	}
	return append(q, d...), nil
}

// Rerank scores each document's relevance to query with rank pooling (the
// classifier head's first output: a logit for BERT rerankers, tanh of one
// for jina-reranker-v1 (a head of cls alone), the probability of "yes"
// for Qwen3-Reranker; higher is more relevant).
func (m *Model) Rerank(query string, docs []string) ([]float32, error) {
	seqs := make([][]int32, len(docs))
	for i, d := range docs {
		ids, err := m.RerankTokens(query, d)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		seqs[i] = ids
	}
	res, err := m.EmbedTokens(seqs, EmbedParams{Pooling: PoolingRank})
	if err != nil {
		return nil, err
	}
	scores := make([]float32, len(res))
	for i, r := range res {
		scores[i] = r[0]
	}
	return scores, nil
}

// Encoder reports whether the model is an encoder (BERT): it only embeds
// (no logits), and a text must fit its training context.
func (m *Model) Encoder() bool { return m.encoder }
