package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// responder writes a generation's answer: streamed chunks, or one
// response at the end. text and finish report a failed write (the client
// is gone).
type responder interface {
	// text writes text and the log-probabilities of the tokens that
	// released it (nil unless asked for).
	text(idx int, t string, lps []tokenLogprob) error
	toolCalls(idx int, calls []toolCallOut) error
	// reasoning writes the reply's reasoning (reasoning_content).
	reasoning(idx int, t string) error
	finish(idx int, reason string) error
	done(u usage)
	fail(e *apiError)
}

// wholeResponder collects the text and writes one response.
type wholeResponder struct {
	w        http.ResponseWriter
	model    string
	chat     bool
	logprobs bool
	texts    []strings.Builder
	lps      [][]tokenLogprob
	calls    [][]toolCallOut
	reasons  []string
	thought  []string
}

func newWholeResponder(w http.ResponseWriter, model string, isChat bool, n int, logprobs bool) *wholeResponder {
	return &wholeResponder{w: w, model: model, chat: isChat, logprobs: logprobs, texts: make([]strings.Builder, n),
		lps: make([][]tokenLogprob, n), calls: make([][]toolCallOut, n), reasons: make([]string, n),
		thought: make([]string, n)}
}

func (o *wholeResponder) text(idx int, t string, lps []tokenLogprob) error {
	o.texts[idx].WriteString(t)
	o.lps[idx] = append(o.lps[idx], lps...)
	return nil
}

func (o *wholeResponder) toolCalls(idx int, calls []toolCallOut) error {
	o.calls[idx] = append(o.calls[idx], calls...)
	return nil
}

func (o *wholeResponder) reasoning(idx int, t string) error { o.thought[idx] += t; return nil }

func (o *wholeResponder) finish(idx int, reason string) error { o.reasons[idx] = reason; return nil }

func (o *wholeResponder) done(u usage) {
	created := time.Now().Unix()
	if o.chat {
		resp := chatResponse{ID: newID("chatcmpl-"), Object: "chat.completion", Created: created, Model: o.model, Usage: u}
		for i := range o.texts {
			c := chatChoice{Index: i, FinishReason: o.reasons[i],
				Message: chatMessageOut{Role: "assistant", ToolCalls: o.calls[i], ReasoningContent: o.thought[i]}}
			if t := o.texts[i].String(); t != "" || len(o.calls[i]) == 0 {
				c.Message.Content = &t
			}
			if o.logprobs {
				c.Logprobs = &chatLogprobs{Content: o.lps[i]}
				if c.Logprobs.Content == nil {
					c.Logprobs.Content = []tokenLogprob{}
				}
			}
			resp.Choices = append(resp.Choices, c)
		}
		writeJSON(o.w, http.StatusOK, resp)
		return
	}
	resp := completionResponse{ID: newID("cmpl-"), Object: "text_completion", Created: created, Model: o.model, Usage: &u}
	for i := range o.texts {
		f := o.reasons[i]
		c := completionChoice{Index: i, Text: o.texts[i].String(), FinishReason: &f}
		if o.logprobs {
			c.Logprobs = completionLogprobsOf(o.lps[i], 0)
		}
		resp.Choices = append(resp.Choices, c)
	}
	writeJSON(o.w, http.StatusOK, resp)
}

func (o *wholeResponder) fail(e *apiError) { writeError(o.w, e) }

// streamResponder writes server-sent events: a chunk per piece of text,
// one with each choice's finish_reason, the usage chunk if asked for, then
// "data: [DONE]".
type streamResponder struct {
	w            http.ResponseWriter
	rc           *http.ResponseController
	id           string
	model        string
	created      int64
	chat         bool
	includeUsage bool
	logprobs     bool
	offsets      []int // per choice, the text offset of the next token (completions' logprobs)
	buf          []byte
	err          error
}

func newStreamResponder(w http.ResponseWriter, model string, isChat bool, n int, includeUsage, logprobs bool) *streamResponder {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	o := &streamResponder{w: w, rc: http.NewResponseController(w), model: model, created: time.Now().Unix(), chat: isChat,
		includeUsage: includeUsage, logprobs: logprobs, offsets: make([]int, n)}
	if isChat {
		o.id = newID("chatcmpl-")
		// The first chunk of each choice names the role.
		for i := range n {
			empty := ""
			o.send(o.chatChunk(i, chatDelta{Role: "assistant", Content: &empty}, nil))
		}
	} else {
		o.id = newID("cmpl-")
	}
	return o
}

func (o *streamResponder) chatChunk(idx int, d chatDelta, finish *string) chatChunk {
	return chatChunk{ID: o.id, Object: "chat.completion.chunk", Created: o.created, Model: o.model,
		Choices: []chatChunkChoice{{Index: idx, Delta: d, FinishReason: finish}}}
}

func (o *streamResponder) completionChunk(idx int, t string, finish *string) completionResponse {
	return completionResponse{ID: o.id, Object: "text_completion", Created: o.created, Model: o.model,
		Choices: []completionChoice{{Index: idx, Text: t, FinishReason: finish}}}
}

// send writes one event and flushes it; the first failed write is kept.
func (o *streamResponder) send(v any) error {
	if o.err != nil {
		return o.err
	}
	b, err := json.Marshal(v)
	if err != nil {
		o.err = err
		return err
	}
	o.buf = append(append(append(o.buf[:0], "data: "...), b...), "\n\n"...)
	if _, err := o.w.Write(o.buf); err != nil {
		o.err = err
		return err
	}
	if err := o.rc.Flush(); err != nil {
		o.err = err
	}
	return o.err
}

func (o *streamResponder) text(idx int, t string, lps []tokenLogprob) error {
	if o.chat {
		c := o.chatChunk(idx, chatDelta{Content: &t}, nil)
		if o.logprobs {
			c.Choices[0].Logprobs = &chatLogprobs{Content: lps}
			if lps == nil {
				c.Choices[0].Logprobs.Content = []tokenLogprob{}
			}
		}
		return o.send(c)
	}
	c := o.completionChunk(idx, t, nil)
	if o.logprobs {
		c.Choices[0].Logprobs = completionLogprobsOf(lps, o.offsets[idx])
		for _, e := range lps {
			o.offsets[idx] += len(e.Token)
		}
	}
	return o.send(c)
}

// toolCalls streams each call whole in one delta, as OpenAI's first delta
// of a call (id, type, name) with the arguments included.
func (o *streamResponder) toolCalls(idx int, calls []toolCallOut) error {
	d := chatDelta{ToolCalls: make([]toolCallDelta, len(calls))}
	for i, c := range calls {
		d.ToolCalls[i] = toolCallDelta{Index: i, ID: c.ID, Type: c.Type, Function: c.Function}
	}
	return o.send(o.chatChunk(idx, d, nil))
}

func (o *streamResponder) reasoning(idx int, t string) error {
	return o.send(o.chatChunk(idx, chatDelta{ReasoningContent: t}, nil))
}

func (o *streamResponder) finish(idx int, reason string) error {
	if o.chat {
		return o.send(o.chatChunk(idx, chatDelta{}, &reason))
	}
	return o.send(o.completionChunk(idx, "", &reason))
}

func (o *streamResponder) done(u usage) {
	if o.includeUsage {
		if o.chat {
			o.send(chatChunk{ID: o.id, Object: "chat.completion.chunk", Created: o.created, Model: o.model, Choices: []chatChunkChoice{}, Usage: &u})
		} else {
			o.send(completionResponse{ID: o.id, Object: "text_completion", Created: o.created, Model: o.model, Choices: []completionChoice{}, Usage: &u})
		}
	}
	o.sendDone()
}

// fail sends the error as an event in OpenAI's shape (the status line has
// gone out already), then ends the stream.
func (o *streamResponder) fail(e *apiError) {
	o.send(struct {
		Error *apiError `json:"error"`
	}{e})
	o.sendDone()
}

func (o *streamResponder) sendDone() {
	if o.err != nil {
		return
	}
	if _, err := o.w.Write([]byte("data: [DONE]\n\n")); err == nil {
		o.rc.Flush()
	}
}
