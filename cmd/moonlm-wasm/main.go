//go:build js && wasm

// Command moonlm-wasm is the engine compiled to WebAssembly for a browser's
// Web Worker. It registers globalThis.moonlmGo, the functions the worker
// script (examples/web/moonlm-worker.js) calls, and then waits for calls.
// The model arrives as bytes copied chunk by chunk into one buffer
// allocated once at its final size, so the weights live in wasm memory
// exactly once.
package main

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"syscall/js"
	"time"

	"github.com/moonlm/moonlm/engine"
	"github.com/moonlm/moonlm/engine/chat"
	"github.com/moonlm/moonlm/gguf"
)

// maxModelBytes bounds a model: wasm32 memory ends at 4 GiB, and the
// weights must leave room for the KV cache and scratch.
const maxModelBytes = 3 << 30

// maxNCtx bounds the context a caller may ask for.
const maxNCtx = 1 << 17

// yieldEvery is how long generation computes before it lets the worker's
// event loop run (to deliver text and receive an abort).
const yieldEvery = 50 * time.Millisecond

// state is the worker's one model and session; calls come one at a time
// from the worker's message loop (generate is the only one that spans
// event-loop turns, and the worker refuses overlapping calls).
type state struct {
	buf     []byte // the model file, filled by write
	file    *gguf.File
	model   *engine.Model
	session *engine.Session

	// generation scratch, reused across calls
	pending []byte        // text not yet handed to JS
	running bool          // a generate is between its start and its end
	abort   bool          // jsAbort asked the running generate to stop
	resume  chan struct{} // the event-loop turn a yield waits for
	wake    js.Func       // sends on resume; made once
}

func main() {
	s := &state{resume: make(chan struct{}, 1)}
	s.wake = js.FuncOf(func(js.Value, []js.Value) any {
		s.resume <- struct{}{}
		return nil
	})
	api := js.Global().Get("Object").New()
	api.Set("alloc", guarded(s.jsAlloc))
	api.Set("write", guarded(s.jsWrite))
	api.Set("load", guarded(s.jsLoad))
	api.Set("tokenize", guarded(s.jsTokenize))
	api.Set("detokenize", guarded(s.jsDetokenize))
	api.Set("applyChatTemplate", guarded(s.jsApplyChatTemplate))
	api.Set("generate", guarded(s.jsGenerate))
	api.Set("abort", guarded(s.jsAbort))
	api.Set("close", guarded(s.jsClose))
	js.Global().Set("moonlmGo", api)
	if ready := js.Global().Get("moonlmReady"); ready.Type() == js.TypeFunction {
		ready.Invoke()
	}
	select {}
}

// guarded makes fn a JS function whose panic becomes an error result
// instead of ending the Go program (and with it the worker's engine).
func guarded(fn func(js.Value, []js.Value) any) js.Func {
	return js.FuncOf(func(this js.Value, args []js.Value) (r any) {
		defer func() {
			if p := recover(); p != nil {
				r = result(nil, fmt.Errorf("moonlm: panic: %v", p))
			}
		}()
		return fn(this, args)
	})
}

// result wraps a value or an error for the worker: {ok, value} or
// {ok: false, error}. Errors are values, not exceptions, so that a Go
// error never unwinds through the JS glue.
func result(v any, err error) any {
	if err != nil {
		return map[string]any{"ok": false, "error": err.Error()}
	}
	return map[string]any{"ok": true, "value": v}
}

// intArg reads args[i] as an integer within [lo, hi].
func intArg(args []js.Value, i int, what string, lo, hi int) (int, error) {
	if i >= len(args) || args[i].Type() != js.TypeNumber {
		return 0, fmt.Errorf("%s: want a number", what)
	}
	f := args[i].Float()
	if f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, fmt.Errorf("%s: %v is not an integer in [%d, %d]", what, f, lo, hi)
	}
	return int(f), nil
}

// jsAlloc(size) releases any open model and allocates the buffer the file
// is written into.
func (s *state) jsAlloc(_ js.Value, args []js.Value) any {
	n, err := intArg(args, 0, "alloc: size", 1, maxModelBytes)
	if err != nil {
		return result(nil, err)
	}
	if err := s.closeModel(); err != nil {
		return result(nil, err)
	}
	s.buf = nil
	runtime.GC()
	s.buf = make([]byte, n)
	return result(nil, nil)
}

// jsWrite(offset, uint8Array) copies a chunk of the file into the buffer.
func (s *state) jsWrite(_ js.Value, args []js.Value) any {
	off, err := intArg(args, 0, "write: offset", 0, len(s.buf))
	if err != nil {
		return result(nil, err)
	}
	if len(args) < 2 || !args[1].InstanceOf(js.Global().Get("Uint8Array")) {
		return result(nil, errors.New("write: want a Uint8Array"))
	}
	if n := args[1].Length(); n > len(s.buf)-off {
		return result(nil, fmt.Errorf("write: %d bytes at %d overrun the %d-byte buffer", n, off, len(s.buf)))
	}
	return result(js.CopyBytesToGo(s.buf[off:], args[1]), nil)
}

// jsLoad({nCtx}) parses the buffer and opens the model and a session; it
// returns the model's description.
func (s *state) jsLoad(_ js.Value, args []js.Value) any {
	if s.buf == nil {
		return result(nil, errors.New("load: no model bytes (alloc and write first)"))
	}
	if s.model != nil {
		return result(nil, errors.New("load: a model is already open"))
	}
	nCtx := 0
	if len(args) > 0 && args[0].Type() == js.TypeObject {
		if v := args[0].Get("nCtx"); v.Type() == js.TypeNumber {
			n, err := intArg([]js.Value{v}, 0, "load: nCtx", 0, maxNCtx)
			if err != nil {
				return result(nil, err)
			}
			nCtx = n
		}
	}
	f, err := gguf.Parse(s.buf)
	if err != nil {
		return result(nil, fmt.Errorf("load: %w", err))
	}
	// One thread: wasm has one. Packing needs kernels with packed
	// layouts, which the generic set does not have.
	m, err := engine.OpenFile(f, engine.ModelParams{Threads: 1, Pack: engine.PackOff})
	if err != nil {
		return result(nil, fmt.Errorf("load: %w", err))
	}
	if nCtx == 0 {
		nCtx = min(m.Info().ContextLength, 4096)
	}
	sess, err := m.NewSession(engine.SessionParams{NCtx: nCtx, Threads: 1})
	if err != nil {
		m.Close()
		return result(nil, fmt.Errorf("load: %w", err))
	}
	s.file, s.model, s.session = f, m, sess
	info := m.Info()
	return result(map[string]any{
		"arch": info.Arch, "name": info.Name, "vocabSize": info.VocabSize,
		"contextLength": info.ContextLength, "nCtx": sess.NCtx(),
		"layers": info.Layers, "embeddingSize": info.EmbeddingSize,
		"bos": info.BOS, "eos": info.EOS, "addBos": info.AddBOS,
		"hasChatTemplate": info.ChatTemplate != "", "fileBytes": len(s.buf),
	}, nil)
}

func (s *state) closeModel() error {
	var err error
	if s.session != nil {
		s.session.Close()
		s.session = nil
	}
	if s.model != nil {
		err = s.model.Close()
		s.model = nil
	}
	s.file = nil
	return err
}

func (s *state) jsClose(js.Value, []js.Value) any {
	err := s.closeModel()
	s.buf = nil
	runtime.GC()
	return result(nil, err)
}

func (s *state) needModel(what string) error {
	if s.model == nil {
		return fmt.Errorf("%s: no model open", what)
	}
	return nil
}

// jsTokenize(text, addSpecial, parseSpecial) returns the token ids.
func (s *state) jsTokenize(_ js.Value, args []js.Value) any {
	if err := s.needModel("tokenize"); err != nil {
		return result(nil, err)
	}
	if len(args) < 1 || args[0].Type() != js.TypeString {
		return result(nil, errors.New("tokenize: want a string"))
	}
	ids, err := s.model.Tokenize(args[0].String(), len(args) > 1 && args[1].Truthy(), len(args) > 2 && args[2].Truthy())
	if err != nil {
		return result(nil, err)
	}
	return result(idsToJS(ids), nil)
}

// jsDetokenize(ids) returns the text of token ids.
func (s *state) jsDetokenize(_ js.Value, args []js.Value) any {
	if err := s.needModel("detokenize"); err != nil {
		return result(nil, err)
	}
	if len(args) < 1 {
		return result(nil, errors.New("detokenize: want an array of ids"))
	}
	ids, err := idsFromJS(args[0], s.model.Info().VocabSize, "detokenize")
	if err != nil {
		return result(nil, err)
	}
	return result(s.model.Detokenize(ids), nil)
}

// jsApplyChatTemplate(messages) renders [{role, content}] with the model's
// template, ending with the assistant's turn opened.
func (s *state) jsApplyChatTemplate(_ js.Value, args []js.Value) any {
	if err := s.needModel("chat"); err != nil {
		return result(nil, err)
	}
	if len(args) < 1 || args[0].Type() != js.TypeObject || args[0].Length() < 1 {
		return result(nil, errors.New("chat: want a non-empty array of {role, content}"))
	}
	msgs := make([]chat.Message, args[0].Length())
	for i := range msgs {
		v := args[0].Index(i)
		if v.Type() != js.TypeObject || v.Get("role").Type() != js.TypeString || v.Get("content").Type() != js.TypeString {
			return result(nil, fmt.Errorf("chat: message %d: want {role: string, content: string}", i))
		}
		msgs[i] = chat.Message{Role: v.Get("role").String(), Content: v.Get("content").String()}
	}
	text, err := s.model.ApplyChatTemplate(msgs, true)
	return result(text, err)
}

func idsToJS(ids []int32) js.Value {
	a := js.Global().Get("Int32Array").New(len(ids))
	for i, id := range ids {
		a.SetIndex(i, id)
	}
	return a
}

// idsFromJS reads an array of token ids, each checked against the
// vocabulary.
func idsFromJS(v js.Value, vocab int, what string) ([]int32, error) {
	if v.Type() != js.TypeObject {
		return nil, fmt.Errorf("%s: want an array of token ids", what)
	}
	n := v.Length()
	if n > maxNCtx {
		return nil, fmt.Errorf("%s: %d ids is more than %d", what, n, maxNCtx)
	}
	ids := make([]int32, n)
	for i := range ids {
		id, err := intArg([]js.Value{v.Index(i)}, 0, fmt.Sprintf("%s: id %d", what, i), 0, vocab-1)
		if err != nil {
			return nil, err
		}
		ids[i] = int32(id)
	}
	return ids, nil
}

// jsGenerate(prompt, opts, onText) starts generation from the beginning of
// the session and returns a Promise of the result. prompt is a string
// (tokenized with the model's BOS; "" is BOS alone) or an array of ids.
// opts: maxTokens, temperature, topK, topP, minP, repeatPenalty,
// repeatLastN, seed, stop. onText(text) receives the streamed text in
// pieces, at most every yieldEvery.
func (s *state) jsGenerate(_ js.Value, args []js.Value) any {
	if err := s.needModel("generate"); err != nil {
		return rejected(err)
	}
	if len(args) < 3 || args[2].Type() != js.TypeFunction {
		return rejected(errors.New("generate: want (prompt, options, onText)"))
	}
	prompt, err := s.promptIDs(args[0])
	if err != nil {
		return rejected(err)
	}
	p, err := genParams(args[1])
	if err != nil {
		return rejected(err)
	}
	onText := args[2]
	return newPromise(func() (any, error) { return s.generate(prompt, p, onText) })
}

func (s *state) promptIDs(v js.Value) ([]int32, error) {
	info := s.model.Info()
	if v.Type() == js.TypeString {
		if v.String() == "" {
			if info.BOS < 0 {
				return nil, errors.New("generate: empty prompt and the model has no BOS token")
			}
			return []int32{info.BOS}, nil
		}
		ids, err := s.model.Tokenize(v.String(), true, true)
		if err != nil {
			return nil, fmt.Errorf("generate: %w", err)
		}
		return ids, nil
	}
	return idsFromJS(v, info.VocabSize, "generate: prompt")
}

// genParams reads the options object (undefined means the defaults:
// greedy, until the end of the text or the context).
func genParams(o js.Value) (engine.GenerateParams, error) {
	var p engine.GenerateParams
	if o.Type() != js.TypeObject {
		return p, nil
	}
	var err error
	num := func(name string, lo, hi float64) float64 {
		v := o.Get(name)
		if v.IsUndefined() || v.IsNull() || err != nil {
			return 0
		}
		if v.Type() != js.TypeNumber || math.IsNaN(v.Float()) || v.Float() < lo || v.Float() > hi {
			err = fmt.Errorf("generate: option %s must be a number in [%v, %v]", name, lo, hi)
			return 0
		}
		return v.Float()
	}
	p.MaxTokens = int(num("maxTokens", 0, maxNCtx))
	p.Sampler.Temperature = float32(num("temperature", 0, 100))
	p.Sampler.TopK = int(num("topK", 0, 1<<20))
	p.Sampler.TopP = float32(num("topP", 0, 1))
	p.Sampler.MinP = float32(num("minP", 0, 1))
	p.Sampler.RepeatPenalty = float32(num("repeatPenalty", 0, 100))
	p.Sampler.PenaltyLastN = int(num("repeatLastN", 0, 1<<16))
	p.Sampler.Seed = uint64(num("seed", 0, 1<<53))
	if err != nil {
		return p, err
	}
	if st := o.Get("stop"); st.Type() == js.TypeObject {
		for i := range min(st.Length(), 16) {
			if st.Index(i).Type() == js.TypeString {
				p.Stop = append(p.Stop, st.Index(i).String())
			}
		}
	}
	return p, nil
}

// generate runs on its own goroutine; every yieldEvery it hands the
// pending text to onText and lets the event loop run, so that the text
// reaches the page and an abort can arrive.
func (s *state) generate(prompt []int32, p engine.GenerateParams, onText js.Value) (any, error) {
	if err := s.session.Rewind(0); err != nil {
		return nil, err
	}
	s.pending = s.pending[:0]
	s.running, s.abort = true, false
	defer func() { s.running, s.abort = false, false }()
	last := time.Now()
	flush := func() {
		if len(s.pending) > 0 {
			onText.Invoke(string(s.pending))
			s.pending = s.pending[:0]
		}
	}
	res, err := s.session.Generate(prompt, p, func(text []byte, _ int32) bool {
		s.pending = append(s.pending, text...)
		if time.Since(last) >= yieldEvery {
			flush()
			s.yield()
			last = time.Now()
		}
		return !s.abort
	})
	flush()
	if err != nil && !errors.Is(err, engine.ErrCancelled) {
		return nil, err
	}
	ids := make([]any, len(res.Generated))
	for i, id := range res.Generated {
		ids[i] = id
	}
	return map[string]any{
		"finish":       res.Finish.String(),
		"promptTokens": res.PromptTokens,
		"tokens":       res.Tokens,
		"ids":          ids,
		"promptMs":     float64(res.PromptDuration.Microseconds()) / 1e3,
		"decodeMs":     float64(res.DecodeDuration.Microseconds()) / 1e3,
	}, nil
}

// yield blocks this goroutine until the event loop has run a turn: the Go
// scheduler returns to JS while every goroutine waits.
func (s *state) yield() {
	js.Global().Call("setTimeout", s.wake, 0)
	<-s.resume
}

// jsAbort() stops a running generation at its next token; it ends with
// finish "cancelled". Without one running it does nothing (Session.Cancel
// would instead cancel the next call). The request can only arrive while
// generation yields, which is between tokens, so the callback's answer is
// as prompt as Session.Cancel would be.
func (s *state) jsAbort(js.Value, []js.Value) any {
	if s.running {
		s.abort = true
	}
	return nil
}

// newPromise runs fn on a goroutine and settles a Promise with its result.
func newPromise(fn func() (any, error)) js.Value {
	var exec js.Func
	exec = js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject := args[0], args[1]
		go func() {
			defer exec.Release()
			defer func() {
				if r := recover(); r != nil {
					reject.Invoke(js.Global().Get("Error").New(fmt.Sprint("moonlm: panic: ", r)))
				}
			}()
			v, err := fn()
			if err != nil {
				reject.Invoke(js.Global().Get("Error").New(err.Error()))
				return
			}
			resolve.Invoke(v)
		}()
		return nil
	})
	return js.Global().Get("Promise").New(exec)
}

func rejected(err error) js.Value {
	return js.Global().Get("Promise").Call("reject", js.Global().Get("Error").New(err.Error()))
}
