package arch

// resembles maps llama.cpp architecture names that have no family here to
// the supported family whose block they are closest to: same norm kind,
// gated FFN and RoPE, differing in what the target lacks (fused or mixture
// FFNs, extra norms, other scales). It answers "which family would this
// grow from", not "this runs": an architecture not listed has no close
// family (mamba's state-space block, encoder-decoders, ...).
var resembles = map[string]string{
	"llama4":        "llama", // mixture-of-experts FFN, chunked attention
	"deci":          "llama", // per-layer head counts
	"baichuan":      "llama",
	"xverse":        "llama",
	"internlm2":     "llama", // fused QKV
	"exaone":        "llama",
	"phimoe":        "phi3",  // mixture-of-experts FFN
	"qwen":          "qwen2", // fused QKV with a bias
	"qwen2vl":       "qwen2",
	"command-r":     "cohere2", // no sliding window, optional Q/K norms
	"gemma":         "gemma3",
	"gemma3n":       "gemma3",
	"granitemoe":    "granite",
	"granitehybrid": "granite",
	"minicpm":       "granite", // scaled embeddings, residuals and logits
	"modern-bert":   "bert",
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
