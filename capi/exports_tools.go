package main

/*
#include <string.h>
#include "moonlm.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Tool calling: conversations with tools given as JSON, rendered with the
// model's template, and generated text parsed back into calls.

// toolModel is what a backend model offers for tool calling (the engine's
// does; a backend without it reports MOONLM_UNSUPPORTED).
type toolModel interface {
	// ApplyChatTemplateJSON renders OpenAI-style messages (a JSON array)
	// with tools (a JSON array of function specs, nil for none) in the
	// built-in format name, or with the model's template when name is "".
	ApplyChatTemplateJSON(name string, messages, tools []byte, addAssistant bool) (string, error)
	// ParseToolCalls reads the calls in text, written in the format of the
	// template name ("" for the model's), as JSON.
	ParseToolCalls(name, text string) (string, error)
}

// cBytes copies n bytes at p ("" for n == 0), refusing more than maxTextBytes.
func cBytes(fn, what string, p *C.char, n C.size_t) ([]byte, C.int) {
	if p == nil && n != 0 {
		return nil, fail(stInvalid, fn, "%s is NULL but its length is %d", what, n)
	}
	if uint64(n) > maxTextBytes {
		return nil, fail(stInvalid, fn, "%s is %d bytes, more than %d (64 MiB)", what, uint64(n), maxTextBytes)
	}
	if n == 0 {
		return nil, stOK
	}
	return C.GoBytes(unsafe.Pointer(p), C.int(n)), stOK
}

// cStringBounded is a NUL-terminated C string of at most maxTextBytes.
func cStringBounded(fn, what string, p *C.char) ([]byte, C.int) {
	if p == nil {
		return nil, stOK
	}
	n := C.strnlen(p, maxTextBytes+1)
	if uint64(n) > maxTextBytes {
		return nil, fail(stInvalid, fn, "%s is longer than %d bytes (64 MiB)", what, maxTextBytes)
	}
	return cBytes(fn, what, p, n)
}

// toolLacks is the refusal of a model whose backend is no toolModel.
const toolLacks = "this library's backend has no tool calling"

//export moonlmgo_chat_apply_template_json
func moonlmgo_chat_apply_template_json(h C.uintptr_t, name, messages, tools *C.char, addAssistant C.int, out *C.char, cap C.size_t, nOut *C.size_t) C.int {
	const fn = "moonlm_chat_apply_template_json"
	return onModel(fn, h, toolLacks, func(tm toolModel) C.int {
		if messages == nil {
			return fail(stInvalid, fn, "messages_json is NULL")
		}
		msgs, st := cStringBounded(fn, "messages_json", messages)
		if st != stOK {
			return st
		}
		tl, st := cStringBounded(fn, "tools_json", tools)
		if st != stOK {
			return st
		}
		var tmpl string
		if name != nil {
			tmpl = C.GoString(name)
		}
		text, err := tm.ApplyChatTemplateJSON(tmpl, msgs, tl, addAssistant != 0)
		if err != nil {
			return failErr(fn, err)
		}
		return writeText(fn, text, out, cap, nOut)
	})
}

//export moonlmgo_chat_parse_tool_calls
func moonlmgo_chat_parse_tool_calls(h C.uintptr_t, name, text *C.char, n C.size_t, out *C.char, cap C.size_t, nOut *C.size_t) C.int {
	const fn = "moonlm_chat_parse_tool_calls"
	return onModel(fn, h, toolLacks, func(tm toolModel) C.int {
		b, st := cBytes(fn, "text", text, n)
		if st != stOK {
			return st
		}
		var tmpl string
		if name != nil {
			tmpl = C.GoString(name)
		}
		js, err := tm.ParseToolCalls(tmpl, string(b))
		if err != nil {
			return failErr(fn, fmt.Errorf("parsing %d bytes: %w", n, err))
		}
		return writeText(fn, js, out, cap, nOut)
	})
}
