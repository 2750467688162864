'use strict';
// Session state and conversations: Session's prefixReuse, stats, tokens,
// fork, saveState and loadState, and the Conversation class. index.js calls
// install() with its internals once they are defined.

let I = null; // index.js internals: lib, check, arg, Status, Session, ...
let F = null; // the session-state functions of the library, declared on first use

/** The library's session-state functions (a library built before them lacks them). */
function funcs(what) {
  if (F) return F;
  const { file, t } = I.lib();
  // The same library again (dlopen counts references): index.js keeps its handle private.
  const dll = I.koffi.load(file);
  const sizeOut = I.koffi.out(I.koffi.pointer('size_t'));
  const stats = I.koffi.struct({
    size: 'size_t', n_pos: 'uint64_t', n_ctx: 'uint64_t', n_evaluated: 'uint64_t', n_reused: 'uint64_t',
  });
  try {
    F = {
      stats,
      prefill_reuse: dll.func('moonlm_prefill_reuse', 'int',
        [t.session, 'int32_t *', 'size_t', 'float *', 'size_t', sizeOut]),
      stats_get: dll.func('moonlm_session_stats_get', 'int', [t.session, I.koffi.inout(I.koffi.pointer(stats))]),
      tokens: dll.func('moonlm_session_tokens', 'int', [t.session, 'int32_t *', 'size_t', sizeOut]),
      fork: dll.func('moonlm_session_fork', 'int', [t.session, I.koffi.out(I.koffi.pointer(t.session))]),
      state_size: dll.func('moonlm_session_state_size', 'int', [t.session, sizeOut]),
      state_save: dll.func('moonlm_session_state_save', 'int', [t.session, 'uint8_t *', 'size_t', sizeOut]),
      state_load: dll.func('moonlm_session_state_load', 'int', [t.session, 'uint8_t *', 'size_t']),
      save_file: dll.func('moonlm_session_state_save_file', 'int', [t.session, 'const char *']),
      load_file: dll.func('moonlm_session_state_load_file', 'int', [t.session, 'const char *']),
    };
  } catch (e) {
    throw new I.MoonlmError(I.Status.UNSUPPORTED,
      `${what}: ${I.lib().file} predates the session state functions; rebuild the library`, { cause: e });
  }
  return F;
}

function filePath(what, p) {
  if (p instanceof URL) p = p.protocol === 'file:' ? require('node:url').fileURLToPath(p) : p.href;
  if (typeof p !== 'string') throw I.arg.typeError(what, 'path', `must be a string or a file URL, got ${I.shown(p)}`);
  if (p === '') throw I.arg.rangeError(what, 'path', 'is empty');
  if (p.includes('\0')) throw I.arg.rangeError(what, 'path', 'contains a NUL character');
  return p;
}

// ---- Session methods -------------------------------------------------------

const sessionMethods = {
  /**
   * Makes the session hold exactly tokens, evaluating only what it does not
   * already hold (the longest common prefix is kept). Resolves to the last
   * position's logits, like prefill; the last token is always evaluated for
   * them. lastEvaluated is the number of tokens evaluated.
   */
  async prefillReuse(tokens, opts) {
    opts = I.arg.options('prefillReuse', opts, PREFILL_REUSE_OPTS);
    const wantLogits = opts.logits == null ? true : I.arg.bool('prefillReuse', 'opts.logits', opts.logits);
    const toks = I.arg.tokens('prefillReuse', 'tokens', tokens, true);
    const f = funcs('prefillReuse');
    // As Session._run, with the count of evaluated tokens after the logits.
    const h = this._handle('prefillReuse');
    const out = wantLogits ? this._out : null;
    const cap = wantLogits ? out.length : 0;
    const nEval = [0];
    this._busy = true;
    let st;
    try {
      st = await I.callAsync(f.prefill_reuse, h, toks, toks.length, out, cap, nEval);
    } finally {
      this._busy = false;
    }
    if (st !== I.Status.OK) {
      throw this._asyncError(st, 'prefillReuse', (h2) => f.prefill_reuse(h2, toks, toks.length, out, cap, [0]));
    }
    this.lastEvaluated = Number(nEval[0]);
    if (!wantLogits) return null;
    if (this._logits.length !== out.length) this._logits = new Float32Array(out.length);
    this._logits.set(out);
    return this._logits;
  },

  /** The session's counters: { nPos, nCtx, nEvaluated, nReused }. */
  stats() {
    const f = funcs('stats');
    const h = this._handle('stats');
    const s = { size: I.koffi.sizeof(f.stats) };
    I.check(f.stats_get(h, s), 'stats');
    return { nPos: Number(s.n_pos), nCtx: Number(s.n_ctx), nEvaluated: Number(s.n_evaluated), nReused: Number(s.n_reused) };
  },

  /** The tokens the session holds, one per position (an Int32Array). */
  get tokens() {
    const f = funcs('tokens');
    const h = this._handle('tokens');
    const n = [0];
    for (let i = 0; i < 3; i++) {
      const buf = new Int32Array(Math.max(Number(n[0]), 1));
      const st = f.tokens(h, buf, Number(n[0]), n);
      if (st === I.Status.BUFFER_TOO_SMALL) continue;
      I.check(st, 'tokens');
      return buf.subarray(0, Number(n[0]));
    }
    throw I.invalid('tokens: the library kept asking for a larger buffer');
  },

  /**
   * A new Session holding the same positions and tokens, which then goes
   * on independently (same model, nCtx and kvType). The KV cache is
   * copied, not shared: the cost is the held positions, nothing is
   * recomputed.
   */
  fork() {
    const f = funcs('fork');
    const h = this._handle('fork');
    const out = [null];
    I.check(f.fork(h, out), 'fork');
    const { c } = I.lib();
    let s;
    try {
      // A Session object around an empty session whose handle is then
      // swapped for the fork's.
      s = new I.Session(this.model, { nCtx: this.nCtx, kvType: this.kvType });
    } catch (e) {
      c.session_free(out[0]);
      throw e;
    }
    I.registry.unregister(s._unreg);
    c.session_free(s._h);
    s._h = out[0];
    I.registry.register(s, { free: c.session_free, handle: s._h }, s._unreg);
    return s;
  },

  /**
   * Saves the session's state (its tokens and KV cache, in a versioned,
   * checksummed format that names the model it belongs to): returns a
   * Buffer, or with path writes that file (through a temporary file
   * renamed at the end). Synchronous.
   */
  saveState(path) {
    const f = funcs('saveState');
    const h = this._handle('saveState');
    if (path !== undefined) {
      I.check(f.save_file(h, filePath('saveState', path)), 'saveState');
      return undefined;
    }
    const n = [0];
    I.check(f.state_size(h, n), 'saveState');
    for (let i = 0; i < 3; i++) {
      const buf = Buffer.alloc(Math.max(Number(n[0]), 1));
      const st = f.state_save(h, buf, Number(n[0]), n);
      if (st === I.Status.BUFFER_TOO_SMALL) continue;
      I.check(st, 'saveState');
      return buf.subarray(0, Number(n[0]));
    }
    throw I.invalid('saveState: the library kept asking for a larger buffer');
  },

  /**
   * Replaces the session's positions with a saved state: a Buffer or
   * Uint8Array from saveState(), or the path of a file it wrote. A state
   * of another model, KV type or numerics, a truncated or corrupted one,
   * or one longer than nCtx throws (BAD_FILE, INVALID_ARGUMENT,
   * CONTEXT_FULL) and leaves the session unchanged. Synchronous.
   */
  loadState(state) {
    const f = funcs('loadState');
    const h = this._handle('loadState');
    if (state instanceof Uint8Array) {
      I.check(f.state_load(h, state.length ? state : null, state.length), 'loadState');
      return;
    }
    I.check(f.load_file(h, filePath('loadState', state)), 'loadState');
  },
};

// ---- Conversation ------------------------------------------------------------

const CONVERSATION_OPTS = new Set(['messages', 'system', 'template', 'nCtx', 'threads', 'kvType']);
const PREFILL_REUSE_OPTS = new Set(['logits']);
let REPLY_OPTS = null; // the sampling options and maxTokens, stop, signal (set by install)

/**
 * A chat with a model: OpenAI-style messages and a session holding their
 * tokens. Each turn renders the whole conversation with the chat template
 * and calls Session.prefillReuse, so turn N evaluates only what is new
 * since turn N-1 (the previous reply's last token and the new message);
 * lastEvaluated says how many tokens the last turn evaluated.
 */
class Conversation {
  // session: a fork's, for Conversation.fork (not public)
  constructor(model, opts, session) {
    if (!(model instanceof I.Model)) throw I.arg.typeError('Conversation', 'model', `must be a Model, got ${I.shown(model)}`);
    opts = I.arg.options('Conversation', opts, CONVERSATION_OPTS);
    this.model = model;
    this.messages = [];
    if (opts.system != null) this.messages.push({ role: 'system', content: I.arg.string('Conversation', 'opts.system', opts.system) });
    if (opts.messages != null) {
      I.arg.messages('Conversation', opts.messages);
      for (const m of opts.messages) this.messages.push({ role: m.role, content: m.content ?? '' });
    }
    this.template = opts.template == null ? undefined : I.arg.string('Conversation', 'opts.template', opts.template, false);
    this.session = session ?? model.session({ nCtx: opts.nCtx, threads: opts.threads, kvType: opts.kvType });
    this.lastEvaluated = 0;
    this.lastPromptTokens = 0;
  }

  close() { this.session.close(); }

  [Symbol.dispose]() { this.close(); }

  /** Appends a message without generating a reply. */
  add(role, content) {
    I.arg.messages('add', [{ role, content }]);
    this.messages.push({ role, content });
  }

  /** The conversation's tokens with the assistant's turn opened. */
  promptTokens() {
    return this.model._chatTokens(this.messages, this.template);
  }

  /**
   * Adds a message (opts.role, default 'user') and resolves to the
   * assistant's reply, which joins the history. opts: the sampling options,
   * maxTokens, stop, signal.
   */
  async send(content, opts) {
    let text = '';
    for await (const piece of this.sendStream(content, opts)) text += piece;
    return text;
  }

  /** send() as an async iterator of text pieces. */
  sendStream(content, opts) {
    opts = { ...(opts ?? {}) };
    const role = opts.role ?? 'user';
    delete opts.role;
    I.arg.string('send', 'opts.role', role);
    const gen = this.replyStream(opts); // checks the options first
    this.add(role, content);
    return gen;
  }

  /** The assistant's reply to the messages so far, joining them. */
  async reply(opts) {
    let text = '';
    for await (const piece of this.replyStream(opts)) text += piece;
    return text;
  }

  /** reply() as an async iterator of text pieces. */
  replyStream(opts) {
    opts = I.arg.options('reply', opts, REPLY_OPTS);
    const { maxTokens, stop, signal } = I.loopArgs('reply', opts);
    const sampler = new I.Sampler(I.samplerOptions(opts), 'reply');
    return this._turn(maxTokens, sampler, stop, signal);
  }

  // Holds all but the last prompt token through prefillReuse, then runs
  // the library's generation loop (moonlm_generate_ex) from the last one.
  async* _turn(maxTokens, sampler, stop, signal) {
    const { session } = this;
    const onAbort = () => { if (session._busy) session.cancel(); };
    let answered = false;
    let text = '';
    try {
      if (signal) {
        if (signal.aborted) throw I.abortedError(signal);
        signal.addEventListener('abort', onAbort, { once: true });
      }
      const toks = this.promptTokens();
      this.lastPromptTokens = toks.length;
      let held = 0;
      if (toks.length > 1) {
        try {
          await session.prefillReuse(toks.subarray(0, toks.length - 1), { logits: false });
        } catch (e) {
          if (signal && signal.aborted && e.code === 'CANCELLED') throw I.abortedError(signal, e);
          throw e;
        }
        held = session.lastEvaluated;
      } else {
        session.rewind(0);
      }
      if (signal) signal.removeEventListener('abort', onAbort);
      for (let i = 0; i + 1 < toks.length; i++) sampler.accept(toks[i]);
      const gen = I.generation('reply', session, toks.subarray(toks.length - 1), maxTokens, sampler, stop, signal, false, false);
      for await (const piece of gen) {
        answered = true;
        text += piece;
        yield piece;
      }
      answered = true;
      this.lastEvaluated = held + 1;
    } finally {
      if (signal) signal.removeEventListener('abort', onAbort);
      sampler.close();
      if (answered) this.messages.push({ role: 'assistant', content: text });
    }
  }

  /** A copy that continues independently: messages copied, session forked. */
  fork() {
    return new Conversation(this.model, {
      messages: this.messages.map((m) => ({ ...m })), template: this.template,
    }, this.session.fork());
  }
}

/** Adds the session-state methods to Session; returns the new exports. */
function install(internals) {
  I = internals;
  for (const [name, d] of Object.entries(Object.getOwnPropertyDescriptors(sessionMethods))) {
    Object.defineProperty(I.Session.prototype, name, { ...d, enumerable: false });
  }
  // Tokens the last prefillReuse evaluated (0 before the first).
  Object.defineProperty(I.Session.prototype, 'lastEvaluated', { value: 0, writable: true, enumerable: false });
  REPLY_OPTS = new Set([...I.SAMPLER_OPT_NAMES, ...I.LOOP_OPTS]);
  return { Conversation };
}

module.exports = { install };
