package chat

import (
	"strings"
	"unicode"
)

// Renderer renders a conversation; *Template and the built-in families
// returned by Family implement it.
type Renderer interface {
	Render(msgs []Message, addGenerationPrompt bool, bosToken, eosToken string) (string, error)
}

type familyFunc func(b *sbuf, msgs []Message, gen bool, bos, eos string)

type family struct {
	name string
	fn   familyFunc
}

func (f family) Render(msgs []Message, addGenerationPrompt bool, bosToken, eosToken string) (string, error) {
	var b sbuf
	f.fn(&b, msgs, addGenerationPrompt, bosToken, eosToken)
	return b.String(), nil
}

var families = map[string]familyFunc{
	"chatml":  renderChatML,
	"llama3":  renderLlama3,
	"llama2":  renderLlama2,
	"mistral": renderMistral,
	"gemma":   renderGemma,
	"phi3":    renderPhi3,
	"zephyr":  renderZephyr,
}

// Families lists the built-in family names.
func Families() []string {
	out := make([]string, 0, len(families))
	for k := range families {
		out = append(out, k)
	}
	// An insertion sort of the seven names: sort.Strings would link in its
	// generic string sort only for this.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// Family returns the built-in renderer of a template family: "chatml",
// "llama3", "llama2", "mistral", "gemma", "phi3" or "zephyr". Each writes
// the format of that family's reference Hugging Face template.
func Family(name string) (Renderer, error) {
	fn, ok := families[name]
	if !ok {
		return nil, errorf("chat: unknown template family %q (known: %s)", name, strings.Join(Families(), ", "))
	}
	return family{name: name, fn: fn}, nil
}

// containsNoInline is strings.Contains as one call (DetectFamily checks
// many markers).
//
//go:noinline
func containsNoInline(s, sub string) bool { return strings.Contains(s, sub) }

// DetectFamily names the family of a template from the marker strings in
// its source, or "" if none is recognised.
func DetectFamily(src string) string {
	has := func(s string) bool { return containsNoInline(src, s) }
	switch {
	case has("<|im_start|>"):
		return "chatml"
	case has("<|start_header_id|>"):
		return "llama3"
	case has("<start_of_turn>"):
		return "gemma"
	case has("<|user|>") && has("<|end|>"):
		return "phi3"
	case has("<|user|>"):
		return "zephyr"
	case has("[INST]") && has("<<SYS>>"):
		return "llama2"
	case has("[INST]"):
		return "mistral"
	}
	return ""
}

func renderChatML(b *sbuf, msgs []Message, gen bool, _, _ string) {
	for _, m := range msgs {
		b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
	}
	if gen {
		b.WriteString("<|im_start|>assistant\n")
	}
}

//go:noinline
func trimSpace(s string) string { return strings.TrimFunc(s, unicode.IsSpace) }

func renderLlama3(b *sbuf, msgs []Message, gen bool, bos, _ string) {
	b.WriteString(bos)
	for _, m := range msgs {
		b.WriteString("<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n" + trimSpace(m.Content) + "<|eot_id|>")
	}
	if gen {
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
}

// splitSystem separates a leading system message.
func splitSystem(msgs []Message) (string, bool, []Message) {
	if len(msgs) > 0 && msgs[0].Role == "system" {
		return msgs[0].Content, true, msgs[1:]
	}
	return "", false, msgs
}

func renderLlama2(b *sbuf, msgs []Message, _ bool, bos, eos string) {
	sys, hasSys, rest := splitSystem(msgs)
	for i, m := range rest {
		c := m.Content
		if i == 0 && hasSys {
			c = "<<SYS>>\n" + sys + "\n<</SYS>>\n\n" + c
		}
		switch m.Role {
		case "user":
			b.WriteString(bos + "[INST] " + trimSpace(c) + " [/INST]")
		case "assistant":
			b.WriteString(" " + trimSpace(c) + " " + eos)
		}
	}
}

func renderMistral(b *sbuf, msgs []Message, _ bool, bos, eos string) {
	sys, hasSys, rest := splitSystem(msgs)
	b.WriteString(bos)
	for i, m := range rest {
		c := m.Content
		if i == 0 && hasSys {
			c = sys + "\n\n" + c
		}
		switch m.Role {
		case "user":
			b.WriteString("[INST] " + c + " [/INST]")
		case "assistant":
			b.WriteString(c + eos)
		}
	}
}

func renderGemma(b *sbuf, msgs []Message, gen bool, bos, _ string) {
	sys, hasSys, rest := splitSystem(msgs)
	b.WriteString(bos)
	for i, m := range rest {
		role := m.Role
		if role == "assistant" {
			role = "model"
		}
		b.WriteString("<start_of_turn>" + role + "\n")
		if i == 0 && hasSys {
			b.WriteString(sys + "\n\n")
		}
		b.WriteString(trimSpace(m.Content) + "<end_of_turn>\n")
	}
	if gen {
		b.WriteString("<start_of_turn>model\n")
	}
}

func renderPhi3(b *sbuf, msgs []Message, gen bool, _, _ string) {
	for _, m := range msgs {
		b.WriteString("<|" + m.Role + "|>\n" + m.Content + "<|end|>\n")
	}
	if gen {
		b.WriteString("<|assistant|>\n")
	}
}

func renderZephyr(b *sbuf, msgs []Message, gen bool, _, eos string) {
	for _, m := range msgs {
		b.WriteString("<|" + m.Role + "|>\n" + m.Content + eos + "\n")
	}
	if gen {
		b.WriteString("<|assistant|>\n")
	}
}
