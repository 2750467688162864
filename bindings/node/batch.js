'use strict';
// Batched decoding: decodeBatch advances several sessions of one model in one
// forward pass (moonlm_batch_decode), and Batcher lets many async callers
// await their next logits and runs one batched step for all of them.
// index.js calls install() with its internals.

let I = null; // index.js internals
let F = null; // the batch functions of the library, declared on first use

function funcs(what) {
  if (F) return F;
  const { file, t } = I.lib();
  const dll = I.koffi.load(file);
  const entry = I.koffi.struct('moonlm_batch_entry', {
    size: 'size_t', session: t.session, tokens: 'int32_t *', n_tokens: 'size_t',
    logits: 'float *', logits_cap: 'size_t', status: 'int', continues: 'size_t',
  });
  try {
    F = {
      entry,
      decode: dll.func('moonlm_batch_decode', 'int', [t.model, I.koffi.inout(I.koffi.pointer(entry)), 'size_t']),
      maxTokens: dll.func('moonlm_batch_max_tokens', 'int', [t.model, I.koffi.out(I.koffi.pointer('size_t'))]),
    };
  } catch (e) {
    throw new I.MoonlmError(I.Status.UNSUPPORTED,
      `${what}: ${file} predates batched decoding; rebuild the library`, { cause: e });
  }
  return F;
}

/** The most tokens one decodeBatch step evaluates, over all its entries. */
function maxBatchTokens(model) {
  if (!(model instanceof I.Model)) throw I.arg.typeError('maxBatchTokens', 'model', `must be a Model, got ${I.shown(model)}`);
  const f = funcs('maxBatchTokens');
  const n = [0];
  I.check(f.maxTokens(model._handle('maxBatchTokens'), n), 'maxBatchTokens');
  return Number(n[0]);
}

/**
 * Evaluates every [session, tokens] entry (tokens: one token, or an array
 * such as a chunk of a prompt) in one forward pass on a worker thread. An
 * entry [session, tokens, { continues: true }] is a chunk of a prompt that
 * the session's entry in a later decodeBatch goes on with: a hybrid model's
 * session then takes the checkpoints of its recurrent state as for one
 * prefill of the whole prompt (one copy of the state at its end) instead of
 * one per chunk; other models ignore it (default false). Each
 * session's logits (session.logits) then hold its last token's logits, bit
 * for bit what the session gets alone. Resolves to one error per entry,
 * null where the tokens were evaluated (an entry that fails leaves its
 * session unchanged; the others go on).
 */
async function decodeBatch(model, entries) {
  const what = 'decodeBatch';
  if (!(model instanceof I.Model)) throw I.arg.typeError(what, 'model', `must be a Model, got ${I.shown(model)}`);
  if (!Array.isArray(entries)) throw I.arg.typeError(what, 'entries', `must be an array, got ${I.shown(entries)}`);
  const f = funcs(what);
  const size = I.koffi.sizeof(f.entry);
  const sessions = [];
  const es = entries.map((e, i) => {
    if (!Array.isArray(e) || (e.length !== 2 && e.length !== 3)) {
      throw I.arg.typeError(what, `entries[${i}]`, 'must be a [session, tokens] pair or [session, tokens, options]');
    }
    const [s, toks, opts] = e;
    const continues = continuesOpt(what, `entries[${i}][2]`, opts);
    if (!(s instanceof I.Session)) throw I.arg.typeError(what, `entries[${i}][0]`, `must be a Session, got ${I.shown(s)}`);
    if (s.model !== model) throw I.invalid(`${what}: entries[${i}]: the session belongs to another model`);
    if (sessions.includes(s)) throw new I.MoonlmError(I.Status.BUSY, `${what}: entries[${i}]: the session is in the batch twice`);
    const t = I.arg.tokens(what, `entries[${i}][1]`, typeof toks === 'number' ? [toks] : toks, true);
    const h = s._handle(what);
    sessions.push(s);
    return {
      size, session: h, tokens: t, n_tokens: t.length, logits: s._out, logits_cap: s._out.length, status: -1,
      continues: continues ? 1 : 0,
    };
  });
  if (es.length === 0) return [];
  for (const s of sessions) s._busy = true;
  let st;
  try {
    st = await I.callAsync(f.decode, model._handle(what), es, es.length);
  } finally {
    for (const s of sessions) s._busy = false;
  }
  const errs = es.map((e, i) => {
    if (e.status === I.Status.OK) {
      const s = sessions[i];
      if (s._logits.length !== s._out.length) s._logits = new Float32Array(s._out.length);
      s._logits.set(s._out);
      return null;
    }
    return new I.MoonlmError(e.status, `${what}: entries[${i}]: ${I.lib().c.status_string(e.status)}`);
  });
  if (st !== I.Status.OK && errs.every((e) => e === null)) {
    throw new I.MoonlmError(st, `${what}: ${I.lib().c.status_string(st)}`);
  }
  return errs;
}

/** The continues member of an options object (undefined: false). */
function continuesOpt(what, name, opts) {
  if (opts == null) return false;
  if (typeof opts !== 'object') throw I.arg.typeError(what, name, `must be an options object, got ${I.shown(opts)}`);
  const c = opts.continues;
  if (c == null) return false;
  if (typeof c !== 'boolean') throw I.arg.typeError(what, `${name}.continues`, `must be a boolean, got ${I.shown(c)}`);
  return c;
}

/**
 * Lets many async callers share batched steps: `await batcher.decode(session,
 * tokens)` queues the session's tokens; the batcher runs one decodeBatch for
 * every session waiting and resolves each call with a copy of its logits
 * (a Float32Array), or rejects with that entry's error. Calls made while a
 * step runs join the next one; a prompt longer than a step's room is fed in
 * chunks, each but the last marked continues (so a hybrid model's session
 * checkpoints it as one prefill). opts.continues (default false) says the
 * tokens are a chunk of a prompt that the next decode on this session goes
 * on with. steps counts the steps run.
 */
class Batcher {
  constructor(model) {
    this.model = model;
    this.maxTokens = maxBatchTokens(model);
    this.steps = 0;
    this._pending = [];
    this._running = false;
  }

  decode(session, tokens, opts) {
    const continues = continuesOpt('Batcher.decode', 'opts', opts);
    const toks = typeof tokens === 'number' ? [tokens] : Array.from(I.arg.tokens('Batcher.decode', 'tokens', tokens, true));
    if (toks.length === 0) return Promise.reject(I.invalid('Batcher.decode: no tokens'));
    return new Promise((resolve, reject) => {
      this._pending.push({ session, toks, continues, resolve, reject });
      if (!this._running) {
        this._running = true;
        setImmediate(() => this._run());
      }
    });
  }

  async _run() {
    try {
      while (this._pending.length > 0) {
        let room = this.maxTokens;
        const step = [];
        const rest = [];
        for (const r of this._pending) {
          if (room === 0 || step.some((x) => x.r.session === r.session)) { rest.push(r); continue; }
          const n = Math.min(r.toks.length, room);
          room -= n;
          step.push({ r, n });
        }
        this._pending = rest;
        let errs;
        try {
          // A prompt cut short here goes on in a later step: one prefill.
          errs = await decodeBatch(this.model, step.map(({ r, n }) => [r.session, r.toks.slice(0, n),
            { continues: n < r.toks.length || r.continues }]));
        } catch (e) {
          for (const { r } of step) r.reject(e);
          continue;
        }
        this.steps++;
        step.forEach(({ r, n }, i) => {
          if (errs[i]) r.reject(errs[i]);
          else if (n < r.toks.length) this._pending.push({ ...r, toks: r.toks.slice(n) });
          else r.resolve(r.session.logits.slice());
        });
        // Let the callers just resolved ask for their next token first.
        await new Promise((res) => setImmediate(res));
      }
    } finally {
      this._running = false;
    }
  }
}

function install(internals) {
  I = internals;
  return { decodeBatch, maxBatchTokens, Batcher };
}

module.exports = { install };
