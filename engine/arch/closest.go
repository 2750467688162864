package arch

// resembles maps llama.cpp architecture names that have no family here to
// the supported family whose block they are closest to: same norm kind,
// gated FFN and RoPE, differing in what the target lacks (fused or mixture
// FFNs, extra norms, other scales). It answers "which family would this
// grow from", not "this runs": an architecture not listed has no close
// family (mamba's state-space block, encoder models, ...).
var resembles = map[string]string{
	"mistral3":      "llama", // the llama block plus an attention temperature
	"llama4":        "llama", // mixture-of-experts FFN, chunked attention
	"deci":          "llama", // per-layer head counts
	"baichuan":      "llama",
	"xverse":        "llama",
	"internlm2":     "llama", // fused QKV
	"exaone":        "llama",
	"phi3":          "llama", // fused QKV and gate/up, LongRoPE
	"qwen":          "qwen2", // fused QKV with a bias
	"qwen2vl":       "qwen2",
	"gemma":         "gemma3",
	"gemma2":        "gemma3", // soft-capping instead of Q/K norms
	"gemma3n":       "gemma3",
	"granitemoe":    "granite",
	"granitehybrid": "granite",
	"minicpm":       "granite", // scaled embeddings, residuals and logits
}

// Closest returns the supported family an unsupported architecture name
// resembles, and "" when none does. A supported name is its own family.
func Closest(name string) string {
	if _, ok := Lookup(name); ok {
		return name
	}
	if f, ok := resembles[name]; ok {
		if _, ok := Lookup(f); ok {
			return f
		}
	}
	return ""
}
