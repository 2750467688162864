// Package arch describes the model architectures the engine runs. A family
// (one file each: llama.go, qwen2.go, ...) declares three things and
// nothing else about it lives elsewhere:
//
//   - its hyperparameters, read from GGUF metadata on top of the keys every
//     family shares (Read), with its own facts (scales, windows,
//     model sizes) set in its Hparams function;
//   - its tensors: name, shape in terms of the hyperparameters, whether it
//     is optional, and which tensor stands in when it is absent (a tied
//     output head);
//   - its transformer block as a short sequence of Steps over the engine's
//     shared building blocks (norms, projections with optional biases,
//     RoPE, attention, activations, residuals).
//
// The engine derives from that one description the tensors it loads and
// checks, the matrices it packs and the session's scratch buffers. Adding
// an architecture is a file here, a line in the families table and tests.
package arch

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/moonlm/moonlm/gguf"
)

// Sentinel errors of reading a description from a file; the engine's
// ErrBadFile and ErrUnsupported are these values.
var (
	ErrBadFile     = errors.New("bad model file")
	ErrUnsupported = errors.New("unsupported")
)

// Family is one architecture, as named by general.architecture.
type Family struct {
	// Name is the general.architecture value.
	Name string
	// Hparams reads the family's own keys and sets its facts on p, whose
	// shared keys are already read; nil when there are none.
	Hparams func(m Meta, p *Params) error
	// Model lists the tensors outside the blocks, in load order.
	Model []Tensor
	// Layer lists each block's tensors (names after "blk.N."), in load
	// (and packing) order.
	Layer []Tensor
	// Block is one transformer block's computation.
	Block []Step
	// Variant, when set, returns the family that runs a model of these
	// hyperparameters in place of this one (llama with experts is
	// Mixtral's mixture of experts); nil keeps this one.
	Variant func(p *Params) *Family
	// ChatFormat is the built-in chat format (an engine/chat family name)
	// for a model without a usable template; "" guesses from the
	// vocabulary.
	ChatFormat string
	// LayerShapes: the family's layers may differ in shape (head counts,
	// head sizes, feed-forward widths given as per-layer arrays), and its
	// Hparams fills Params.Shapes. The shared keys then read as the
	// largest value of their arrays.
	LayerShapes bool
}

// families is the registry: one line per architecture.
var families = []*Family{
	&llama,
	&qwen2,
	&qwen3,
	&gemma3,
	&smollm3,
	&granite,
	&phi3,
	&gemma2,
	&olmo2,
	&mistral3,
	&exaone4,
	&cohere2,
	&gemma4,
	&bert,
	&nomicBert,
	&jinaBertV2,
	&qwen3moe,
	&olmoe,
	&qwen2moe,
	&gptOSS,
	&qwen35,
	&qwen35moe,
	&qwen3next,
}

// Lookup returns the family named name.
func Lookup(name string) (*Family, bool) {
	for _, f := range families {
		if f.Name == name {
			return f, true
		}
	}
	return nil, false
}

// Names lists the supported architectures, sorted.
func Names() []string {
	var s []string
	for _, f := range families {
		s = append(s, f.Name)
	}
	sort.Strings(s)
	return s
}

// Tensor returns the declaration of role r, from Model or Layer, or nil.
func (f *Family) Tensor(r Role) *Tensor {
	for _, ts := range [][]Tensor{f.Model, f.Layer} {
		for i := range ts {
			if ts[i].Role == r {
				return &ts[i]
			}
		}
	}
	return nil
}

// Activation is the FFN gate's activation.
type Activation int

const (
	SiLU Activation = iota // SwiGLU
	GELU                   // GeGLU with the tanh GELU
	// SwiGLUOAI is gpt-oss's clamped SwiGLU (its experts'):
	// min(g, 7)·sigmoid(1.702·min(g, 7)) · (clamp(u, -7, 7) + 1).
	SwiGLUOAI
)

// Params are a model's hyperparameters, with llama.cpp's defaults for
// missing optional keys.
type Params struct {
	Arch          string
	Name          string
	CtxTrain      int
	Dim           int
	Layers        int
	Heads         int
	KVHeads       int
	HeadDim       int // key length (n_embd_head_k)
	HeadDimV      int // value length (n_embd_head_v)
	FF            int
	Rot           int // RoPE dimensions per head
	Eps           float32
	RopeBase      float32
	RopeScale     float32 // linear position scale (1/factor), 1 = none
	Neox          bool    // NeoX RoPE layout (pairs i, i+n/2)
	Act           Activation
	EmbScale      float32 // embeddings multiplied by this, 1 = none
	QScale        float32 // Q multiplied by this before attention (a ScaleQ step), 1 = none
	KQScale       float32 // attention scores multiplied by this in softmax
	SWAWindow     int     // sliding window in positions; 0 = none
	SWAPattern    int     // every SWAPattern-th layer is global; the others slide
	RopeSWA       float32 // RoPE base for sliding-window layers; 0: they rotate as the others
	RopeScaleSWA  float32 // linear position scale for sliding-window layers, 1 = none
	AttnFactorSWA float32 // AttnFactor of sliding-window layers
	AttnSoftcap   float32 // attention scores become c*tanh(s/c) before the softmax; 0 = none
	FinalSoftcap  float32 // the logits become c*tanh(l/c); 0 = none
	NoRopeStep    int     // every NoRopeStep-th layer (counting from 1) skips RoPE; 0 = none
	ResScale      float32 // what a Residual step adds is multiplied by this, 1 = none
	LogitScale    float32 // the logits are multiplied by this, 1 = none
	AttnFactor    float32 // RoPE's cosines and sines are multiplied by this (rope.scaling.attn_factor), 1 = none
	CtxOrig       int     // the context the RoPE factors were trained for (rope.scaling.original_context_length)
	// YaRN (rope.scaling.type "yarn"): YarnExt is its extrapolation mix
	// (1, or 0 for other scaling types), its betas pick the pairs that
	// extrapolate and interpolate, and YarnLogMul is the multiplier of its
	// magnitude correction (rope.scaling.yarn_log_multiplier).
	YarnExt, YarnBetaFast, YarnBetaSlow, YarnLogMul float32
	// Llama 4's attention temperature: a TempQ step multiplies the queries
	// at position p by 1 + AttnTempScale*ln(floor(p/AttnTempFloor)+1).
	AttnTempScale float32
	AttnTempFloor int
	// LayerNorm makes every Norm step and the output norm a layer norm
	// (mean removed, no bias) instead of an RMS norm.
	LayerNorm bool
	// NonCausal: every token attends to the whole sequence (the
	// encoders); a sequence is then computed in one forward pass.
	NonCausal bool
	// AlibiMaxBias > 0 adds ALiBi to the attention scores: head h's
	// slope (from this maximum bias, as ggml's soft_max) times minus the
	// distance between query and key.
	AlibiMaxBias float32
	// Pooling is ARCH.pooling_type in llama.cpp's numbering (0 none,
	// 1 mean, 2 cls, 3 last, 4 rank), -1 when the file has none.
	Pooling int
	// ClsLabels is the classifier head's outputs (rank pooling): the
	// length of ARCH.classifier.output_labels, else 1.
	ClsLabels int
	// RankSoftmax: rank pooling ends in a softmax over the labels
	// (Qwen3-Reranker's yes/no head, as llama.cpp runs it).
	RankSoftmax bool
	// MoE describes the experts of a mixture-of-experts FFN (a MoE step).
	MoE MoEParams
	// AttnSinks: each head's softmax has one more term, exp of the head's
	// learned sink logit (the Sinks tensor), which takes weight from the
	// positions without adding a value (gpt-oss).
	AttnSinks bool
	// RotSWA is the RoPE dimensions of the sliding-window layers (Rot
	// unless rope.dimension_count_swa says otherwise).
	RotSWA int
	// PerLayerDim is the width of each layer's per-layer input (Gemma 4's
	// embedding_length_per_layer_input), 0 for none.
	PerLayerDim int
	// Shapes, when not nil, holds one entry per layer: the layers' own
	// head counts and sizes, feed-forward widths and KV caches (a family
	// with LayerShapes). Nil: every layer has the model's shape.
	Shapes []LayerShape
	// SSM describes the linear-attention (gated DeltaNet) layers of a
	// hybrid model; zero for the others.
	SSM SSMParams
}

// SSMParams describe the gated DeltaNet layers of a hybrid model
// (qwen35): a short causal convolution over the mixed Q, K, V channels,
// then per value head a State x State recurrent matrix updated by the
// delta rule with a decay gate.
type SSMParams struct {
	ConvK  int // ssm.conv_kernel: the convolution's width (its state keeps ConvK-1 inputs)
	Inner  int // ssm.inner_size: all value heads (VHeads * State)
	State  int // ssm.state_size: the key and value length of a head
	VHeads int // ssm.time_step_rank: value heads (each with its own state)
	KHeads int // ssm.group_count: query/key heads (value head h reads key head KeyHead(h))
	// Recurrent marks the linear-attention layers; the others are full
	// attention.
	Recurrent []bool
	// Grouped: the value heads are grouped by key head, value head h
	// reading key head h / (VHeads/KHeads) (Qwen3-Next); otherwise they
	// are tiled, reading h % KHeads (Qwen3.5, whose converter reorders
	// them).
	Grouped bool
	// FusedQKVZ: the layers project Q, K, V and Z with one ssm_in matrix
	// whose rows are grouped by key head (Qwen3-Next files converted
	// before attn_qkv and attn_gate were split out).
	FusedQKVZ bool
}

// KeyHead is the query/key head value head h reads.
func (s *SSMParams) KeyHead(h int) int {
	if s.Grouped {
		return h / (s.VHeads / s.KHeads)
	}
	return h % s.KHeads
}

// ConvDim is the convolution's channels: the queries, keys and values.
func (s *SSMParams) ConvDim() int { return 2*s.KHeads*s.State + s.Inner }

// Recurrent reports whether layer il is a linear-attention (recurrent)
// layer of a hybrid model.
func (p *Params) Recurrent(il int) bool {
	return il < len(p.SSM.Recurrent) && p.SSM.Recurrent[il]
}

// Hybrid reports whether the model has recurrent layers.
func (p *Params) Hybrid() bool { return len(p.SSM.Recurrent) > 0 }

// LayerKind picks the layers of a hybrid model a tensor or step belongs to.
type LayerKind uint8

const (
	AllLayers       LayerKind = iota
	AttnLayers                // the full-attention layers
	RecurrentLayers           // the linear-attention (recurrent) layers
)

// Has reports whether layer il of a model of p is of kind k.
func (k LayerKind) Has(p *Params, il int) bool {
	switch k {
	case AttnLayers:
		return !p.Recurrent(il)
	case RecurrentLayers:
		return p.Recurrent(il)
	}
	return true
}

// LayerShape is what may differ between the layers of one model.
type LayerShape struct {
	Heads, KVHeads, HeadDim, Rot, FF int
	Sliding                          bool
	// KVFrom is the layer whose KV cache this one attends over: itself,
	// or an earlier layer whose keys and values it shares (it then
	// computes none of its own).
	KVFrom int
}

// Layer is p as layer il sees it: the model's parameters with the
// layer's own shape (p itself, copied, when the layers do not differ).
func (p *Params) Layer(il int) Params {
	q := *p
	if p.Shapes == nil {
		return q
	}
	s := p.Shapes[il]
	q.Heads, q.KVHeads, q.HeadDim, q.HeadDimV, q.Rot, q.FF = s.Heads, s.KVHeads, s.HeadDim, s.HeadDim, s.Rot, s.FF
	return q
}

// SharesKV reports whether layer il attends over an earlier layer's KV
// cache instead of its own.
func (p *Params) SharesKV(il int) bool { return p.Shapes != nil && p.Shapes[il].KVFrom != il }

// QDim is the width of all query heads.
func (p *Params) QDim() int { return p.Heads * p.HeadDim }

// KVDim is the width of all key (or value) heads.
func (p *Params) KVDim() int { return p.KVHeads * p.HeadDim }

// Sliding reports whether layer il uses sliding-window attention.
func (p *Params) Sliding(il int) bool {
	if p.Shapes != nil {
		return p.Shapes[il].Sliding
	}
	return p.SWAWindow > 0 && p.SWAPattern > 0 && il%p.SWAPattern < p.SWAPattern-1
}

// Rotates reports whether layer il applies its RoPE step (layers without
// it, "NoPE", attend by content alone).
func (p *Params) Rotates(il int) bool {
	return p.NoRopeStep <= 0 || (il+1)%p.NoRopeStep != 0
}

// Size is a tensor dimension in terms of the hyperparameters.
type Size int

const (
	None     Size = iota // no such dimension (a vector's rows)
	Any                  // any length (token_embd's rows: the vocabulary)
	Vocab                // the rows of token_embd
	Dim                  // embedding length
	QDim                 // Heads * HeadDim
	KVDim                // KVHeads * HeadDim
	HeadDim              // one head
	FF                   // feed-forward length
	RotHalf              // Rot / 2 (per-pair RoPE factors)
	QKVDim               // QDim + 2*KVDim (fused Q, K, V)
	FF2                  // 2*FF (fused gate and up)
	Ctx                  // training context (learned position embeddings)
	Labels               // classifier outputs (Params.ClsLabels)
	Experts              // MoE.Experts (the router's rows)
	ExpFF                // MoE.FF (one expert's feed-forward length)
	ShFF                 // MoE.SharedFF (the shared expert's feed-forward length)
	QDim2                // 2*QDim (queries and their output gate, interleaved per head)
	ConvK                // SSM.ConvK
	ConvDim              // SSM.ConvDim()
	SSMInner             // SSM.Inner
	SSMState             // SSM.State
	SSMHeads             // SSM.VHeads
	NHeads               // Heads (one value per query head)
	PLDim                // PerLayerDim (one layer's per-layer input)
	PLAll                // PerLayerDim * Layers (every layer's per-layer input)
	One                  // a single value (a scalar weight)
	QKVZDim              // SSM.ConvDim() + SSM.Inner (Q, K, V and Z in one projection)
	BADim                // 2*SSM.VHeads (write strengths and decay inputs in one projection)
	ExpFF2               // 2*MoE.FF (one expert's gate and up in one matrix)
)

// Of returns the value of s; vocab is the rows of token_embd.
func (p *Params) Of(s Size, vocab int) int {
	switch s {
	case Vocab:
		return vocab
	case Dim:
		return p.Dim
	case QDim:
		return p.QDim()
	case KVDim:
		return p.KVDim()
	case HeadDim:
		return p.HeadDim
	case FF:
		return p.FF
	case RotHalf:
		return p.Rot / 2
	case QKVDim:
		return p.QDim() + 2*p.KVDim()
	case FF2:
		return 2 * p.FF
	case Ctx:
		return p.CtxTrain
	case Labels:
		return p.ClsLabels
	case Experts:
		return p.MoE.Experts
	case ExpFF:
		return p.MoE.FF
	case ShFF:
		return p.MoE.SharedFF
	case NHeads:
		return p.Heads
	case PLDim:
		return p.PerLayerDim
	case PLAll:
		return p.PerLayerDim * p.Layers
	case One:
		return 1
	case QDim2:
		return 2 * p.QDim()
	case ConvK:
		return p.SSM.ConvK
	case ConvDim:
		return p.SSM.ConvDim()
	case SSMInner:
		return p.SSM.Inner
	case SSMState:
		return p.SSM.State
	case SSMHeads:
		return p.SSM.VHeads
	case QKVZDim:
		return p.SSM.ConvDim() + p.SSM.Inner
	case BADim:
		return 2 * p.SSM.VHeads
	case ExpFF2:
		return 2 * p.MoE.FF
	}
	return -1
}

// Role is the slot a tensor fills, named by what the block does with it.
type Role int

const (
	NoRole Role = iota
	// Model-level tensors.
	TokenEmbd
	Output
	OutputNorm
	RopeFreqs // llama3's per-pair frequency divisors
	// Block tensors.
	AttnNorm
	WQ
	WK
	WV
	BQ
	BK
	BV
	QNorm
	KNorm
	WO
	BO
	PostAttnNorm
	FFNNorm
	Gate
	Up
	Down
	BGate
	BUp
	BDown
	PostFFNNorm
	// LongRoPE's per-pair frequency divisors (phi3), for contexts beyond
	// and within the original training context.
	RopeLong
	RopeShort
	// Fused matrices and biases, loaded as views of consecutive row
	// ranges that fill their parts' roles (Tensor.Fused).
	WQKV
	BQKV
	GateUp
	// Encoder tensors: learned position and token-type embeddings, the
	// embeddings' LayerNorm, the classifier head of rank pooling, and
	// the block's post-norms (LayerNorm weights and biases).
	PosEmbd
	TokenTypes
	EmbdNorm
	EmbdNormB
	Cls
	ClsB
	ClsOut
	ClsOutB
	AttnOutNorm
	AttnOutNormB
	LayerOutNorm
	LayerOutNormB
	GateInp      // MoE router: one row per expert
	GateExps     // MoE experts' gate matrices (PerExpert)
	UpExps       // MoE experts' up matrices (PerExpert)
	DownExps     // MoE experts' down matrices (PerExpert)
	GateInpShexp // MoE shared expert's gate: a vector of Dim
	GateShexp    // MoE shared expert's gate matrix
	UpShexp      // MoE shared expert's up matrix
	DownShexp    // MoE shared expert's down matrix
	BGateInp     // MoE router's bias (Experts)
	BGateExps    // MoE experts' gate biases (PerExpert vector: ExpFF per expert)
	BUpExps      // MoE experts' up biases (PerExpert vector: ExpFF per expert)
	BDownExps    // MoE experts' down biases (PerExpert vector: Dim per expert)
	Sinks        // attention sinks: one logit per query head (Params.AttnSinks)
	// Per-layer inputs (Gemma 4): the token's per-layer embeddings (a
	// lookup table of PLAll per token), the projection of the scaled
	// embeddings onto them and its norm; in each block the gate and
	// projection of the layer's input and the norm after it.
	PerLayerTokEmbd
	PerLayerModelProj
	PerLayerProjNorm
	PLGate
	PLProj
	PLPostNorm
	LayerOutScale // a scalar multiplying the block's output (Gemma 4)
	// Gated DeltaNet (linear attention) layers: the mixed Q, K, V
	// projection, the output gate's projection, the convolution's
	// weights, the decay's bias and scale, the write strength and decay
	// projections, the output's norm and projection.
	SSMQKV
	SSMGate
	SSMConv
	SSMDt
	SSMA
	SSMBeta
	SSMAlpha
	SSMNorm
	SSMOut
	BGateUp // fused biases of the gate and up projections
	// Qwen3-Next's DeltaNet projections grouped by key head: Q, K, V and
	// Z in one matrix (ssm_in), the write strengths and decay inputs in
	// another (ssm_ba).
	SSMInQKVZ
	SSMBetaAlpha
	// LayerNorm biases of the query and key norms (over all heads at
	// once, jina-bert-v2's), and a second post-attention LayerNorm with
	// its bias (jina-bert-v2's attn_norm_2).
	QNormB
	KNormB
	AttnNorm2
	AttnNorm2B
	// GateUpExps is the MoE experts' gate and up matrices in one
	// per-expert tensor (each expert's gate rows, then its up rows).
	GateUpExps
	NumRoles
)

// Tensor declares one tensor.
type Tensor struct {
	Role Role
	Name string // "token_embd.weight"; in a block, the part after "blk.N."
	// Cols and Rows are the GGUF shape (ne0, ne1); Rows is None for a
	// vector of Cols values.
	Cols, Rows Size
	// Optional tensors may be absent; a step using one skips it.
	Optional bool
	// TiedTo is the role whose tensor stands in when this one is absent
	// (the output head reusing token_embd).
	TiedTo Role
	// Fused, on a fused tensor, lists the roles its consecutive row ranges
	// (a vector's value ranges) hold, in order, each declared in the same
	// list after it. When the file has the fused tensor its parts are views
	// of it and are not looked up by name; a part with an empty Name exists
	// only inside the fused tensor. A part may have the fused tensor's own
	// name (older conversions wrote it unfused under that name): a file's
	// tensor of that name with the fused shape is the fused one, else the
	// parts are looked up by their names. A PerExpert fused tensor
	// (GateUpExps, the experts' gate and up) splits each expert's matrix
	// the same way, and is kept whole instead: the MoE step multiplies a
	// chosen expert's parts in one product, so its parts stay empty (and
	// are not looked up) and the fused matrices are the ones packed.
	Fused []Role
	// Lookup marks a model matrix whose rows are read one at a time
	// (position embeddings, a classifier head applied once per text):
	// it is never packed.
	Lookup bool
	// PerExpert marks a 3-D tensor of MoE.Experts matrices of Cols x Rows
	// (GGUF shape [Cols, Rows, Experts]), one per expert; on a vector
	// (Rows None), a 2-D tensor of one vector of Cols per expert (GGUF
	// shape [Cols, Experts]), loaded as one vector, expert e's at e*Cols.
	PerExpert bool
	// KV marks a tensor that computes the layer's own keys and values: a
	// layer that shares an earlier layer's KV cache (Params.SharesKV)
	// neither needs nor loads it.
	KV bool
	// Table marks a 2-D tensor read as Cols x Rows float32 values (the
	// convolution's weights), never multiplied as a matrix.
	Table bool
	// Only, in a hybrid family, is the kind of layer that has the tensor.
	Only LayerKind
}

// Matrix reports whether t is a weight matrix (multiplied by activations)
// rather than a vector (norm weights, biases, factors) or a table.
func (t *Tensor) Matrix() bool { return t.Rows != None && !t.Table }

// Buf is a per-token activation buffer of the session.
type Buf int

const (
	X   Buf = iota // the residual stream (Dim)
	XN             // a normed copy of X (Dim)
	Q              // queries (QDim)
	K              // keys (KVDim)
	V              // values (KVDim)
	Att            // attention output (QDim)
	O              // a projection back to Dim
	G              // FFN gate (FF)
	U              // FFN up (FF)
	O2             // a second projection back to Dim (parallel blocks)
	R              // MoE router logits (Experts)
	SH             // MoE shared expert's output (Dim)
	P              // the layer's per-layer input path (PerLayerDim)
	QG             // queries and their output gates, interleaved per head (2*QDim)
	AG             // attention output gate (QDim)
	MX             // a DeltaNet layer's mixed Q, K, V before the convolution (ConvDim)
	CV             // the same after the convolution (ConvDim)
	Z              // a DeltaNet layer's output gate (SSM.Inner)
	BT             // its write strengths, one per value head
	AL             // its decay inputs, one per value head
	DN             // its output (SSM.Inner)
	MXZ            // Qwen3-Next's Q, K, V and Z grouped by key head (ConvDim + Inner)
	BA             // Qwen3-Next's write strengths and decay inputs grouped by key head (2*VHeads)
	XI             // the layer's input, kept for a later step (Dim)
	NumBufs
)

// Op is a building block.
type Op int

const (
	OpNorm      Op = iota // Out = RMSNorm(In) * W
	OpHeadNorm            // In = per-head RMSNorm(In) * W (W of HeadDim)
	OpProject             // each Proj: Out = W . In, plus Bias when present
	OpRoPE                // rotate Q and K at their positions
	OpScaleQ              // Q *= Params.QScale
	OpAttend              // store K and V in the cache; Att = attention(Q)
	OpResidual            // X += Params.ResScale * In
	OpGLU                 // G = Act(G) * U
	OpTempQ               // Q *= Llama 4's attention temperature at the token's position
	OpLayerNorm           // Out = LayerNorm(In) * W + B (mean and variance)
	OpAct                 // In = Act(In), in place (an ungated FFN)
	OpMoE                 // Out = the chosen experts' FFNs of In, weighted by the router logits in R
	OpShGate              // Out += sigmoid(W . In) * SH (a MoE's gated shared expert)
	OpPerLayer            // In *= the layer's per-layer input (Params.PerLayerDim values)
	OpScale               // In *= W, a single value (skipped when the optional W is absent)
	OpSplitGate           // QG -> Q and AG (queries and gates interleaved per head)
	OpGate                // In *= sigmoid(AG)
	OpDeltaNet            // DN = gated DeltaNet of MX, Z, BT, AL, with the layer's recurrent state
	OpUngroup             // MXZ -> MX and Z, or BA -> BT and AL (projections grouped by key head)
	OpCopy                // Out = In (a value kept for a later step)
)

// Proj is one matrix product of a Project step.
type Proj struct {
	W    Role
	Bias Role // NoRole: none
	Out  Buf
}

// Step is one operation of a block.
type Step struct {
	Op      Op
	In, Out Buf
	W       Role
	B       Role // OpLayerNorm's bias
	Proj    []Proj
	// Only, in a hybrid family, is the kind of layer that runs the step.
	Only LayerKind
	// If, when set, is an optional tensor: only the layers that have it
	// run the step (the other steps of an optional norm, whose own step
	// skips itself where its weight is absent). Per-token steps only.
	If Role
}

// On returns st restricted to layers of kind k.
func (st Step) On(k LayerKind) Step { st.Only = k; return st }

// IfHas returns st run only by the layers that have tensor r.
func (st Step) IfHas(r Role) Step { st.If = r; return st }

// Copy sets out to a copy of in.
func Copy(in, out Buf) Step { return Step{Op: OpCopy, In: in, Out: out} }

// SplitGate splits the interleaved queries and gates of QG into Q and AG.
func SplitGate() Step { return Step{Op: OpSplitGate, In: QG, Out: Q} }

// OutGate multiplies in by sigmoid(AG), the attention's output gate.
func OutGate(in Buf) Step { return Step{Op: OpGate, In: in, Out: in} }

// DeltaNet is a gated DeltaNet layer's core: the causal convolution of MX
// (with its state), the per-head delta-rule recurrence, and the gated
// norm of its output with Z, into DN.
func DeltaNet() Step { return Step{Op: OpDeltaNet, In: MX, Out: DN} }

// Ungroup reorders a DeltaNet projection grouped by key head into the
// layout DeltaNet reads: MXZ (per key head its query, key, values and
// gates) into MX and Z, or BA (per key head its write strengths, then
// its decay inputs) into BT and AL.
func Ungroup(in Buf) Step {
	out := MX
	if in == BA {
		out = BT
	}
	return Step{Op: OpUngroup, In: in, Out: out}
}

// Norm is Out = RMSNorm(In) * w; with In == Out it norms in place.
func Norm(w Role, in, out Buf) Step { return Step{Op: OpNorm, W: w, In: in, Out: out} }

// HeadNorm norms every head of b with w; with w NoRole, the plain RMS
// norm without a weight.
func HeadNorm(b Buf, w Role) Step { return Step{Op: OpHeadNorm, W: w, In: b, Out: b} }

// PerLayer multiplies b by the layer's per-layer input (Gemma 4).
func PerLayer(b Buf) Step { return Step{Op: OpPerLayer, In: b, Out: b} }

// Scale multiplies b by the scalar weight w (skipped when the optional w
// is absent).
func Scale(b Buf, w Role) Step { return Step{Op: OpScale, W: w, In: b, Out: b} }

// Project multiplies in by each projection's matrix (the products run
// together, split over the threads).
func Project(in Buf, p ...Proj) Step { return Step{Op: OpProject, In: in, Proj: p} }

// RoPE rotates Q and K.
func RoPE() Step { return Step{Op: OpRoPE, In: Q, Out: K} }

// ScaleQ scales the queries by Params.QScale.
func ScaleQ() Step { return Step{Op: OpScaleQ, In: Q, Out: Q} }

// Attend stores K and V and computes causal attention of Q into Att.
func Attend() Step { return Step{Op: OpAttend, In: Q, Out: Att} }

// Residual adds in, times Params.ResScale, to the residual stream.
func Residual(in Buf) Step { return Step{Op: OpResidual, In: in, Out: X} }

// TempQ multiplies the queries by the attention temperature of their
// position (Params.AttnTempScale; nothing when it is 0).
func TempQ() Step { return Step{Op: OpTempQ, In: Q, Out: Q} }

// GLU is G = act(G) * U, with the activation in Params.Act.
func GLU() Step { return Step{Op: OpGLU, In: G, Out: G} }

// LayerNorm is Out = LayerNorm(In) * w + b; with In == Out it norms in
// place. An absent optional b is skipped; an absent optional w skips the
// step (as Norm's).
func LayerNorm(w, b Role, in, out Buf) Step {
	return Step{Op: OpLayerNorm, W: w, B: b, In: in, Out: out}
}

// Act applies Params.Act to b in place (the ungated FFN of the encoders).
func Act(b Buf) Step { return Step{Op: OpAct, In: b, Out: b} }

// MoE is the experts' feed-forward network of a mixture of experts: each
// token's router logits (buffer R) choose MoE.Used experts, whose SwiGLU
// networks (GateExps, UpExps, DownExps) of in are summed into out, each
// weighted as MoEParams says.
func MoE(in, out Buf) Step { return Step{Op: OpMoE, In: in, Out: out} }

// SharedGate adds the shared expert's output (buffer SH), gated by
// sigmoid(w . in), to out.
func SharedGate(in Buf, w Role, out Buf) Step {
	return Step{Op: OpShGate, In: in, W: w, Out: out}
}

// Meta reads one architecture's typed metadata keys ("ARCH.key").
type Meta struct {
	F    *gguf.File
	Arch string
	// varying: a per-layer array whose values differ reads as its
	// largest (Family.LayerShapes); otherwise it is ErrUnsupported.
	varying bool
}

func (m Meta) lookup(key string) (gguf.Value, bool) {
	return m.F.Lookup(m.Arch + "." + key)
}

// Uint reads an unsigned key (or a per-layer array whose values are all
// equal), def when it is absent and not required.
func (m Meta) Uint(key string, def int, required bool) (int, error) {
	v, ok := m.lookup(key)
	if !ok {
		if required {
			return 0, fmt.Errorf("%w: missing metadata key %s.%s", ErrBadFile, m.Arch, key)
		}
		return def, nil
	}
	if a, err := v.Array(); err == nil {
		// Per-layer arrays: llama.cpp accepts them; we need one value for all layers.
		if a.Len() == 0 {
			return 0, fmt.Errorf("%w: metadata key %s.%s is an empty array", ErrBadFile, m.Arch, key)
		}
		first, err := a.Uint64(0)
		if err != nil {
			return 0, fmt.Errorf("%w: metadata key %s.%s: %v", ErrBadFile, m.Arch, key, err)
		}
		for i := 1; i < a.Len(); i++ {
			x, err := a.Uint64(i)
			if err != nil {
				return 0, fmt.Errorf("%w: metadata key %s.%s: %v", ErrBadFile, m.Arch, key, err)
			}
			if x != first && !m.varying {
				return 0, fmt.Errorf("%w: metadata key %s.%s varies per layer", ErrUnsupported, m.Arch, key)
			}
			first = max(first, x)
		}
		if first > math.MaxInt32 {
			return 0, fmt.Errorf("%w: metadata key %s.%s = %d is out of range", ErrBadFile, m.Arch, key, first)
		}
		return int(first), nil
	}
	x, err := v.Uint64()
	if err != nil {
		return 0, fmt.Errorf("%w: metadata key %s.%s: %v", ErrBadFile, m.Arch, key, err)
	}
	if x > math.MaxInt32 {
		return 0, fmt.Errorf("%w: metadata key %s.%s = %d is out of range", ErrBadFile, m.Arch, key, x)
	}
	return int(x), nil
}

// Float reads a float key, def when it is absent.
func (m Meta) Float(key string, def float32) (float32, error) {
	v, ok := m.lookup(key)
	if !ok {
		return def, nil
	}
	x, err := v.Float64()
	if err != nil {
		return 0, fmt.Errorf("%w: metadata key %s.%s: %v", ErrBadFile, m.Arch, key, err)
	}
	return float32(x), nil
}

// String reads a string key, def when it is absent or not a string.
func (m Meta) String(key, def string) string {
	v, ok := m.lookup(key)
	if !ok {
		return def
	}
	s, err := v.String()
	if err != nil {
		return def
	}
	return s
}

func generalString(f *gguf.File, key string) string {
	v, ok := f.Lookup(key)
	if !ok {
		return ""
	}
	s, _ := v.String()
	return s
}

// Read finds f's family and reads its hyperparameters. An architecture
// without a family is ErrUnsupported naming it.
func Read(f *gguf.File) (*Family, Params, error) {
	var p Params
	p.Arch = generalString(f, "general.architecture")
	p.Name = generalString(f, "general.name")
	if p.Arch == "" {
		return nil, p, fmt.Errorf("%w: no general.architecture key", ErrBadFile)
	}
	fam, ok := Lookup(p.Arch)
	if !ok {
		return nil, p, fmt.Errorf("%w: architecture %q (supported: %s)", ErrUnsupported, p.Arch, strings.Join(Names(), ", "))
	}
	m := Meta{F: f, Arch: p.Arch, varying: fam.LayerShapes}
	if err := readShared(m, &p); err != nil {
		return nil, p, err
	}
	if fam.Hparams != nil {
		if err := fam.Hparams(m, &p); err != nil {
			return nil, p, err
		}
	}
	if p.YarnExt != 0 {
		p.AttnFactor *= yarnAttnFactor(1/p.RopeScale, p.YarnLogMul)
	}
	if fam.Variant != nil {
		if v := fam.Variant(&p); v != nil {
			fam = v
		}
	}
	return fam, p, nil
}

// yarnAttnFactor is the magnitude llama.cpp gives YaRN's RoPE for a
// context scaled by factor, in float32 as it computes it: its mscale
// ratio (1 + 0.1 ln factor, over 1 + 0.1 logMul ln factor when logMul is
// set), divided by the 1 + 0.1 ln factor that ggml's rope multiplies back.
func yarnAttnFactor(factor, logMul float32) float32 {
	mscale := func(m float32) float32 {
		if factor <= 1 {
			return 1
		}
		return float32(float32(0.1*m)*logf(factor)) + 1
	}
	a := mscale(1)
	if logMul != 0 {
		a = mscale(1) / mscale(logMul)
	}
	return a * (1 / (1 + float32(0.1*logf(factor))))
}

func logf(x float32) float32 { return float32(math.Log(float64(x))) }

// readShared reads the keys every family has.
func readShared(m Meta, p *Params) error {
	var err error
	if p.CtxTrain, err = m.Uint("context_length", 0, true); err != nil {
		return err
	}
	if p.Dim, err = m.Uint("embedding_length", 0, true); err != nil {
		return err
	}
	if p.Layers, err = m.Uint("block_count", 0, true); err != nil {
		return err
	}
	// Multi-token-prediction layers come last; llama.cpp keeps them in the
	// file and does not run them.
	nextn, err := m.Uint("nextn_predict_layers", 0, false)
	if err != nil {
		return err
	}
	if nextn > 0 {
		if nextn >= p.Layers {
			return fmt.Errorf("%w: %d of %d blocks are multi-token-prediction layers", ErrBadFile, nextn, p.Layers)
		}
		p.Layers -= nextn
	}
	if p.FF, err = m.Uint("feed_forward_length", 0, true); err != nil {
		return err
	}
	if p.Heads, err = m.Uint("attention.head_count", 0, true); err != nil {
		return err
	}
	if p.KVHeads, err = m.Uint("attention.head_count_kv", p.Heads, false); err != nil {
		return err
	}
	if p.Dim <= 0 || p.Layers <= 0 || p.FF <= 0 || p.Heads <= 0 || p.KVHeads <= 0 || p.CtxTrain <= 0 {
		return fmt.Errorf("%w: non-positive dimension (embedding %d, layers %d, ffn %d, heads %d, kv heads %d, context %d)",
			ErrBadFile, p.Dim, p.Layers, p.FF, p.Heads, p.KVHeads, p.CtxTrain)
	}
	if p.Heads%p.KVHeads != 0 {
		return fmt.Errorf("%w: %d heads is not a multiple of %d kv heads", ErrBadFile, p.Heads, p.KVHeads)
	}
	if p.HeadDim, err = m.Uint("attention.key_length", p.Dim/p.Heads, false); err != nil {
		return err
	}
	if p.HeadDimV, err = m.Uint("attention.value_length", p.Dim/p.Heads, false); err != nil {
		return err
	}
	if p.HeadDimV != p.HeadDim {
		return fmt.Errorf("%w: key length %d differs from value length %d", ErrUnsupported, p.HeadDim, p.HeadDimV)
	}
	if p.Rot, err = m.Uint("rope.dimension_count", p.HeadDim, false); err != nil {
		return err
	}
	if p.HeadDim <= 0 || p.Rot <= 0 || p.Rot > p.HeadDim || p.Rot%2 != 0 {
		return fmt.Errorf("%w: rope dimensions %d for head size %d", ErrBadFile, p.Rot, p.HeadDim)
	}
	p.RotSWA = p.Rot
	if p.Eps, err = m.Float("attention.layer_norm_rms_epsilon", 1e-5); err != nil {
		return err
	}
	if p.RopeBase, err = m.Float("rope.freq_base", 10000); err != nil {
		return err
	}
	p.RopeScale = 1
	switch st := m.String("rope.scaling.type", "linear"); st {
	case "linear", "none", "yarn":
		factor, err := m.Float("rope.scaling.factor", 0)
		if err != nil {
			return err
		}
		if factor == 0 {
			if factor, err = m.Float("rope.scale_linear", 0); err != nil {
				return err
			}
		}
		if factor != 0 && st != "none" {
			p.RopeScale = 1 / factor
		}
		if st == "yarn" {
			p.YarnExt = 1
		}
	default:
		return fmt.Errorf("%w: rope scaling type %q", ErrUnsupported, st)
	}
	if p.CtxOrig, err = m.Uint("rope.scaling.original_context_length", p.CtxTrain, false); err != nil {
		return err
	}
	if p.AttnFactor, err = m.Float("rope.scaling.attn_factor", 1); err != nil {
		return err
	}
	p.EmbScale, p.QScale, p.ResScale, p.LogitScale, p.RopeScaleSWA = 1, 1, 1, 1, 1
	p.AttnFactorSWA = p.AttnFactor
	p.YarnBetaFast, p.YarnBetaSlow = 32, 1
	p.KQScale = float32(1 / math.Sqrt(float64(p.HeadDim)))
	if p.Pooling, err = m.Uint("pooling_type", -1, false); err != nil {
		return err
	}
	if p.Pooling < -1 || p.Pooling > 4 {
		return fmt.Errorf("%w: metadata key %s.pooling_type = %d (want 0..4)", ErrBadFile, m.Arch, p.Pooling)
	}
	p.ClsLabels = 1
	if v, ok := m.lookup("classifier.output_labels"); ok {
		a, err := v.Array()
		if err != nil || a.Len() == 0 || a.Len() > 1<<16 {
			return fmt.Errorf("%w: metadata key %s.classifier.output_labels is not a list of 1 to 65536 labels", ErrBadFile, m.Arch)
		}
		p.ClsLabels = a.Len()
	}
	return nil
}

// Uints reads a per-layer key of n values: an array of n, or one value
// for every layer; def for every layer when it is absent and not required.
func (m Meta) Uints(key string, n, def int, required bool) ([]int, error) {
	out := make([]int, n)
	v, ok := m.lookup(key)
	if !ok {
		if required {
			return nil, fmt.Errorf("%w: missing metadata key %s.%s", ErrBadFile, m.Arch, key)
		}
		for i := range out {
			out[i] = def
		}
		return out, nil
	}
	a, err := v.Array()
	if err != nil {
		x, err := m.Uint(key, def, required)
		for i := range out {
			out[i] = x
		}
		return out, err
	}
	if a.Len() != n {
		return nil, fmt.Errorf("%w: metadata key %s.%s has %d values for %d layers", ErrBadFile, m.Arch, key, a.Len(), n)
	}
	for i := range out {
		x, err := a.Uint64(i)
		if err != nil || x > math.MaxInt32 {
			return nil, fmt.Errorf("%w: metadata key %s.%s[%d]: not a count (%v)", ErrBadFile, m.Arch, key, i, err)
		}
		out[i] = int(x)
	}
	return out, nil
}

// Bools reads a required per-layer array of n booleans.
func (m Meta) Bools(key string, n int) ([]bool, error) {
	v, ok := m.lookup(key)
	if !ok {
		return nil, fmt.Errorf("%w: missing metadata key %s.%s", ErrBadFile, m.Arch, key)
	}
	a, err := v.Array()
	if err != nil || a.Len() != n {
		return nil, fmt.Errorf("%w: metadata key %s.%s is not an array of %d booleans", ErrBadFile, m.Arch, key, n)
	}
	out := make([]bool, n)
	for i := range out {
		if out[i], err = a.Bool(i); err != nil {
			return nil, fmt.Errorf("%w: metadata key %s.%s[%d]: %v", ErrBadFile, m.Arch, key, i, err)
		}
	}
	return out, nil
}
