package main

import (
	"fmt"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/chat"
)

func (e engineModel) ApplyChatTemplateJSON(name string, messages, tools []byte, addAssistant bool) (string, error) {
	msgs, err := chat.ParseMessagesJSON(messages)
	if err != nil {
		return "", fmt.Errorf("%w: %w", engine.ErrInvalidArgument, err)
	}
	return e.m.ApplyChatTemplateTools(name, msgs, chat.JSON(tools), addAssistant)
}

func (e engineModel) ParseToolCalls(name, text string) (string, error) {
	f, err := e.m.ToolCallFormat(name)
	if err != nil {
		return "", err
	}
	return chat.ToolCallsJSON(chat.ParseToolCalls(f, text)), nil
}
