package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/moonlm/moonlm/engine/chat"
)

// ApplyChatTemplateTools is ApplyChatTemplateNamed for a conversation with
// tools: tools is a JSON array of OpenAI-style function specs (nil for
// none) and msgs may carry tool calls and tool results. The model's
// template receives tools if it has tool syntax; a template without it, and
// a built-in format (name), get them in the Hermes form (chat.ApplyTools).
// Malformed tools or tool calls are ErrInvalidArgument.
func (m *Model) ApplyChatTemplateTools(name string, msgs []chat.Message, tools chat.JSON, addAssistant bool) (string, error) {
	bos, eos := m.specialTexts()
	if name != "" {
		s, err := chat.RenderFamilyTools(name, msgs, tools, addAssistant, bos, eos)
		if err != nil {
			return "", fmt.Errorf("engine: chat format %s: %w: %w", name, ErrInvalidArgument, err)
		}
		return s, nil
	}
	if strings.TrimSpace(m.template) == "" {
		return "", fmt.Errorf("engine: %w: the model has no chat template (tokenizer.chat_template); name a built-in template to use instead: %s",
			ErrUnsupported, m.builtinTemplateHint())
	}
	s, _, err := chat.ApplyTools(m.template, msgs, tools, addAssistant, bos, eos)
	if errors.Is(err, chat.ErrUnusable) {
		return "", fmt.Errorf("engine: %w: the model's chat template cannot be used (%w); name a built-in template to use instead: %s",
			ErrUnsupported, err, m.builtinTemplateHint())
	}
	if err != nil {
		return "", fmt.Errorf("engine: chat template: %w: %w", ErrInvalidArgument, err)
	}
	return s, nil
}

// ToolCallFormat is the format the model writes tool calls in when its
// conversation is rendered with the built-in format name ("" for its own
// template): chat.ToolFormatOf the template, Hermes for a built-in format
// (the form ApplyChatTemplateTools describes to it).
func (m *Model) ToolCallFormat(name string) (chat.ToolFormat, error) {
	if name != "" {
		if _, err := chat.Family(name); err != nil {
			return "", fmt.Errorf("engine: chat template: %w: %w", ErrInvalidArgument, err)
		}
		return chat.ToolFormatHermes, nil
	}
	if strings.TrimSpace(m.template) == "" {
		return "", fmt.Errorf("engine: %w: the model has no chat template (tokenizer.chat_template); name a built-in template to use instead: %s",
			ErrUnsupported, m.builtinTemplateHint())
	}
	if _, err := chat.Parse(m.template); err != nil {
		// Rendered by its family's built-in format: tools the Hermes way.
		return chat.ToolFormatHermes, nil
	}
	return chat.ToolFormatOf(m.template), nil
}

// specialTexts are the BOS and EOS tokens' texts a template receives.
func (m *Model) specialTexts() (bos, eos string) {
	if id := m.tok.BOS(); id >= 0 {
		bos = m.tok.Token(id)
	}
	if id := m.tok.EOS(); id >= 0 {
		eos = m.tok.Token(id)
	}
	return bos, eos
}
