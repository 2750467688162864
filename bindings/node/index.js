'use strict';
// moonlm for Node: a CPU inference engine for GGUF language models, over the
// C ABI of libmoonlm.so (include/moonlm.h) through koffi.
//
// Compute (opening a model, prefill, decode) runs on koffi's async worker
// threads (fn.async), so it never blocks the event loop. Cheap calls
// (tokenize, sampling, rewind, ...) are synchronous.

const fs = require('node:fs');
const path = require('node:path');
const koffi = require('koffi');

const LIBNAME = 'libmoonlm.so';
const ABI_VERSION = 1; // MOONLM_ABI_VERSION this module was written against

/** Status codes of include/moonlm.h, by name. */
const Status = Object.freeze({
  OK: 0,
  INVALID_ARGUMENT: 1,
  IO: 2,
  BAD_FILE: 3,
  UNSUPPORTED: 4,
  BUFFER_TOO_SMALL: 5,
  CONTEXT_FULL: 6,
  CANCELLED: 7,
  BUSY: 8,
  OUT_OF_MEMORY: 9,
  INTERNAL: 10,
  FORKED: 11,
});
const STATUS_NAMES = Object.fromEntries(Object.entries(Status).map(([k, v]) => [v, k]));

/**
 * A failed moonlm call. `code` is the status name ('CONTEXT_FULL', ...),
 * `status` its number (0 for failures before reaching the library, such as
 * a library that cannot be loaded), and `message` the library's description.
 */
class MoonlmError extends Error {
  constructor(status, message, options) {
    super(message, options);
    this.name = 'MoonlmError';
    this.status = status;
    this.code = STATUS_NAMES[status] || (status === 0 ? 'LOAD' : `STATUS_${status}`);
  }

  // A bad argument is a TypeError or RangeError (see argError) and still a
  // MoonlmError, so `catch (e) { if (e instanceof MoonlmError) ... }` sees it.
  static [Symbol.hasInstance](x) {
    if (Function.prototype[Symbol.hasInstance].call(this, x)) return true;
    return this === MoonlmError && x != null && x[kArgError] === true;
  }
}

function invalid(message) {
  return new MoonlmError(Status.INVALID_ARGUMENT, message);
}

// ---- argument checks -------------------------------------------------------
// Every value handed to the library is checked here first: koffi would
// otherwise coerce it without a word ("abc" -> 0, 5.9 -> 5, 2**32+300 -> 300).
// A value of the wrong type is a TypeError, a value out of range a
// RangeError; both carry code 'INVALID_ARGUMENT' and name the parameter.

const kArgError = Symbol('moonlm.argError');
const INT32_MAX = 2 ** 31 - 1;
const INT32_MIN = -(2 ** 31);
const FLOAT32_MAX = 3.4028234663852886e38;
const UINT64_MAX = (1n << 64n) - 1n;

function argError(Ctor, what, param, message) {
  const e = new Ctor(`${what}: ${param} ${message}`);
  e.code = 'INVALID_ARGUMENT';
  e.status = Status.INVALID_ARGUMENT;
  e.param = param;
  Object.defineProperty(e, kArgError, { value: true });
  return e;
}

/** A short description of a bad value for a message. */
function shown(v) {
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v);
  if (typeof v === 'bigint') return `${v}n`;
  if (typeof v === 'number' || typeof v === 'boolean' || v == null) return String(v);
  if (Array.isArray(v)) return 'an array';
  return v.constructor && v.constructor.name ? `a ${v.constructor.name}` : typeof v;
}

const arg = {
  typeError: (what, param, message) => argError(TypeError, what, param, message),
  rangeError: (what, param, message) => argError(RangeError, what, param, message),

  /** v as an integer in [min, max]: other types TypeError, fractions/NaN/out of range RangeError. */
  int(what, param, v, min, max) {
    if (typeof v !== 'number') throw arg.typeError(what, param, `must be an integer, got ${shown(v)}`);
    if (!Number.isInteger(v) || v < min || v > max) {
      throw arg.rangeError(what, param, `must be an integer in [${min}, ${max}], got ${shown(v)}`);
    }
    return v;
  },

  /** A token id: an integer in [0, 2**31-1] (the library checks the vocabulary). */
  token(what, param, v) { return arg.int(what, param, v, 0, INT32_MAX); },

  /** A finite number that fits a C float. */
  float(what, param, v) {
    if (typeof v !== 'number') throw arg.typeError(what, param, `must be a number, got ${shown(v)}`);
    if (!Number.isFinite(v) || Math.abs(v) > FLOAT32_MAX) {
      throw arg.rangeError(what, param, `must be a finite number, got ${shown(v)}`);
    }
    return v;
  },

  bool(what, param, v) {
    if (typeof v !== 'boolean') throw arg.typeError(what, param, `must be a boolean, got ${shown(v)}`);
    return v;
  },

  /** A string; nul: false refuses NUL, which a C string would cut at. */
  string(what, param, v, nul = true) {
    if (typeof v !== 'string') throw arg.typeError(what, param, `must be a string, got ${shown(v)}`);
    if (!nul && v.includes('\0')) throw arg.rangeError(what, param, 'must not contain NUL characters');
    return v;
  },

  /** An unsigned 64-bit integer below max (a safe-integer number or a bigint) as a bigint. */
  uint64(what, param, v, max = UINT64_MAX) {
    if (typeof v !== 'bigint' && typeof v !== 'number') {
      throw arg.typeError(what, param, `must be an integer or a bigint, got ${shown(v)}`);
    }
    if ((typeof v === 'number' && !Number.isSafeInteger(v)) || v < 0 || BigInt(v) > max) {
      throw arg.rangeError(what, param, `must be an integer in [0, ${max}], got ${shown(v)}`);
    }
    return BigInt(v);
  },

  /**
   * The options object of a call: omitted/null gives {}; anything but a
   * plain object, or a name not in allowed (a Set), is a TypeError.
   */
  options(what, opts, allowed) {
    if (opts == null) return {};
    if (typeof opts !== 'object' || Array.isArray(opts)) {
      throw arg.typeError(what, 'opts', `must be an object, got ${shown(opts)}`);
    }
    for (const k of Object.keys(opts)) {
      if (!allowed.has(k)) {
        throw arg.typeError(what, `opts.${k}`, `is not an option (known: ${[...allowed].join(', ')})`);
      }
    }
    return opts;
  },

  /**
   * Token ids as an Int32Array. An Int32Array is used as given unless copy
   * (then, as for any other array-like of integers, the result is a fresh
   * array the binding alone holds). Strings and byte arrays are refused:
   * text is never taken for token ids.
   */
  tokens(what, param, v, copy = false) {
    if (v instanceof Int32Array) return copy ? v.slice() : v;
    if (v == null || typeof v !== 'object' || typeof v.length !== 'number' ||
        v instanceof Uint8Array || v instanceof Uint8ClampedArray || v instanceof Int8Array ||
        v instanceof ArrayBuffer) {
      throw arg.typeError(what, param, `must be an Int32Array or an array of integer token ids, got ${shown(v)}`);
    }
    const out = new Int32Array(v.length);
    for (let i = 0; i < out.length; i++) out[i] = arg.token(what, `${param}[${i}]`, v[i]);
    return out;
  },

  /**
   * OpenAI-style messages checked and made C strings: an array of objects
   * with a string role and a content that is a string or null (null: "").
   */
  messages(what, messages) {
    if (!Array.isArray(messages)) throw arg.typeError(what, 'messages', `must be an array, got ${shown(messages)}`);
    return messages.map((m, i) => {
      if (m == null || typeof m !== 'object') throw arg.typeError(what, `messages[${i}]`, `must be an object, got ${shown(m)}`);
      const role = arg.string(what, `messages[${i}].role`, m.role, false);
      if (!('content' in m)) throw arg.typeError(what, `messages[${i}].content`, 'is missing (a string, or null for none)');
      const content = m.content === null ? '' : arg.string(what, `messages[${i}].content`, m.content, false);
      return { role, content };
    });
  },
};

// The option names each call takes; anything else is refused.
const SAMPLER_FIELDS = {
  temperature: ['temperature', 'float'], topK: ['top_k', 'int'], topP: ['top_p', 'float'],
  minP: ['min_p', 'float'], repeatPenalty: ['repeat_penalty', 'float'],
  presencePenalty: ['presence_penalty', 'float'], frequencyPenalty: ['frequency_penalty', 'float'],
  penaltyLastN: ['penalty_last_n', 'int'],
};
const SAMPLER_OPT_NAMES = new Set([...Object.keys(SAMPLER_FIELDS), 'seed']);
const OPEN_OPTS = new Set(['threads', 'pack', 'packedCache', 'packedCacheDir', 'packedCacheBytes', 'numerics']);
const TOKENIZE_OPTS = new Set(['addSpecial', 'parseSpecial']);
const SESSION_OPTS = new Set(['nCtx', 'threads', 'kvType']);
const LOOP_OPTS = ['maxTokens', 'stop', 'signal'];
const GENERATE_OPTS = new Set([...SAMPLER_OPT_NAMES, ...LOOP_OPTS, 'nCtx', 'addSpecial', 'parseSpecial']);
// 'template': a built-in chat format by name (checked where the template is applied).
const CHAT_OPTS = new Set([...SAMPLER_OPT_NAMES, ...LOOP_OPTS, 'nCtx', 'template']);
const SESSION_STREAM_OPTS = new Set([...SAMPLER_OPT_NAMES, ...LOOP_OPTS, 'sampler']);
const APPLY_TEMPLATE_OPTS = new Set(['addAssistant', 'template']);

/** The sampler's options among a generation call's (already checked) options. */
function samplerOptions(opts) {
  const out = {};
  for (const k of SAMPLER_OPT_NAMES) if (opts[k] != null) out[k] = opts[k];
  return out;
}

/** The generation loop's own options, checked. */
function loopArgs(what, opts) {
  const maxTokens = opts.maxTokens == null ? 256 : arg.int(what, 'opts.maxTokens', opts.maxTokens, 0, Number.MAX_SAFE_INTEGER);
  if (opts.signal != null && !(opts.signal instanceof AbortSignal)) {
    throw arg.typeError(what, 'opts.signal', `must be an AbortSignal, got ${shown(opts.signal)}`);
  }
  return { maxTokens, stop: new StopFilter(opts.stop, what), signal: opts.signal ?? null };
}

/** moonlm_tokenize's flags from opts.addSpecial (default true) and opts.parseSpecial (default false). */
function tokenizeFlags(what, opts) {
  const add = opts.addSpecial == null ? true : arg.bool(what, 'opts.addSpecial', opts.addSpecial);
  const parse = opts.parseSpecial == null ? false : arg.bool(what, 'opts.parseSpecial', opts.parseSpecial);
  return (add ? 1 : 0) | (parse ? 2 : 0);
}

// ---- the library ---------------------------------------------------------

/** Where to look for libmoonlm.so, in order of preference. */
function candidates() {
  const env = process.env.MOONLM_LIBRARY;
  if (env) return [path.resolve(env)]; // an explicit choice is never second-guessed
  return [
    path.join(__dirname, 'lib', LIBNAME), // bundled by `npm pack` (scripts/bundle-library.js)
    path.resolve(__dirname, '..', '..', 'build', LIBNAME), // a source checkout after `make lib`
  ];
}

let L = null;

function lib() {
  if (L) return L;
  const tried = candidates();
  const file = tried.find((p) => fs.existsSync(p));
  if (!file) {
    throw new MoonlmError(0, `moonlm: ${LIBNAME} not found (looked at ${tried.join(', ')}); ` +
      'build it with `make lib` or set MOONLM_LIBRARY');
  }
  let dll;
  try {
    dll = koffi.load(file);
  } catch (e) {
    throw new MoonlmError(0, `moonlm: cannot load ${file}: ${e.message}`, { cause: e });
  }
  // Distinct type names per load: koffi type names are global to the process.
  const t = {
    model: koffi.pointer(koffi.opaque()),
    session: koffi.pointer(koffi.opaque()),
    sampler: koffi.pointer(koffi.opaque()),
    modelParams: koffi.struct({
      size: 'size_t', n_threads: 'int32_t', flags: 'uint32_t', pack: 'int32_t', packed_cache: 'int32_t',
      packed_cache_dir: 'const char *', packed_cache_bytes: 'uint64_t', numerics: 'int32_t',
    }),
    modelInfo: koffi.struct({
      size: 'size_t', n_vocab: 'int32_t', n_ctx_train: 'int32_t', n_embd: 'int32_t',
      n_layer: 'int32_t', n_head: 'int32_t', n_head_kv: 'int32_t', token_bos: 'int32_t',
      token_eos: 'int32_t', token_eot: 'int32_t', reserved: 'int32_t',
    }),
    openStats: koffi.struct({
      size: 'size_t', pack_source: 'int32_t', packed_matrices: 'int32_t', packed_bytes: 'int64_t',
      map_ms: 'double', parse_ms: 'double', tensors_ms: 'double', pack_ms: 'double',
    }),
    message: koffi.struct({ role: 'const char *', content: 'const char *' }),
    sessionParams: koffi.struct({
      size: 'size_t', n_ctx: 'int32_t', n_threads: 'int32_t', kv_type: 'int32_t', flags: 'uint32_t',
    }),
    samplerParams: koffi.struct({
      size: 'size_t', temperature: 'float', top_k: 'int32_t', top_p: 'float', min_p: 'float',
      repeat_penalty: 'float', presence_penalty: 'float', frequency_penalty: 'float',
      penalty_last_n: 'int32_t', seed: 'uint64_t',
    }),
  };
  const P = (x) => koffi.pointer(x);
  const out = (x) => koffi.out(koffi.pointer(x));
  const f = (name, ret, args) => dll.func(name, ret, args);
  const sizeOut = koffi.out(koffi.pointer('size_t'));
  const c = {
    version: f('moonlm_version', 'const char *', []),
    abi_version: f('moonlm_abi_version', 'int', []),
    status_string: f('moonlm_status_string', 'const char *', ['int']),
    last_error: f('moonlm_last_error', 'const char *', []),
    model_params_init: f('moonlm_model_params_init', 'void', [out(t.modelParams), 'size_t']),
    model_open: f('moonlm_model_open', 'int', ['const char *', P(t.modelParams), koffi.out(P(t.model))]),
    model_free: f('moonlm_model_free', 'int', [t.model]),
    model_get_info: f('moonlm_model_get_info', 'int', [t.model, koffi.inout(P(t.modelInfo))]),
    model_architecture: f('moonlm_model_architecture', 'int', [t.model, 'uint8_t *', 'size_t', sizeOut]),
    model_chat_template: f('moonlm_model_chat_template', 'int', [t.model, 'uint8_t *', 'size_t', sizeOut]),
    model_is_eog: f('moonlm_model_is_eog', 'int', [t.model, 'int32_t']),
    tokenize: f('moonlm_tokenize', 'int',
      [t.model, 'uint8_t *', 'size_t', 'uint32_t', 'int32_t *', 'size_t', sizeOut]),
    token_to_piece: f('moonlm_token_to_piece', 'int', [t.model, 'int32_t', 'uint8_t *', 'size_t', sizeOut]),
    detokenize: f('moonlm_detokenize', 'int',
      [t.model, 'int32_t *', 'size_t', 'uint8_t *', 'size_t', sizeOut]),
    chat_apply_template: f('moonlm_chat_apply_template', 'int',
      [t.model, P(t.message), 'size_t', 'int', 'uint8_t *', 'size_t', sizeOut]),
    session_params_init: f('moonlm_session_params_init', 'void', [out(t.sessionParams), 'size_t']),
    session_new: f('moonlm_session_new', 'int', [t.model, P(t.sessionParams), koffi.out(P(t.session))]),
    session_free: f('moonlm_session_free', 'int', [t.session]),
    prefill: f('moonlm_prefill', 'int', [t.session, 'int32_t *', 'size_t', 'float *', 'size_t']),
    decode: f('moonlm_decode', 'int', [t.session, 'int32_t', 'float *', 'size_t']),
    session_rewind: f('moonlm_session_rewind', 'int', [t.session, 'size_t']),
    session_position: f('moonlm_session_position', 'int', [t.session, sizeOut]),
    session_cancel: f('moonlm_session_cancel', 'int', [t.session]),
    sampler_params_init: f('moonlm_sampler_params_init', 'void', [out(t.samplerParams), 'size_t']),
    sampler_new: f('moonlm_sampler_new', 'int', [P(t.samplerParams), koffi.out(P(t.sampler))]),
    sampler_free: f('moonlm_sampler_free', 'int', [t.sampler]),
    sampler_accept: f('moonlm_sampler_accept', 'int', [t.sampler, 'int32_t']),
    sampler_reset: f('moonlm_sampler_reset', 'int', [t.sampler]),
    sample: f('moonlm_sample', 'int', [t.sampler, 'float *', 'size_t', koffi.out(P('int32_t'))]),
  };
  // Added to ABI 1 later: libraries built before it lack the symbol, and
  // async failures then fall back to asyncError's generic messages.
  try {
    c.session_last_error = f('moonlm_session_last_error', 'int', [t.session, 'uint8_t *', 'size_t', sizeOut]);
  } catch {
    c.session_last_error = null;
  }
  try {
    c.model_open_stats = f('moonlm_model_open_stats', 'int', [t.model, koffi.inout(P(t.openStats))]);
  } catch {
    c.model_open_stats = null;
  }
  try {
    c.chat_apply_template_named = f('moonlm_chat_apply_template_named', 'int',
      [t.model, 'const char *', P(t.message), 'size_t', 'int', 'uint8_t *', 'size_t', sizeOut]);
    c.chat_builtin_templates = f('moonlm_chat_builtin_templates', 'int', ['uint8_t *', 'size_t', sizeOut]);
  } catch {
    c.chat_apply_template_named = null;
    c.chat_builtin_templates = null;
  }
  const abi = c.abi_version();
  if (abi !== ABI_VERSION) {
    throw new MoonlmError(0, `moonlm: ${file} has ABI version ${abi}, this package needs ${ABI_VERSION}`);
  }
  L = { file, c, t };
  return L;
}

/** The error for a failed synchronous call: the library's message for this thread. */
function errorFor(st, what) {
  const { c } = lib();
  const msg = c.last_error() || `${what}: ${c.status_string(st)}`;
  return new MoonlmError(st, msg);
}

function check(st, what) {
  if (st !== Status.OK) throw errorFor(st, what);
}

/**
 * Runs fn.async(...args) as a promise of its status. The library keeps its
 * last error per OS thread and async calls run on a worker thread, so the
 * thread's message is not reachable from here: session calls read the
 * session's copy (Session._asyncError), others fall back to asyncError.
 */
function callAsync(fn, ...args) {
  return new Promise((resolve, reject) => {
    fn.async(...args, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

/**
 * The error for a failed async call when the library kept no message for
 * it (no session, or a library without moonlm_session_last_error).
 * retrySync, if given, repeats the call
 * synchronously to obtain the library's own message; it is used only for
 * statuses the header guarantees are returned before any work is done (so
 * the repeat is cheap and changes nothing).
 */
function asyncError(st, what, retrySync) {
  const { c } = lib();
  const beforeWork = st === Status.INVALID_ARGUMENT || st === Status.CONTEXT_FULL ||
    st === Status.BUFFER_TOO_SMALL || st === Status.IO || st === Status.BAD_FILE ||
    st === Status.UNSUPPORTED;
  if (retrySync && beforeWork) {
    const st2 = retrySync();
    if (st2 === st) return new MoonlmError(st, c.last_error() || `${what}: ${c.status_string(st)}`);
  }
  return new MoonlmError(st, `${what}: ${c.status_string(st)}`);
}

// Handles forgotten without close() are freed when collected.
const registry = new FinalizationRegistry(({ free, handle }) => {
  try { free(handle); } catch { /* nobody to tell */ }
});

// ---- text buffers --------------------------------------------------------

/**
 * Calls fn(...args, buf, cap, nOut) under the (buf, cap, n_out) protocol with
 * a buffer reused across calls (JS is single-threaded and these calls are
 * synchronous), retrying once with the size the library asks for.
 */
class TextBuffer {
  constructor(cap = 256) { this.buf = Buffer.alloc(cap); this.nOut = [0]; }

  call(fn, what, ...args) {
    for (let i = 0; i < 3; i++) {
      const st = fn(...args, this.buf, this.buf.length, this.nOut);
      if (st === Status.BUFFER_TOO_SMALL) {
        this.buf = Buffer.alloc(Number(this.nOut[0]) + 1);
        continue;
      }
      check(st, what);
      return this.buf.subarray(0, Number(this.nOut[0]));
    }
    throw invalid(`${what}: the library kept asking for a larger buffer`);
  }
}

// ---- streaming text helpers (pure JS) ------------------------------------

/** Bytes at the end of b that begin a UTF-8 character still missing bytes. */
function incompleteUtf8Tail(b) {
  const n = b.length;
  for (let back = 1; back <= Math.min(4, n); back++) {
    const c = b[n - back];
    if ((c & 0xc0) === 0x80) continue; // continuation: look further back for the lead
    let need;
    if (c >= 0xf8) return 0; // not a lead byte: invalid, waiting will not help
    if (c >= 0xf0) need = 4;
    else if (c >= 0xe0) need = 3;
    else if (c >= 0xc0) need = 2;
    else return 0;
    return back < need ? back : 0;
  }
  return 0;
}

/**
 * Turns generated tokens into text pieces: each piece is the difference
 * between the detokenization of a short window of tokens with and without
 * the newest ones, so the tokenizer's joining rules (SentencePiece's leading
 * space, byte tokens) apply exactly as to the whole text. A piece is
 * released only when it ends on a complete UTF-8 character.
 */
class IncrementalDetokenizer {
  constructor(detokenizeBytes, context) {
    this.detok = detokenizeBytes;
    this.toks = Array.from(context).slice(-4);
    this.read = this.toks.length;
  }

  _diff() {
    const prevLen = this.read ? this.detok(Int32Array.from(this.toks.slice(0, this.read))).length : 0;
    const cur = this.detok(Int32Array.from(this.toks));
    return Buffer.from(cur.subarray(prevLen)); // copy: cur lives in a reused buffer
  }

  push(token) {
    this.toks.push(token);
    const piece = this._diff();
    if (incompleteUtf8Tail(piece)) return ''; // wait for the rest of the character
    this.toks.splice(0, this.read);
    this.read = this.toks.length;
    return piece.toString('utf8');
  }

  flush() {
    if (this.read === this.toks.length) return '';
    const piece = this._diff();
    this.read = this.toks.length;
    return piece.toString('utf8');
  }
}

/**
 * Cuts a text stream before the first occurrence of any stop string,
 * holding back text that could still become one.
 */
class StopFilter {
  constructor(stop, what = 'StopFilter') {
    let stops;
    if (stop == null) stops = [];
    else if (typeof stop === 'string') stops = [stop];
    else if (typeof stop === 'object' && typeof stop[Symbol.iterator] === 'function') stops = Array.from(stop);
    else throw arg.typeError(what, 'stop', `must be a string or an array of strings, got ${shown(stop)}`);
    stops.forEach((s, i) => arg.string(what, `stop[${i}]`, s));
    this.stops = stops.filter((s) => s.length > 0);
    this.held = '';
    this.done = false;
  }

  push(text, final = false) {
    if (this.done) return '';
    if (this.stops.length === 0) return text;
    const buf = this.held + text;
    let cut = -1;
    for (const s of this.stops) {
      const i = buf.indexOf(s);
      if (i !== -1 && (cut === -1 || i < cut)) cut = i;
    }
    if (cut !== -1) {
      this.done = true;
      this.held = '';
      return buf.slice(0, cut);
    }
    if (final) {
      this.held = '';
      return buf;
    }
    let hold = 0;
    for (const s of this.stops) {
      for (let k = Math.min(s.length - 1, buf.length); k > hold; k--) {
        if (buf.endsWith(s.slice(0, k))) { hold = k; break; }
      }
    }
    this.held = buf.slice(buf.length - hold);
    return buf.slice(0, buf.length - hold);
  }
}

// ---- Model -----------------------------------------------------------------

const KV_TYPES = { f16: 0, f32: 1, q8_0: 2 };

// moonlm_pack_source, by value: the engine's names for where packed weights came from.
const PACK_SOURCES = ['off', 'none', 'packed', 'packed+cache-write', 'cache-hit'];

/**
 * The C value (moonlm_pack_mode, moonlm_packed_cache_mode) of a tri-state
 * open option: undefined, null or 'default' leave the choice to the library
 * (its environment variables, else on). Numbers are refused: 1 and 0 would
 * read as on/off but mean on/default in C.
 */
function switchValue(name, v) {
  if (v == null || v === 'default') return 0;
  if (v === true || v === 'on') return 1;
  if (v === false || v === 'off') return 2;
  const err = typeof v === 'string' ? arg.rangeError : arg.typeError;
  throw err('Model.open', `opts.${name}`, `must be true, false, 'default', 'on' or 'off', got ${shown(v)}`);
}

// moonlm_numerics by option name: omitted, null or 'default' leave the choice
// to the library (MOONLM_NUMERICS as it was when it loaded, else the fast kernels).
const NUMERICS = { default: 0, llamacpp: 1, 'llamacpp-norepack': 2, ik: 3 };

/** The C value of the numerics open option. */
function numericsValue(v) {
  if (v == null) return 0;
  if (typeof v === 'string' && Object.hasOwn(NUMERICS, v)) return NUMERICS[v];
  const err = typeof v === 'string' ? arg.rangeError : arg.typeError;
  throw err('Model.open', 'opts.numerics', `must be 'default', 'llamacpp', 'llamacpp-norepack' or 'ik', got ${shown(v)}`);
}

/**
 * A GGUF model. Open with `await Model.open(path)`; close with close() (or
 * `using`). Sessions made from it stay usable after close(): the library
 * keeps the weights alive until the last session is freed.
 */
class Model {
  constructor(token, handle, file) {
    if (token !== Model._token) throw new TypeError('use `await Model.open(path)`');
    const { c, t } = lib();
    this._h = handle;
    this.path = file;
    this._tb = new TextBuffer();
    this._unreg = {};
    registry.register(this, { free: c.model_free, handle }, this._unreg);
    const info = { size: koffi.sizeof(t.modelInfo) };
    check(c.model_get_info(handle, info), 'model info');
    this._info = info;
    this.architecture = this._tb.call(c.model_architecture, 'model architecture', handle).toString('utf8');
    const tmpl = this._tb.call(c.model_chat_template, 'model chat template', handle).toString('utf8');
    /** The model's Jinja chat template, or null if it has none. */
    this.chatTemplate = tmpl || null;
  }

  /**
   * Opens a model (on a worker thread). opts.threads: worker threads for its
   * sessions (default one per core). opts.pack, opts.packedCache: repack
   * weights for the CPU's kernels, and keep them in the on-disk cache
   * (true/'on', false/'off', 'default'); opts.packedCacheDir,
   * opts.packedCacheBytes: the cache's folder and eviction budget.
   * opts.numerics: the arithmetic, 'default' (MOONLM_NUMERICS, else the
   * fast kernels) or a reference implementation's bit for bit, several
   * times slower: 'llamacpp', 'llamacpp-norepack' or 'ik' (ik_llama.cpp).
   */
  static async open(file, opts) {
    const { c, t } = lib();
    arg.string('Model.open', 'path', file, false);
    opts = arg.options('Model.open', opts, OPEN_OPTS);
    const params = {};
    c.model_params_init(params, koffi.sizeof(t.modelParams));
    // The members this binding knows: a library older than it then refuses
    // a nonzero option it lacks (numerics) instead of ignoring it.
    params.size = koffi.sizeof(t.modelParams);
    if (opts.threads != null) params.n_threads = arg.int('Model.open', 'opts.threads', opts.threads, 0, INT32_MAX);
    params.pack = switchValue('pack', opts.pack);
    params.packed_cache = switchValue('packedCache', opts.packedCache);
    if (opts.packedCacheDir != null) {
      params.packed_cache_dir = arg.string('Model.open', 'opts.packedCacheDir', opts.packedCacheDir, false);
    }
    if (opts.packedCacheBytes != null) {
      // 0 means the library's default
      params.packed_cache_bytes = arg.uint64('Model.open', 'opts.packedCacheBytes', opts.packedCacheBytes, (1n << 63n) - 1n);
    }
    params.numerics = numericsValue(opts.numerics);
    const out = [null];
    const st = await callAsync(c.model_open, file, params, out);
    if (st !== Status.OK) {
      throw asyncError(st, `open ${file}`, () => {
        const again = [null];
        const st2 = c.model_open(file, params, again);
        if (st2 === Status.OK) c.model_free(again[0]); // it changed meanwhile: keep the first answer
        return st2;
      });
    }
    const m = new Model(Model._token, out[0], file);
    /** The numerics mode asked for at open ('default' if none). */
    m.numerics = opts.numerics ?? 'default';
    return m;
  }

  /** Releases the model. Idempotent; open sessions keep working. */
  close() {
    if (this._h === null) return;
    const { c } = lib();
    registry.unregister(this._unreg);
    c.model_free(this._h);
    this._h = null;
  }

  [Symbol.dispose]() { this.close(); }

  get closed() { return this._h === null; }

  _handle(what) {
    if (this._h === null) throw invalid(`${what}: the model is closed`);
    return this._h;
  }

  get vocabSize() { return this._info.n_vocab; }
  /** The context length the model was trained with (the default nCtx). */
  get contextLength() { return this._info.n_ctx_train; }
  get embeddingSize() { return this._info.n_embd; }
  get nLayers() { return this._info.n_layer; }
  get nHeads() { return this._info.n_head; }
  get nKvHeads() { return this._info.n_head_kv; }
  get bosTokenId() { return this._info.token_bos < 0 ? null : this._info.token_bos; }
  get eosTokenId() { return this._info.token_eos < 0 ? null : this._info.token_eos; }
  get eotTokenId() { return this._info.token_eot < 0 ? null : this._info.token_eot; }

  /**
   * How the model was opened: packSource ('off', 'none' (nothing packable on
   * this CPU), 'packed', 'packed+cache-write' or 'cache-hit'),
   * packedMatrices, packedBytes, and each phase's time in milliseconds.
   */
  openStats() {
    const { c, t } = lib();
    if (!c.model_open_stats) {
      throw new MoonlmError(Status.UNSUPPORTED, `openStats: ${lib().file} predates moonlm_model_open_stats; rebuild the library`);
    }
    const s = { size: koffi.sizeof(t.openStats) };
    check(c.model_open_stats(this._handle('openStats'), s), 'openStats');
    const packSource = PACK_SOURCES[s.pack_source];
    if (packSource === undefined) throw new MoonlmError(Status.INTERNAL, `openStats: unknown pack source ${s.pack_source}`);
    return {
      packSource,
      packedMatrices: s.packed_matrices,
      packedBytes: Number(s.packed_bytes),
      mapMs: s.map_ms,
      parseMs: s.parse_ms,
      tensorsMs: s.tensors_ms,
      packMs: s.pack_ms,
    };
  }

  /** Whether token ends generation (EOS, EOT and the like). */
  isEog(token) {
    return lib().c.model_is_eog(this._handle('isEog'), arg.token('isEog', 'token', token)) !== 0;
  }

  /**
   * Token ids of text. opts.addSpecial (default true) adds BOS/EOS as the
   * model asks; opts.parseSpecial turns special-token text into ids.
   */
  tokenize(text, opts) {
    const { c } = lib();
    const h = this._handle('tokenize');
    arg.string('tokenize', 'text', text);
    opts = arg.options('tokenize', opts, TOKENIZE_OPTS);
    const data = Buffer.from(text, 'utf8');
    const flags = tokenizeFlags('tokenize', opts);
    const nOut = [0];
    let cap = data.length + 8;
    for (let i = 0; i < 3; i++) {
      const out = new Int32Array(cap);
      const st = c.tokenize(h, data, data.length, flags, out, cap, nOut);
      if (st === Status.BUFFER_TOO_SMALL) { cap = Number(nOut[0]); continue; }
      check(st, 'tokenize');
      return out.subarray(0, Number(nOut[0]));
    }
    throw invalid('tokenize: the library kept asking for a larger buffer');
  }

  /** The text of tokens; special tokens such as BOS render as nothing. */
  detokenize(tokens) {
    return this._detokenizeBytes(arg.tokens('detokenize', 'tokens', tokens)).toString('utf8');
  }

  // The bytes live in a reused buffer: valid until the next call.
  _detokenizeBytes(toks) {
    const h = this._handle('detokenize');
    return this._tb.call(lib().c.detokenize, 'detokenize', h, toks, toks.length);
  }

  /** The raw bytes of one token inside a text (may be part of a UTF-8 character). */
  tokenToPiece(token) {
    const h = this._handle('tokenToPiece');
    arg.token('tokenToPiece', 'token', token);
    return Buffer.from(this._tb.call(lib().c.token_to_piece, 'tokenToPiece', h, token));
  }

  /**
   * Renders OpenAI-style messages ({role, content}) with the model's chat
   * template, or with opts.template ('chatml', or another name from
   * builtinChatTemplates()) in that built-in format. A model without a
   * template (a base model) is MoonlmError UNSUPPORTED naming the built-in
   * formats: nothing is guessed. An unknown name is INVALID_ARGUMENT.
   */
  applyChatTemplate(messages, opts) {
    const h = this._handle('applyChatTemplate');
    const msgs = arg.messages('applyChatTemplate', messages);
    opts = arg.options('applyChatTemplate', opts, APPLY_TEMPLATE_OPTS);
    const add = opts.addAssistant == null || arg.bool('applyChatTemplate', 'opts.addAssistant', opts.addAssistant) ? 1 : 0;
    const template = opts.template == null ? null : arg.string('applyChatTemplate', 'opts.template', opts.template, false);
    const { c } = lib();
    try {
      if (c.chat_apply_template_named) {
        return this._tb.call(c.chat_apply_template_named, 'applyChatTemplate', h, template || null, msgs, msgs.length, add)
          .toString('utf8');
      }
      if (template) {
        throw new MoonlmError(Status.UNSUPPORTED,
          `applyChatTemplate: ${lib().file} predates built-in templates (template); rebuild the library`);
      }
      return this._tb.call(c.chat_apply_template, 'applyChatTemplate', h, msgs, msgs.length, add).toString('utf8');
    } catch (e) {
      if (template || !(e instanceof MoonlmError) || e.status !== Status.UNSUPPORTED) throw e;
      throw new MoonlmError(Status.UNSUPPORTED, `${e.message}; pass { template: 'NAME' } to use a built-in format`);
    }
  }

  _chatTokens(messages, template) {
    const text = this.applyChatTemplate(messages, { addAssistant: true, template });
    let toks = this.tokenize(text, { addSpecial: true, parseSpecial: true });
    const bos = this.bosTokenId;
    if (bos !== null && toks.length >= 2 && toks[0] === bos && toks[1] === bos) toks = toks.subarray(1);
    return toks;
  }

  /** A new session. opts: nCtx (default contextLength), threads, kvType ('f16' default, or 'f32'). */
  session(opts) {
    return new Session(this, opts);
  }

  _promptTokens(prompt, opts) {
    if (typeof prompt === 'string') {
      const flags = tokenizeFlags('generate', opts);
      return this.tokenize(prompt, { addSpecial: (flags & 1) !== 0, parseSpecial: (flags & 2) !== 0 });
    }
    return arg.tokens('generate', 'prompt', prompt);
  }

  /**
   * Streams the continuation of prompt (text, or token ids used as given)
   * as text pieces: `for await (const piece of model.stream(p, opts))`.
   * Breaking out of the loop early frees everything. See generate() for opts.
   */
  stream(prompt, opts) {
    opts = arg.options('generate', opts, GENERATE_OPTS);
    return this._stream(this._promptTokens(prompt, opts), opts, 'generate');
  }

  /**
   * The continuation of prompt as one string. opts: maxTokens (256),
   * temperature, topK, topP, minP, repeatPenalty, presencePenalty,
   * frequencyPenalty, penaltyLastN, seed (library defaults when omitted;
   * temperature 0 is greedy), stop (strings, not included in the text),
   * signal (an AbortSignal: rejects with MoonlmError CANCELLED), nCtx.
   */
  async generate(prompt, opts) {
    let text = '';
    for await (const piece of this.stream(prompt, opts)) text += piece;
    return text;
  }

  /**
   * Streams the assistant's reply to OpenAI-style messages, written with the
   * model's chat template or opts.template (see applyChatTemplate); other
   * opts as for generate().
   */
  chatStream(messages, opts) {
    opts = arg.options('chat', opts, CHAT_OPTS);
    return this._stream(this._chatTokens(messages, opts.template), opts, 'chat');
  }

  /** The assistant's reply to OpenAI-style messages, as one string (opts as for chatStream). */
  async chat(messages, opts) {
    let text = '';
    for await (const piece of this.chatStream(messages, opts)) text += piece;
    return text;
  }

  // opts: checked against the caller's option names already.
  _stream(tokens, opts, what) {
    const { maxTokens, stop, signal } = loopArgs(what, opts); // all checked before any allocation
    if (tokens.length === 0) throw arg.rangeError(what, 'prompt', 'has no tokens');
    const nCtx = opts.nCtx != null ? arg.int(what, 'opts.nCtx', opts.nCtx, 1, INT32_MAX)
      : Math.min(tokens.length + Math.max(maxTokens, 1), this.contextLength);
    const sampler = new Sampler(samplerOptions(opts), what);
    let session;
    try {
      session = new Session(this, { nCtx });
    } catch (e) {
      sampler.close();
      throw e;
    }
    return generateLoop(this, session, tokens, maxTokens, sampler, stop, signal, true);
  }
}
Model._token = Symbol('Model');

function abortedError(signal, cause) {
  return new MoonlmError(Status.CANCELLED, 'generate: aborted', { cause: signal.reason ?? cause });
}

/** The generation loop behind stream/generate/chat. */
async function* generateLoop(model, session, tokens, maxTokens, sampler, stop, signal, own) {
  // Cancel only a call in flight: between calls the loop checks the signal
  // itself, and a request left pending would cancel the session's next call.
  const onAbort = () => { if (session._busy) session.cancel(); };
  try {
    if (signal) {
      if (signal.aborted) throw abortedError(signal);
      signal.addEventListener('abort', onAbort, { once: true });
    }
    if (maxTokens === 0) return;
    let logits;
    try {
      logits = await session.prefill(tokens);
    } catch (e) {
      if (signal && signal.aborted && e.code === 'CANCELLED') throw abortedError(signal, e);
      throw e;
    }
    for (const t of tokens) sampler.accept(t);
    const detok = new IncrementalDetokenizer((t) => model._detokenizeBytes(t), tokens);
    for (let i = 0; i < maxTokens; i++) {
      const tok = sampler.sample(logits);
      if (model.isEog(tok)) break;
      sampler.accept(tok);
      const out = stop.push(detok.push(tok));
      if (out) yield out;
      if (stop.done) return;
      if (signal && signal.aborted) throw abortedError(signal);
      if (i + 1 === maxTokens) break;
      if (session.position >= session.nCtx) break; // the context is used up: end of text
      try {
        logits = await session.decode(tok);
      } catch (e) {
        if (signal && signal.aborted && e.code === 'CANCELLED') throw abortedError(signal, e);
        throw e;
      }
    }
    const out = stop.push(detok.flush(), true);
    if (out) yield out;
  } finally {
    if (signal) signal.removeEventListener('abort', onAbort);
    if (own) session.close();
    sampler.close();
  }
}

// ---- Session -----------------------------------------------------------------

/**
 * A sequence being evaluated: its KV cache and position. prefill() and
 * decode() resolve to the logits of the last position as a Float32Array
 * that the session overwrites on every call (`logits`): copy it
 * (`logits.slice()`) to keep it. The library itself writes into a private
 * buffer that user code never sees, copied out when the call is over, so
 * nothing done to `logits` during a call (transferring its ArrayBuffer, say)
 * can make the library write into freed memory; a detached `logits` is
 * replaced by a new array. One call at a time per session (a concurrent one
 * rejects with BUSY); cancel() works any time.
 */
class Session {
  constructor(model, opts) {
    const { c, t } = lib();
    if (!(model instanceof Model)) throw arg.typeError('session', 'model', `must be a Model, got ${shown(model)}`);
    const h = model._handle('session');
    opts = arg.options('session', opts, SESSION_OPTS);
    const params = {};
    c.session_params_init(params, koffi.sizeof(t.sessionParams));
    if (opts.nCtx != null) params.n_ctx = arg.int('session', 'opts.nCtx', opts.nCtx, 1, INT32_MAX);
    if (opts.threads != null) params.n_threads = arg.int('session', 'opts.threads', opts.threads, 0, INT32_MAX);
    const kv = opts.kvType ?? 'f16';
    if (!Object.hasOwn(KV_TYPES, kv)) {
      const err = typeof kv === 'string' ? arg.rangeError : arg.typeError;
      throw err('session', 'opts.kvType', `must be 'f16', 'f32' or 'q8_0', got ${shown(kv)}`);
    }
    params.kv_type = KV_TYPES[kv];
    const out = [null];
    check(c.session_new(h, params, out), 'session');
    this._h = out[0];
    this._unreg = {};
    registry.register(this, { free: c.session_free, handle: this._h }, this._unreg);
    this.model = model;
    this.nCtx = params.n_ctx > 0 ? params.n_ctx : model.contextLength;
    this.kvType = kv;
    this.nVocab = model.vocabSize;
    this._out = new Float32Array(this.nVocab); // the library writes here; never handed out
    this._logits = new Float32Array(this.nVocab); // the public copy
    this._busy = false;
    this._pos = [0];
    this._tb = null; // for moonlm_session_last_error, made at the first failure
  }

  /** Frees the session. Idempotent; a running call is cancelled. */
  close() {
    if (this._h === null) return;
    registry.unregister(this._unreg);
    lib().c.session_free(this._h);
    this._h = null;
  }

  [Symbol.dispose]() { this.close(); }

  get closed() { return this._h === null; }

  _handle(what) {
    if (this._h === null) throw invalid(`${what}: the session is closed`);
    if (this._busy) throw new MoonlmError(Status.BUSY, `${what}: the session is busy with another call`);
    return this._h;
  }

  /** The logits of the last prefill()/decode() (overwritten by the next). */
  get logits() { return this._logits; }

  // Runs fn.async(h, ...args, out, n) on a worker thread. out is the private
  // buffer; the local reference keeps it alive until the call is over even
  // if the session itself is dropped meanwhile.
  async _run(what, fn, args, retry) {
    const h = this._handle(what);
    const out = this._out;
    this._busy = true;
    let st;
    try {
      st = await callAsync(fn, h, ...args, out, out.length);
    } finally {
      this._busy = false;
    }
    if (st !== Status.OK) throw this._asyncError(st, what, retry);
    if (this._logits.length !== out.length) this._logits = new Float32Array(out.length); // detached by user code
    this._logits.set(out);
    return this._logits;
  }

  /**
   * The error for a failed async call on this session, with the library's
   * message as kept on the session handle (moonlm_session_last_error). A
   * BUSY call or a closed handle left no message there (one still there is
   * an older call's), so those fall back to asyncError.
   */
  _asyncError(st, what, retry) {
    const { c } = lib();
    if (this._h === null) return asyncError(st, what, null);
    if (c.session_last_error && st !== Status.BUSY) {
      this._tb ??= new TextBuffer();
      let msg = '';
      try {
        msg = this._tb.call(c.session_last_error, 'session last error', this._h).toString('utf8');
      } catch { /* fall back below */ }
      if (msg) return new MoonlmError(st, msg);
    }
    return asyncError(st, what, () => retry(this._h));
  }

  /** Evaluates tokens at the current position; resolves to the last logits. */
  async prefill(tokens) {
    // A copy the binding alone holds: the worker thread reads it during the call.
    const toks = arg.tokens('prefill', 'tokens', tokens, true);
    const { c } = lib();
    return this._run('prefill', c.prefill, [toks, toks.length],
      (h) => c.prefill(h, toks, toks.length, this._out, this._out.length));
  }

  /** Evaluates one token; resolves to the next-token logits. */
  async decode(token) {
    arg.token('decode', 'token', token);
    const { c } = lib();
    return this._run('decode', c.decode, [token],
      (h) => c.decode(h, token, this._out, this._out.length));
  }

  /** Keeps the first nKeep positions and forgets the rest. */
  rewind(nKeep) {
    const h = this._handle('rewind');
    arg.int('rewind', 'nKeep', nKeep, 0, Number.MAX_SAFE_INTEGER);
    check(lib().c.session_rewind(h, nKeep), 'rewind');
  }

  /** Tokens evaluated so far (the next token's position). */
  get position() {
    if (this._h === null) throw invalid('position: the session is closed');
    check(lib().c.session_position(this._h, this._pos), 'position');
    return Number(this._pos[0]);
  }

  /** Makes the running (or next) prefill/decode reject with CANCELLED. */
  cancel() {
    if (this._h === null) return;
    check(lib().c.session_cancel(this._h), 'cancel');
  }

  /**
   * Streams a continuation of tokens from this session's position (the
   * session stays open; the last generated token is not evaluated). Needs
   * the session's model to be open (for detokenization).
   * opts as for Model.generate; opts.sampler uses (and keeps open) a Sampler.
   */
  stream(tokens, opts) {
    opts = arg.options('stream', opts, SESSION_STREAM_OPTS);
    const toks = arg.tokens('stream', 'tokens', tokens);
    const { maxTokens, stop, signal } = loopArgs('stream', opts);
    const own = opts.sampler == null;
    if (!own) {
      if (!(opts.sampler instanceof Sampler)) {
        throw arg.typeError('stream', 'opts.sampler', `must be a Sampler, got ${shown(opts.sampler)}`);
      }
      const extra = Object.keys(samplerOptions(opts));
      if (extra.length) throw arg.typeError('stream', `opts.${extra[0]}`, 'cannot be combined with opts.sampler');
    }
    const sampler = own ? new Sampler(samplerOptions(opts), 'stream') : opts.sampler;
    const borrowed = own ? sampler : { sample: (l) => sampler.sample(l), accept: (t) => sampler.accept(t), close() {} };
    return generateLoop(this.model, this, toks, maxTokens, borrowed, stop, signal, false);
  }
}

// ---- Sampler -------------------------------------------------------------------

/**
 * Chooses tokens from logits: penalties, topK, topP, minP, temperature, then
 * a seeded draw (temperature <= 0 is greedy). Omitted options keep the
 * library's defaults (temperature 0.8, topK 40, topP 0.95, minP 0.05).
 */
class Sampler {
  // what: the public call the options came through, for messages.
  constructor(opts, what = 'Sampler') {
    const { c, t } = lib();
    opts = arg.options(what, opts, SAMPLER_OPT_NAMES);
    const p = {};
    c.sampler_params_init(p, koffi.sizeof(t.samplerParams));
    for (const [js, [cname, kind]] of Object.entries(SAMPLER_FIELDS)) {
      const v = opts[js];
      if (v == null) continue;
      p[cname] = kind === 'int' ? arg.int(what, `opts.${js}`, v, INT32_MIN, INT32_MAX) : arg.float(what, `opts.${js}`, v);
    }
    // MOONLM_SEED_RANDOM (2**64-1) is what omitting the seed means.
    if (opts.seed != null) p.seed = arg.uint64(what, 'opts.seed', opts.seed, UINT64_MAX - 1n);
    this.params = p;
    const out = [null];
    check(c.sampler_new(p, out), 'sampler');
    this._h = out[0];
    this._unreg = {};
    registry.register(this, { free: c.sampler_free, handle: this._h }, this._unreg);
    this._tok = [0];
  }

  close() {
    if (this._h === null) return;
    registry.unregister(this._unreg);
    lib().c.sampler_free(this._h);
    this._h = null;
  }

  [Symbol.dispose]() { this.close(); }

  _handle(what) {
    if (this._h === null) throw invalid(`${what}: the sampler is closed`);
    return this._h;
  }

  /** A token chosen from logits (a Float32Array of nVocab); not accepted. */
  sample(logits) {
    const h = this._handle('sample');
    if (!(logits instanceof Float32Array)) {
      if (logits == null || typeof logits !== 'object' || typeof logits.length !== 'number') {
        throw arg.typeError('sample', 'logits', `must be a Float32Array or an array of numbers, got ${shown(logits)}`);
      }
      const a = new Float32Array(logits.length);
      for (let i = 0; i < a.length; i++) {
        const v = logits[i];
        if (typeof v !== 'number') throw arg.typeError('sample', `logits[${i}]`, `must be a number, got ${shown(v)}`);
        a[i] = v;
      }
      logits = a;
    }
    check(lib().c.sample(h, logits, logits.length, this._tok), 'sample');
    return this._tok[0];
  }

  /** Records token in the history the penalties look at. */
  accept(token) {
    const h = this._handle('accept');
    check(lib().c.sampler_accept(h, arg.token('accept', 'token', token)), 'sampler accept');
  }

  /** Forgets the accepted history (keeps the random state). */
  reset() {
    check(lib().c.sampler_reset(this._handle('reset')), 'sampler reset');
  }
}

/** The path libmoonlm.so was loaded from. */
function libraryPath() { return lib().file; }

/** The loaded library's version ("MAJOR.MINOR.PATCH"). */
function libraryVersion() { return lib().c.version(); }

/** The built-in chat formats applyChatTemplate/chat accept as template ('chatml', 'gemma', ...), sorted. */
function builtinChatTemplates() {
  const { c, file } = lib();
  if (!c.chat_builtin_templates) {
    throw new MoonlmError(Status.UNSUPPORTED, `builtinChatTemplates: ${file} predates built-in templates; rebuild the library`);
  }
  return new TextBuffer(64).call(c.chat_builtin_templates, 'builtinChatTemplates').toString('utf8').split(',');
}

module.exports = {
  Model,
  Session,
  Sampler,
  MoonlmError,
  Status,
  libraryPath,
  libraryVersion,
  builtinChatTemplates,
  // exported for tests and for custom loops
  IncrementalDetokenizer,
  StopFilter,
};
// Session state (prefixReuse, stats, tokens, fork, saveState, loadState) and
// Conversation: state.js, given the internals it builds on.
module.exports.Conversation = require('./state.js').install({
  koffi, lib, check, invalid, arg, shown, Status, MoonlmError, Model, Session, Sampler, registry, callAsync,
  loopArgs, samplerOptions, SAMPLER_OPT_NAMES, LOOP_OPTS, abortedError, IncrementalDetokenizer,
}).Conversation;
module.exports.default = module.exports; // for `import moonlm from 'moonlm'` compiled to CommonJS
