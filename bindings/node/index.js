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
   * with a string role and a content that is a string or null (null: ""),
   * and no keys beyond MESSAGE_KEYS (the tool keys are checked by the
   * library, which gets such messages as JSON).
   */
  messages(what, messages) {
    if (!Array.isArray(messages)) throw arg.typeError(what, 'messages', `must be an array, got ${shown(messages)}`);
    return messages.map((m, i) => {
      if (m == null || typeof m !== 'object') throw arg.typeError(what, `messages[${i}]`, `must be an object, got ${shown(m)}`);
      for (const k of Object.keys(m)) {
        if (!MESSAGE_KEYS.includes(k)) {
          throw arg.typeError(what, `messages[${i}].${k}`, `is not a message key (known: ${MESSAGE_KEYS.join(', ')})`);
        }
      }
      const role = arg.string(what, `messages[${i}].role`, m.role, false);
      if (!('content' in m) && !('tool_calls' in m)) {
        throw arg.typeError(what, `messages[${i}].content`, 'is missing (a string, or null for none)');
      }
      const content = m.content == null ? '' : arg.string(what, `messages[${i}].content`, m.content, false);
      return { role, content };
    });
  },
};

// moonlm_pooling by name, and the options of embed.
const POOLINGS = { model: 0, none: 1, mean: 2, cls: 3, last: 4, rank: 5 };
const EMBED_OPTS = new Set(['pooling', 'normalize']);

// The keys of an OpenAI-style message the library knows; others are refused.
const MESSAGE_KEYS = ['role', 'content', 'tool_calls', 'tool_call_id', 'name'];

/** Whether messages carry tool calls or results (then they go to the library as JSON). */
function usesTools(messages) {
  return messages.some((m) => m.role === 'tool' || MESSAGE_KEYS.slice(2).some((k) => k in m));
}

// The option names each call takes; anything else is refused.
const SAMPLER_FIELDS = {
  temperature: ['temperature', 'float'], topK: ['top_k', 'int'], topP: ['top_p', 'float'],
  minP: ['min_p', 'float'], repeatPenalty: ['repeat_penalty', 'float'],
  presencePenalty: ['presence_penalty', 'float'], frequencyPenalty: ['frequency_penalty', 'float'],
  penaltyLastN: ['penalty_last_n', 'int'],
  typicalP: ['typical_p', 'float'], xtcProbability: ['xtc_probability', 'float'],
  xtcThreshold: ['xtc_threshold', 'float'], mirostat: ['mirostat', 'int', 0, 2],
  mirostatTau: ['mirostat_tau', 'float'], mirostatEta: ['mirostat_eta', 'float'],
  dryMultiplier: ['dry_multiplier', 'float'], dryBase: ['dry_base', 'float'],
  dryAllowedLength: ['dry_allowed_length', 'int', 0, 2 ** 31 - 1],
  dryPenaltyLastN: ['dry_penalty_last_n', 'int', -1, 2 ** 31 - 1],
};
const SAMPLER_OPT_NAMES = new Set([...Object.keys(SAMPLER_FIELDS), 'seed', 'drySequenceBreakers', 'logitBias']);
// Structured output and log-probabilities: options of generate/chat and their streams.
const OUTPUT_OPTS = ['grammar', 'jsonSchema', 'responseFormat', 'logprobs', 'topLogprobs'];
// Speculative decoding: 'lookup', a draft Model (Session for Session.stream), and guesses per pass.
const DRAFT_OPTS = ['draft', 'draftTokens'];
// 'keepSpecial': control tokens in the text as their text (MOONLM_GENERATE_KEEP_SPECIAL).
const GENERATE_KEEP_SPECIAL = 2;
// moonlm_generate_params.draft and its bound (moonlm.h).
const DRAFT_NONE = 0;
const DRAFT_LOOKUP = 1;
const DRAFT_MODEL = 2;
const MAX_DRAFT_TOKENS = 64;
// moonlm_grammar_for_tool_calls_ex flags.
const TOOL_CALLS_PARALLEL = 1;
// Bounds of moonlm_sampler_params and moonlm_generate_params (moonlm.h).
const MAX_LOGIT_BIAS = 1 << 20;
const MAX_DRY_BREAKERS = 1024;
const MAX_TOP_LOGPROBS = 20;
const MAX_GRAMMAR_BYTES = 1 << 24;
const OPEN_OPTS = new Set(['threads', 'pack', 'packedCache', 'packedCacheDir', 'packedCacheBytes', 'numerics', 'progress']);
const TOKENIZE_OPTS = new Set(['addSpecial', 'parseSpecial']);
const SESSION_OPTS = new Set(['nCtx', 'threads', 'kvType', 'checkpointEvery', 'checkpointBytes']);
const LOOP_OPTS = ['maxTokens', 'stop', 'signal'];
// 'details': generate/chat resolve to a Completion instead of the text.
const GENERATE_OPTS = new Set([...SAMPLER_OPT_NAMES, ...LOOP_OPTS, ...OUTPUT_OPTS, ...DRAFT_OPTS, 'nCtx', 'addSpecial', 'parseSpecial', 'details',
  'keepSpecial']);
// 'template': a built-in chat format by name (checked where the template is applied).
// 'tools': OpenAI-style function specs; the completion reports the calls.
// 'toolChoice': 'auto', 'none', 'required' or { type: 'function', function: { name } }.
// 'parallelToolCalls': true lets a forced reply make several calls; false keeps one (also of a free reply).
const CHAT_OPTS = new Set([...SAMPLER_OPT_NAMES, ...LOOP_OPTS, ...OUTPUT_OPTS, ...DRAFT_OPTS, 'nCtx', 'template', 'details', 'tools', 'toolChoice',
  'parallelToolCalls', 'keepSpecial']);
const SESSION_STREAM_OPTS = new Set([...SAMPLER_OPT_NAMES, ...LOOP_OPTS, ...OUTPUT_OPTS, ...DRAFT_OPTS, 'sampler']);
const APPLY_TEMPLATE_OPTS = new Set(['addAssistant', 'template', 'tools']);
const PARSE_TOOLS_OPTS = new Set(['template']);

/** The sampler's options among a generation call's (already checked) options. */
function samplerOptions(opts) {
  const out = {};
  for (const k of SAMPLER_OPT_NAMES) if (opts[k] != null) out[k] = opts[k];
  return out;
}

// The bounds of moonlm_generate_params' stop strings (MOONLM_MAX_STOP_STRINGS, MOONLM_MAX_STOP_BYTES).
const MAX_STOP_STRINGS = 1024;
const MAX_STOP_BYTES = 1 << 20;

/** Stop strings (a string or an iterable of strings) as UTF-8 Buffers, empty ones dropped. */
function stopStrings(what, stop) {
  let stops;
  if (stop == null) stops = [];
  else if (typeof stop === 'string') stops = [stop];
  else if (typeof stop === 'object' && typeof stop[Symbol.iterator] === 'function') stops = Array.from(stop);
  else throw arg.typeError(what, 'stop', `must be a string or an array of strings, got ${shown(stop)}`);
  stops.forEach((s, i) => arg.string(what, `stop[${i}]`, s));
  const out = stops.filter((s) => s.length > 0).map((s) => Buffer.from(s, 'utf8'));
  if (out.length > MAX_STOP_STRINGS) {
    throw arg.rangeError(what, 'stop', `has ${out.length} strings; at most ${MAX_STOP_STRINGS}`);
  }
  if (out.reduce((n, b) => n + b.length, 0) > MAX_STOP_BYTES) {
    throw arg.rangeError(what, 'stop', `holds more than ${MAX_STOP_BYTES} bytes of UTF-8`);
  }
  return out;
}

/** The generation loop's own options, checked. */
function loopArgs(what, opts) {
  const maxTokens = opts.maxTokens == null ? 256 : arg.int(what, 'opts.maxTokens', opts.maxTokens, 0, Number.MAX_SAFE_INTEGER);
  if (opts.signal != null && !(opts.signal instanceof AbortSignal)) {
    throw arg.typeError(what, 'opts.signal', `must be an AbortSignal, got ${shown(opts.signal)}`);
  }
  return { maxTokens, stop: stopStrings(what, opts.stop), signal: opts.signal ?? null };
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
    path.join(__dirname, 'lib', `${process.platform}-${process.arch}`, LIBNAME), // bundled by `npm pack`
    path.resolve(__dirname, '..', '..', 'build', LIBNAME), // a source checkout after `make lib`
  ];
}

/** The error for no library found: in an installed package whose lib/ has
 * other platforms' libraries, which exist and how to build from source. */
function notFound(tried) {
  const here = `${process.platform}-${process.arch}`;
  let plats = [];
  try {
    plats = fs.readdirSync(path.join(__dirname, 'lib')).filter((d) => fs.existsSync(path.join(__dirname, 'lib', d, LIBNAME)));
  } catch { /* a source checkout: no lib/ */ }
  if (plats.length > 0) {
    return new MoonlmError(0, `moonlm: this package has no prebuilt library for ${here}; ` +
      `it carries libraries for ${plats.join(', ')} only. To use moonlm here, build the library from source ` +
      '(Go 1.26 and a C compiler: `git clone` the moonlm repository, run `make lib`) and set ' +
      'MOONLM_LIBRARY to the file it makes (build/libmoonlm.so)');
  }
  return new MoonlmError(0, `moonlm: ${LIBNAME} not found (looked at ${tried.join(', ')}); ` +
    'build it with `make lib` or set MOONLM_LIBRARY');
}

let L = null;

function lib() {
  if (L) return L;
  const tried = candidates();
  const file = tried.find((p) => fs.existsSync(p));
  if (!file) throw notFound(tried);
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
      progress: 'void *', progress_user_data: 'void *', // progress: a registered t.progressCallback
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
      checkpoint_every: 'int32_t', reserved: 'uint32_t', checkpoint_bytes: 'int64_t',
    }),
    samplerParams: koffi.struct({
      size: 'size_t', temperature: 'float', top_k: 'int32_t', top_p: 'float', min_p: 'float',
      repeat_penalty: 'float', presence_penalty: 'float', frequency_penalty: 'float',
      penalty_last_n: 'int32_t', seed: 'uint64_t',
      typical_p: 'float', xtc_probability: 'float', xtc_threshold: 'float',
      mirostat: 'int32_t', mirostat_tau: 'float', mirostat_eta: 'float', mirostat_m: 'int32_t',
      dry_multiplier: 'float', dry_base: 'float', dry_allowed_length: 'int32_t', dry_penalty_last_n: 'int32_t',
      dry_sequence_breakers: koffi.pointer(koffi.pointer('uint8_t')), n_dry_sequence_breakers: 'size_t',
      logit_bias: koffi.pointer(koffi.struct('moonlm_logit_bias', { token: 'int32_t', bias: 'float' })),
      n_logit_bias: 'size_t',
    }),
    // moonlm_piece_callback: the piece is a pointer (its len bytes may hold NUL).
    pieceCallback: koffi.proto('int', ['void *', 'size_t', 'int32_t', 'void *']),
    // moonlm_progress_callback (moonlm_model_params.progress).
    progressCallback: koffi.proto('int', ['float', 'void *']),
    generateResult: koffi.struct({
      size: 'size_t', finish_reason: 'int32_t', last_token: 'int32_t',
      n_prompt: 'size_t', n_generated: 'size_t', n_evaluated: 'size_t',
      n_drafted: 'size_t', n_draft_accepted: 'size_t',
    }),
  };
  t.embedParams = koffi.struct({ size: 'size_t', pooling: 'int32_t', flags: 'uint32_t' });
  t.topLogprob = koffi.struct('moonlm_top_logprob', { token: 'int32_t', logprob: 'float' });
  t.tokenLogprob = koffi.struct('moonlm_token_logprob', {
    token: 'int32_t', logprob: 'float', n_top: 'int32_t', top: koffi.array(t.topLogprob, MAX_TOP_LOGPROBS),
  });
  t.generateParams = koffi.struct({
    size: 'size_t', max_tokens: 'int32_t', flags: 'uint32_t',
    stop: koffi.pointer(koffi.pointer('uint8_t')), stop_len: koffi.pointer('size_t'), n_stop: 'size_t',
    callback: koffi.pointer(t.pieceCallback), user_data: 'void *',
    logprobs: 'void *', logprobs_cap: 'size_t', top_logprobs: 'int32_t', grammar: 'void *',
    draft: 'int32_t', draft_tokens: 'int32_t', draft_session: 'void *',
  });
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
    generate_params_init: f('moonlm_generate_params_init', 'void', [out(t.generateParams), 'size_t']),
    generate_ex: f('moonlm_generate_ex', 'int',
      [t.session, t.sampler, 'int32_t *', 'size_t', P(t.generateParams), koffi.inout(P(t.generateResult))]),
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
    c.chat_apply_template_json = f('moonlm_chat_apply_template_json', 'int',
      [t.model, 'const char *', 'const char *', 'const char *', 'int', 'uint8_t *', 'size_t', sizeOut]);
    c.chat_parse_tool_calls = f('moonlm_chat_parse_tool_calls', 'int',
      [t.model, 'const char *', 'uint8_t *', 'size_t', 'uint8_t *', 'size_t', sizeOut]);
  } catch {
    c.chat_apply_template_json = null;
    c.chat_parse_tool_calls = null;
  }
  try {
    c.grammar_new = f('moonlm_grammar_new', 'int', ['void *', 'uint8_t *', 'size_t', koffi.out(P('void *'))]);
    c.grammar_from_json_schema = f('moonlm_grammar_from_json_schema', 'int',
      ['void *', 'uint8_t *', 'size_t', koffi.out(P('void *'))]);
    c.grammar_free = f('moonlm_grammar_free', 'int', ['void *']);
  } catch {
    c.grammar_new = c.grammar_from_json_schema = c.grammar_free = null;
  }
  try {
    c.grammar_for_tool_calls = f('moonlm_grammar_for_tool_calls', 'int',
      ['void *', 'const char *', 'const char *', 'const char *', koffi.out(P('void *'))]);
  } catch {
    c.grammar_for_tool_calls = null;
  }
  try {
    c.grammar_for_tool_calls_ex = f('moonlm_grammar_for_tool_calls_ex', 'int',
      ['void *', 'const char *', 'const char *', 'const char *', 'uint32_t', koffi.out(P('void *'))]);
  } catch {
    c.grammar_for_tool_calls_ex = null;
  }
  try {
    c.chat_apply_template_named = f('moonlm_chat_apply_template_named', 'int',
      [t.model, 'const char *', P(t.message), 'size_t', 'int', 'uint8_t *', 'size_t', sizeOut]);
    c.chat_builtin_templates = f('moonlm_chat_builtin_templates', 'int', ['uint8_t *', 'size_t', sizeOut]);
  } catch {
    c.chat_apply_template_named = null;
    c.chat_builtin_templates = null;
  }
  try {
    c.embed_params_init = f('moonlm_embed_params_init', 'void', [out(t.embedParams), 'size_t']);
    c.embed_size = f('moonlm_embed_size', 'int', [t.model, 'int32_t', sizeOut]);
    c.embed = f('moonlm_embed', 'int',
      [t.model, P('const char *'), 'size_t *', 'size_t', P(t.embedParams), 'float *', 'size_t', sizeOut]);
    c.embed_tokens = f('moonlm_embed_tokens', 'int',
      [t.model, P('int32_t *'), 'size_t *', 'size_t', P(t.embedParams), 'float *', 'size_t', sizeOut]);
    c.rerank = f('moonlm_rerank', 'int',
      [t.model, 'const char *', P('const char *'), 'size_t', 'float *', 'size_t', sizeOut]);
  } catch {
    c.embed = c.embed_tokens = c.embed_size = c.rerank = c.embed_params_init = null;
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
   * opts.progress: a function called during the open with the fraction
   * done (a number in [0, 1], never decreasing, at most about a hundred
   * calls, ending with 1); returning false cancels the open, which then
   * rejects with a MoonlmError of status CANCELLED (anything else goes on).
   * If it throws, the open is cancelled and rejects with that error.
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
    const progress = opts.progress;
    if (progress != null && typeof progress !== 'function') {
      throw arg.typeError('Model.open', 'opts.progress', `must be a function, got ${shown(progress)}`);
    }
    let cb = null;
    let thrown = null;
    if (progress != null) {
      // The library calls it from the worker thread; koffi runs it here, on
      // the main thread, while the worker waits: it must not throw.
      cb = koffi.register((fraction) => {
        try {
          return progress(fraction) === false ? 1 : 0;
        } catch (e) {
          thrown ??= e;
          return 1;
        }
      }, koffi.pointer(t.progressCallback));
      params.progress = cb;
    }
    const out = [null];
    try {
      const st = await callAsync(c.model_open, file, params, out);
      if (thrown) throw thrown;
      if (st !== Status.OK) {
        params.progress = null; // the repeat below must not report again
        throw asyncError(st, `open ${file}`, () => {
          const again = [null];
          const st2 = c.model_open(file, params, again);
          if (st2 === Status.OK) c.model_free(again[0]); // it changed meanwhile: keep the first answer
          return st2;
        });
      }
    } finally {
      if (cb) koffi.unregister(cb);
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
   * opts.tools: OpenAI-style function specs; messages may then carry
   * tool_calls (assistant) and tool_call_id/name (role 'tool'), any other
   * key is a TypeError. A template with tool syntax renders them itself;
   * one without, and a built-in format, get them the Hermes way.
   */
  applyChatTemplate(messages, opts) {
    const what = 'applyChatTemplate';
    const h = this._handle(what);
    const msgs = arg.messages(what, messages);
    opts = arg.options(what, opts, APPLY_TEMPLATE_OPTS);
    const add = opts.addAssistant == null || arg.bool(what, 'opts.addAssistant', opts.addAssistant) ? 1 : 0;
    const template = opts.template == null ? null : arg.string(what, 'opts.template', opts.template, false);
    const { c } = lib();
    try {
      if (opts.tools != null || usesTools(messages)) {
        return this._applyJson(h, messages, opts.tools ?? null, template, add);
      }
      if (c.chat_apply_template_named) {
        return this._tb.call(c.chat_apply_template_named, what, h, template || null, msgs, msgs.length, add)
          .toString('utf8');
      }
      throw new MoonlmError(Status.UNSUPPORTED, `${what}: ${lib().file} predates built-in templates; rebuild the library`);
    } catch (e) {
      if (template || !(e instanceof MoonlmError) || e.status !== Status.UNSUPPORTED) throw e;
      throw new MoonlmError(Status.UNSUPPORTED, `${e.message}; pass { template: 'NAME' } to use a built-in format`);
    }
  }

  _applyJson(h, messages, tools, template, add) {
    const what = 'applyChatTemplate';
    const { c, file } = lib();
    if (!c.chat_apply_template_json) {
      throw new MoonlmError(Status.UNSUPPORTED, `${what}: ${file} predates tool calling; rebuild the library`);
    }
    if (tools !== null && !Array.isArray(tools)) throw arg.typeError(what, 'opts.tools', `must be an array, got ${shown(tools)}`);
    let mj;
    let tj;
    try {
      mj = JSON.stringify(messages);
      tj = tools === null ? null : JSON.stringify(tools);
    } catch (e) {
      throw arg.typeError(what, 'messages', `must be JSON-serialisable: ${e.message}`);
    }
    if (mj.includes('\u0000') || (tj !== null && tj.includes('\u0000'))) {
      throw arg.rangeError(what, 'messages', 'must not contain NUL characters');
    }
    return this._tb.call(c.chat_apply_template_json, what, h, template || null, mj, tj, add).toString('utf8');
  }

  /**
   * The tool calls in text (a generated reply), read in the format the
   * model's template (or opts.template, a built-in format) writes them:
   * { format, content, tool_calls: [{ id, type: 'function', function:
   * { name, arguments } }] }, arguments a JSON text, plus error when
   * something looked like a call but could not be read.
   */
  /** The format replies are parsed in, null if the model cannot say. */
  _toolFormat(template) {
    try {
      return this.parseToolCalls('', { template }).format;
    } catch {
      return null;
    }
  }

  parseToolCalls(text, opts) {
    const what = 'parseToolCalls';
    const h = this._handle(what);
    arg.string(what, 'text', text);
    opts = arg.options(what, opts, PARSE_TOOLS_OPTS);
    const template = opts.template == null ? null : arg.string(what, 'opts.template', opts.template, false);
    const { c, file } = lib();
    if (!c.chat_parse_tool_calls) {
      throw new MoonlmError(Status.UNSUPPORTED, `${what}: ${file} predates tool calling; rebuild the library`);
    }
    const data = Buffer.from(text, 'utf8');
    return JSON.parse(this._tb.call(c.chat_parse_tool_calls, what, h, template || null, data, data.length).toString('utf8'));
  }

  // opts of embed: { pooling, normalize } checked; the moonlm_embed_params.
  _embedParams(what, opts) {
    const { c, t, file } = lib();
    if (!c.embed) {
      throw new MoonlmError(Status.UNSUPPORTED, `${what}: ${file} predates embeddings; rebuild the library`);
    }
    opts = arg.options(what, opts, EMBED_OPTS);
    const name = opts.pooling == null ? 'model' : arg.string(what, 'opts.pooling', opts.pooling);
    if (!(name in POOLINGS)) {
      throw arg.rangeError(what, 'opts.pooling', `must be one of ${Object.keys(POOLINGS).join(', ')}, got ${shown(name)}`);
    }
    const normalize = opts.normalize == null ? false : arg.bool(what, 'opts.normalize', opts.normalize);
    const p = {};
    c.embed_params_init(p, koffi.sizeof(t.embedParams));
    p.size = koffi.sizeof(t.embedParams);
    p.pooling = POOLINGS[name];
    p.flags = normalize ? 1 : 0;
    return { p, name };
  }

  /** The length of one embedding vector with pooling (default the model's). */
  embeddingLength(pooling) {
    const what = 'embeddingLength';
    const h = this._handle(what);
    const { p } = this._embedParams(what, pooling == null ? null : { pooling });
    const n = [0];
    check(lib().c.embed_size(h, p.pooling, n), what);
    return Number(n[0]);
  }

  // Runs an embed call for its size, then its floats; splits them into
  // rows of dim.
  _embedCall(what, call, dim) {
    const n = [0];
    const st = call(null, 0, n);
    if (st !== Status.BUFFER_TOO_SMALL) check(st, what);
    const out = new Float32Array(Math.max(Number(n[0]), 1));
    check(call(out, Number(n[0]), n), what);
    const rows = [];
    for (let i = 0; i < Number(n[0]); i += dim) rows.push(out.slice(i, i + dim));
    return rows;
  }

  /**
   * Embedding vectors of texts (an array of strings, or one string): each
   * tokenized with the model's special tokens ([CLS] text [SEP] for BERT)
   * and computed as its own sequence. opts: pooling (the model file's by
   * default, else 'mean'; 'mean', 'cls', 'last', 'none', 'rank'), normalize
   * (unit vectors). Returns one Float32Array per text (for one string, one
   * Float32Array); with pooling 'none', one array of per-token
   * Float32Arrays per text.
   */
  embed(texts, opts) {
    const what = 'embed';
    const h = this._handle(what);
    const single = typeof texts === 'string';
    const items = single ? [texts] : texts;
    if (!Array.isArray(items)) throw arg.typeError(what, 'texts', `must be a string or an array of strings, got ${shown(texts)}`);
    items.forEach((s, i) => arg.string(what, `texts[${i}]`, s, false));
    const { p, name } = this._embedParams(what, opts);
    if (name === 'none') {
      const res = this.embedTokens(items.map((s) => this.tokenize(s)), opts);
      return single ? res[0] : res;
    }
    const dim = this.embeddingLength(name);
    const { c } = lib();
    const rows = this._embedCall(what, (out, cap, n) => c.embed(h, items, null, items.length, p, out, cap, n), dim);
    return single ? rows[0] : rows;
  }

  /** embed() of token lists (each an Int32Array or an array of ids, not empty). */
  embedTokens(tokenLists, opts) {
    const what = 'embedTokens';
    const h = this._handle(what);
    if (!Array.isArray(tokenLists)) throw arg.typeError(what, 'tokenLists', `must be an array of token lists, got ${shown(tokenLists)}`);
    const lists = tokenLists.map((tk, i) => arg.tokens(what, `tokenLists[${i}]`, tk));
    const { p, name } = this._embedParams(what, opts);
    const dim = this.embeddingLength(name);
    const lens = new BigUint64Array(lists.map((l) => BigInt(l.length)));
    const { c } = lib();
    const rows = this._embedCall(what, (out, cap, n) => c.embed_tokens(h, lists, lists.length ? lens : null, lists.length, p, out, cap, n), dim);
    if (name !== 'none') return rows;
    const res = [];
    let r = 0;
    for (const l of lists) { res.push(rows.slice(r, r + l.length)); r += l.length; }
    return res;
  }

  /**
   * Relevance scores of documents (an array of strings) for query with a
   * reranker: a BERT cross-encoder with a classifier head (its first
   * output, a logit) or a Qwen3-Reranker file (the probability of "yes").
   * Higher is more relevant.
   */
  rerank(query, documents) {
    const what = 'rerank';
    const h = this._handle(what);
    this._embedParams(what, null);
    arg.string(what, 'query', query, false);
    if (!Array.isArray(documents)) throw arg.typeError(what, 'documents', `must be an array of strings, got ${shown(documents)}`);
    documents.forEach((s, i) => arg.string(what, `documents[${i}]`, s, false));
    const { c } = lib();
    return this._embedCall(what, (out, cap, n) => c.rerank(h, query, documents, documents.length, out, cap, n), 1).map((r) => r[0]);
  }

  _chatTokens(messages, template, tools) {
    const text = this.applyChatTemplate(messages, { addAssistant: true, template, tools });
    let toks = this.tokenize(text, { addSpecial: true, parseSpecial: true });
    const bos = this.bosTokenId;
    if (bos !== null && toks.length >= 2 && toks[0] === bos && toks[1] === bos) toks = toks.subarray(1);
    return toks;
  }

  /**
   * A new session. opts: nCtx (default contextLength), threads, kvType ('f16' default, or 'f32'),
   * checkpointEvery and checkpointBytes (a hybrid model's checkpoints; see Session.checkpoints).
   */
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
   * Breaking out of the loop early cancels the generation and frees
   * everything. Once the stream is exhausted its `completion` property (and
   * the generator's return value) is the Completion; null before. See
   * generate() for opts (not details).
   */
  stream(prompt, opts) {
    opts = arg.options('generate', opts, GENERATE_OPTS);
    noDetails('generate', opts);
    return this._stream(this._promptTokens(prompt, opts), opts, 'generate');
  }

  /**
   * The continuation of prompt as one string. opts: maxTokens (256; 0 only
   * evaluates the prompt), temperature, topK, topP, minP, repeatPenalty,
   * presencePenalty, frequencyPenalty, penaltyLastN, seed (library defaults
   * when omitted; temperature 0 is greedy), stop (strings, not included in
   * the text), signal (an AbortSignal: rejects with MoonlmError CANCELLED),
   * nCtx, details (resolve to a Completion: text, finishReason, tokens,
   * promptTokens, completionTokens).
   */
  async generate(prompt, opts) {
    opts = arg.options('generate', opts, GENERATE_OPTS);
    const details = detailsOption('generate', opts);
    return finish(this._stream(this._promptTokens(prompt, opts), opts, 'generate'), details);
  }

  /**
   * Streams the assistant's reply to OpenAI-style messages, written with the
   * model's chat template or opts.template (see applyChatTemplate); other
   * opts as for stream().
   */
  chatStream(messages, opts) {
    opts = arg.options('chat', opts, CHAT_OPTS);
    noDetails('chat', opts);
    return this._chat(messages, opts);
  }

  /**
   * The assistant's reply to OpenAI-style messages, as one string or a
   * Completion (opts as for generate). opts.tools: OpenAI-style function
   * specs (see applyChatTemplate); the Completion then has toolCalls (the
   * calls the reply makes, [{ id, type: 'function', function: { name,
   * arguments } }], arguments a JSON text), content (the reply without
   * them) and toolCallError. Nothing forces the model to call a tool.
   */
  async chat(messages, opts) {
    opts = arg.options('chat', opts, CHAT_OPTS);
    const details = detailsOption('chat', opts);
    return finish(this._chat(messages, opts), details);
  }

  _chat(messages, opts) {
    const { mode, name } = toolChoiceOf(opts.toolChoice);
    if (opts.keepSpecial == null && this._toolFormat(opts.template) === 'harmony') {
      // gpt-oss: the channels are control tokens; keep them to split the
      // reasoning (analysis) from the answer (final).
      opts = { ...opts, keepSpecial: true };
    }
    // The reply's reasoning, and the rest parsed.
    const reasoning = (done) => {
      const p = this.parseToolCalls(done.text, { template: opts.template });
      done.reasoning = p.reasoning ?? null;
      if (done.reasoning !== null) done.content = p.content;
      return p;
    };
    const parallel = opts.parallelToolCalls == null ? null : arg.bool('chat', 'opts.parallelToolCalls', opts.parallelToolCalls);
    if (opts.tools == null && mode !== 'auto') throw arg.rangeError('chat', 'opts.toolChoice', 'needs opts.tools');
    const tools = mode === 'none' ? null : opts.tools;
    const tokens = this._chatTokens(messages, opts.template, tools);
    if (mode === 'none') {
      return this._stream(tokens, opts, 'chat', (done) => {
        const p = reasoning(done);
        done.toolCalls = [];
        done.content = done.reasoning !== null ? p.content : done.text;
      });
    }
    if (tools == null) return this._stream(tokens, opts, 'chat', reasoning);
    if (mode === 'required') {
      if (OUTPUT_OPTS.slice(0, 3).some((k) => opts[k] != null)) {
        throw arg.rangeError('chat', 'opts.toolChoice', 'cannot be combined with grammar, jsonSchema or responseFormat');
      }
      opts = { ...opts, grammar: Grammar.forToolCalls(this, tools, { toolName: name, template: opts.template, parallel: parallel === true }) };
      opts._ownGrammar = true;
    }
    const onDone = (done) => {
      const p = reasoning(done);
      done.toolCalls = parallel === false ? p.tool_calls.slice(0, 1) : p.tool_calls;
      done.content = p.content;
      done.toolCallError = p.error ?? null;
    };
    return this._stream(tokens, opts, 'chat', onDone);
  }

  // opts: checked against the caller's option names already. onDone
  // completes the Completion before the stream ends.
  _stream(tokens, opts, what, onDone = null) {
    const { maxTokens, stop, signal } = loopArgs(what, opts); // all checked before any allocation
    if (tokens.length === 0) throw arg.rangeError(what, 'prompt', 'has no tokens');
    const nCtx = opts.nCtx != null ? arg.int(what, 'opts.nCtx', opts.nCtx, 1, INT32_MAX)
      : Math.min(tokens.length + Math.max(Math.min(maxTokens, INT32_MAX), 1), this.contextLength);
    const lp = logprobsOption(what, opts);
    const draft = draftOption(what, opts, Model);
    const sampler = new Sampler(samplerOptions(opts), what);
    let session;
    let grammar = null;
    let ownGrammar = false;
    try {
      [grammar, ownGrammar] = resolveGrammar(what, this, opts);
      if (opts._ownGrammar) ownGrammar = true;
      session = new Session(this, { nCtx });
      // A draft Model drafts in a session of its own, made for this call.
      if (draft.mode === DRAFT_MODEL) draft.session = new Session(opts.draft, { nCtx });
    } catch (e) {
      sampler.close();
      if (ownGrammar) grammar.close();
      if (session) session.close();
      throw e;
    }
    draft.own = draft.mode === DRAFT_MODEL;
    const keepSpecial = opts.keepSpecial == null ? false : arg.bool(what, 'opts.keepSpecial', opts.keepSpecial);
    const extra = { grammar, ownGrammar, topLogprobs: lp, pieceOf: (tok) => this.tokenToPiece(tok), draft, keepSpecial };
    // One log-probability entry per token: no more than the context can
    // hold (it ends the generation first), so the buffer is bounded.
    const max = lp === null ? maxTokens : Math.min(maxTokens, nCtx + 1);
    return generation(what, session, Int32Array.from(tokens), max, sampler, stop, signal, true, true, onDone, extra);
  }
}
Model._token = Symbol('Model');

function abortedError(signal, cause) {
  return new MoonlmError(Status.CANCELLED, 'generate: aborted', { cause: signal.reason ?? cause });
}

/** opts.details, checked (false when omitted). */
function detailsOption(what, opts) {
  return opts.details == null ? false : arg.bool(what, 'opts.details', opts.details);
}

/** Streams have no details option: their completion property holds it. */
function noDetails(what, opts) {
  if (opts.details != null) {
    throw arg.typeError(what, 'opts.details', 'is not an option of a stream (its completion property holds the details)');
  }
}

/** Runs a stream to its end: its text, or its Completion. */
async function finish(stream, details) {
  for await (const piece of stream) void piece; // eslint-disable-line no-unused-vars
  return details ? stream.completion : stream.completion.text;
}

// moonlm_finish_reason, by value.
const FINISH_REASONS = ['none', 'stop', 'length', 'eog', 'context', 'cancelled'];

/**
 * A generation as an async generator of text pieces: one moonlm_generate_ex
 * call on a koffi worker thread, whose callback (run on the main thread by
 * koffi) queues the pieces the library releases; the library does the
 * sampling, stop strings and UTF-8 holdback. The generator object gets a
 * `completion` property, set when it is exhausted.
 */
function generation(what, session, tokens, maxTokens, sampler, stop, signal, ownSession, ownSampler, onDone = null, extra = null) {
  const box = { completion: null, onDone, extra };
  const gen = runGeneration(what, session, tokens, maxTokens, sampler, stop, signal, ownSession, ownSampler, box);
  Object.defineProperty(gen, 'completion', { get: () => box.completion, enumerable: true });
  return gen;
}

async function* runGeneration(what, session, tokens, maxTokens, sampler, stop, signal, ownSession, ownSampler, box) {
  const { c, t } = lib();
  const call = {
    pieces: [], // text released by the library, not yet yielded
    tokens: [], // generated token ids
    text: [],
    started: false, // a callback came: the prompt is evaluated
    stopping: false, // the consumer is gone or aborted: the callback asks to stop
    cancelSent: false,
    done: false,
    wake: null,
  };
  const notify = () => { const w = call.wake; call.wake = null; if (w) w(); };
  let h = null;
  let cb = null;
  let running = null;
  // Ends the call early: the next callback returns nonzero; a prompt still
  // being evaluated (no callback yet) is cancelled in the library.
  const requestStop = () => {
    call.stopping = true;
    if (running && !call.started && !call.done && session._h !== null) {
      call.cancelSent = true;
      c.session_cancel(h);
    }
    notify();
  };
  const onAbort = () => requestStop();
  let result = null;
  let status = Status.OK;
  let lpBuf = null;
  let lpCap = 0;
  try {
    if (signal) {
      if (signal.aborted) throw abortedError(signal);
      signal.addEventListener('abort', onAbort, { once: true });
    }
    h = session._handle(what);
    const sh = sampler._handle(what);
    const params = {};
    c.generate_params_init(params, koffi.sizeof(t.generateParams));
    params.size = koffi.sizeof(t.generateParams);
    params.max_tokens = maxTokens > INT32_MAX ? -1 : maxTokens;
    if (box.extra && box.extra.keepSpecial) params.flags = GENERATE_KEEP_SPECIAL;
    if (stop.length) {
      params.stop = stop;
      params.stop_len = stop.map((b) => b.length);
      params.n_stop = stop.length;
    }
    const extra = box.extra;
    if (extra && extra.grammar) params.grammar = extra.grammar._handle(what);
    if (extra && extra.draft && extra.draft.mode !== DRAFT_NONE) {
      params.draft = extra.draft.mode;
      params.draft_tokens = extra.draft.tokens;
      if (extra.draft.session) params.draft_session = extra.draft.session._handle(what);
    }
    if (extra && extra.topLogprobs != null) {
      lpCap = Math.max(maxTokens, 1);
      lpBuf = koffi.alloc(t.tokenLogprob, lpCap);
      params.logprobs = lpBuf;
      params.logprobs_cap = lpCap;
      params.top_logprobs = extra.topLogprobs;
    }
    // Runs on the main thread while the worker waits for it: must not throw.
    cb = koffi.register((ptr, n, tok) => {
      try {
        call.started = true;
        if (tok >= 0) call.tokens.push(tok);
        if (call.stopping) return 1;
        const len = Number(n);
        if (len > 0) {
          call.pieces.push(Buffer.from(koffi.view(ptr, len)).toString('utf8'));
          notify();
        }
        return 0;
      } catch {
        return 1;
      }
    }, koffi.pointer(t.pieceCallback));
    params.callback = cb;
    result = { size: koffi.sizeof(t.generateResult) };
    session._busy = true;
    running = callAsync(c.generate_ex, h, sh, tokens, tokens.length, params, result).then(
      (st) => { status = st; },
      (e) => { status = -1; call.failure = e; },
    ).finally(() => {
      session._busy = false;
      call.done = true;
      notify();
    });
    for (;;) {
      if (signal && signal.aborted) throw abortedError(signal);
      if (call.pieces.length) {
        const piece = call.pieces.shift();
        call.text.push(piece);
        yield piece;
        continue;
      }
      if (call.done) break;
      await new Promise((resolve) => { call.wake = resolve; });
    }
    if (call.failure) throw call.failure;
    const done = completionOf(call, result);
    if (lpBuf) {
      const n = Math.min(Number(result.n_generated), lpCap);
      done.logprobs = openaiLogprobs(koffi.decode(lpBuf, koffi.array(t.tokenLogprob, n)), box.extra.pieceOf);
    }
    if (status !== Status.OK) {
      const e = session._asyncError(status, what, () => -1);
      // session.cancel(): what was generated until then comes with the error.
      if (status === Status.CANCELLED) e.completion = done;
      throw e;
    }
    if (box.onDone) box.onDone(done);
    box.completion = done;
    return done;
  } catch (e) {
    if (running && !call.done) {
      requestStop();
      await running;
    }
    if (e instanceof MoonlmError && e.status === Status.CANCELLED && signal && signal.aborted && result) {
      e.completion ??= completionOf(call, result);
    }
    throw e;
  } finally {
    if (signal) signal.removeEventListener('abort', onAbort);
    if (running) {
      if (!call.done) requestStop(); // return() from a for-await loop left early
      await running;
      if (!ownSession && call.cancelSent && status !== Status.CANCELLED) drainCancel(session, tokens);
    }
    if (cb) koffi.unregister(cb);
    if (lpBuf) koffi.free(lpBuf);
    if (ownSession) session.close();
    if (ownSampler) sampler.close();
    if (box.extra && box.extra.ownGrammar) box.extra.grammar.close();
    if (box.extra && box.extra.draft && box.extra.draft.own) box.extra.draft.session.close();
  }
}

/** opts.draft / opts.draftTokens, checked: { mode, tokens, session } (session: a Session given, else null). */
function draftOption(what, opts, kind) {
  if (opts.draft == null) {
    if (opts.draftTokens != null) throw arg.rangeError(what, 'opts.draftTokens', 'needs opts.draft');
    return { mode: DRAFT_NONE, tokens: 0, session: null };
  }
  const tokens = opts.draftTokens == null ? 0 : arg.int(what, 'opts.draftTokens', opts.draftTokens, 1, MAX_DRAFT_TOKENS);
  if (opts.draft === 'lookup') return { mode: DRAFT_LOOKUP, tokens, session: null };
  if (typeof opts.draft === 'string') throw arg.rangeError(what, 'opts.draft', `must be 'lookup' or a ${kind.name}, got ${shown(opts.draft)}`);
  if (!(opts.draft instanceof kind)) throw arg.typeError(what, 'opts.draft', `must be 'lookup' or a ${kind.name}, got ${shown(opts.draft)}`);
  return { mode: DRAFT_MODEL, tokens, session: kind === Session ? opts.draft : null };
}

/** moonlm_token_logprob entries in OpenAI's shape ({ content: [...] }). */
function openaiLogprobs(entries, pieceOf) {
  const one = (tok, logprob) => {
    const b = pieceOf(tok);
    return { token: b.toString('utf8'), id: tok, bytes: [...b], logprob };
  };
  return {
    content: entries.map((e) => ({
      ...one(e.token, e.logprob),
      topLogprobs: e.top.slice(0, Math.max(0, Math.min(e.n_top, MAX_TOP_LOGPROBS))).map((x) => one(x.token, x.logprob)),
    })),
  };
}

/** opts.logprobs / opts.topLogprobs, checked: the top count, or null without logprobs. */
function logprobsOption(what, opts) {
  const on = opts.logprobs == null ? false : arg.bool(what, 'opts.logprobs', opts.logprobs);
  if (!on) {
    if (opts.topLogprobs != null) throw arg.rangeError(what, 'opts.topLogprobs', 'needs opts.logprobs: true');
    return null;
  }
  const top = opts.topLogprobs == null ? 0 : arg.int(what, 'opts.topLogprobs', opts.topLogprobs, 0, MAX_TOP_LOGPROBS);
  if (!lib().c.grammar_new) throw new MoonlmError(Status.UNSUPPORTED, `${what}: this library has no log-probabilities`);
  return top;
}

/** The grammar opts.grammar, opts.jsonSchema or opts.responseFormat ask for (at most one), and whether it is made here. */
function resolveGrammar(what, model, opts) {
  const given = ['grammar', 'jsonSchema', 'responseFormat'].filter((k) => opts[k] != null);
  if (given.length > 1) throw arg.rangeError(what, `opts.${given[1]}`, `cannot be combined with opts.${given[0]}`);
  if (opts.grammar != null) {
    if (opts.grammar instanceof Grammar) {
      if (opts.grammar.model !== model) throw arg.rangeError(what, 'opts.grammar', 'was compiled for another model');
      return [opts.grammar, false];
    }
    if (typeof opts.grammar !== 'string') {
      throw arg.typeError(what, 'opts.grammar', `must be GBNF text or a Grammar, got ${shown(opts.grammar)}`);
    }
    return [new Grammar(model, opts.grammar), true];
  }
  if (opts.jsonSchema != null) return [Grammar.fromJsonSchema(model, opts.jsonSchema), true];
  const rf = opts.responseFormat;
  if (rf != null) {
    if (typeof rf !== 'object' || Array.isArray(rf)) {
      throw arg.typeError(what, 'opts.responseFormat', `must be an object, got ${shown(rf)}`);
    }
    if (rf.type === 'text') return [null, false];
    if (rf.type === 'json_object') return [Grammar.fromJsonSchema(model, rf.schema ?? { type: 'object' }), true];
    if (rf.type === 'json_schema') {
      const schema = rf.json_schema?.schema ?? rf.jsonSchema?.schema ?? rf.schema;
      if (schema == null) {
        throw arg.rangeError(what, 'opts.responseFormat', "of type 'json_schema' needs { json_schema: { schema } }");
      }
      return [Grammar.fromJsonSchema(model, schema), true];
    }
    throw arg.rangeError(what, 'opts.responseFormat', `type must be 'text', 'json_object' or 'json_schema', got ${shown(rf.type)}`);
  }
  return [null, false];
}

/** opts.toolChoice as { mode: 'auto' | 'none' | 'required', name }. */
function toolChoiceOf(tc) {
  if (tc == null) return { mode: 'auto', name: null };
  if (typeof tc === 'string') {
    if (!['auto', 'none', 'required'].includes(tc)) {
      throw arg.rangeError('chat', 'opts.toolChoice', `must be 'auto', 'none', 'required' or a named tool, got ${shown(tc)}`);
    }
    return { mode: tc, name: null };
  }
  if (typeof tc === 'object' && !Array.isArray(tc)) {
    const name = tc.function?.name;
    if ((tc.type ?? 'function') !== 'function' || typeof name !== 'string' || name === '') {
      throw arg.rangeError('chat', 'opts.toolChoice', "must be { type: 'function', function: { name } }");
    }
    return { mode: 'required', name };
  }
  throw arg.typeError('chat', 'opts.toolChoice', `must be a string or an object, got ${shown(tc)}`);
}

/** A JSON schema (an object or JSON text) as JSON text. */
function schemaText(what, schema) {
  if (typeof schema === 'string') return schema;
  if (typeof schema === 'object' || typeof schema === 'boolean') return JSON.stringify(schema);
  throw arg.typeError(what, 'jsonSchema', `must be an object or a string, got ${shown(schema)}`);
}

/**
 * A grammar compiled for one model's vocabulary, reusable across that
 * model's generations (one at a time): new Grammar(model, gbnf) parses GBNF
 * (a parse error throws MoonlmError INVALID_ARGUMENT naming line:col);
 * Grammar.fromJsonSchema(model, schema) admits the JSON values valid
 * against schema; Grammar.forToolCalls(model, tools, { toolName, template,
 * parallel }) admits one call (parallel: one or more) of a tool in the
 * template's call syntax (hermes, llama3, mistral, phi4, harmony, qwen3coder, gemma4).
 */
class Grammar {
  constructor(model, gbnf, _kind = 'grammar', _tools = null) {
    const what = _kind;
    if (!(model instanceof Model)) throw arg.typeError(what, 'model', `must be a Model, got ${shown(model)}`);
    const { c } = lib();
    const out = [null];
    if (_tools) {
      if (!c.grammar_for_tool_calls) throw new MoonlmError(Status.UNSUPPORTED, `${what}: this library has no tool-call grammars`);
      if (_tools.parallel) {
        if (!c.grammar_for_tool_calls_ex) throw new MoonlmError(Status.UNSUPPORTED, `${what}: this library has no parallel tool-call grammars`);
        check(c.grammar_for_tool_calls_ex(model._handle(what), _tools.template, _tools.json, _tools.name, TOOL_CALLS_PARALLEL, out), what);
      } else {
        check(c.grammar_for_tool_calls(model._handle(what), _tools.template, _tools.json, _tools.name, out), what);
      }
    } else {
      const fn = _kind === 'jsonSchema' ? c.grammar_from_json_schema : c.grammar_new;
      if (!fn) throw new MoonlmError(Status.UNSUPPORTED, `${what}: this library has no grammars`);
      const data = Buffer.from(arg.string(what, what, gbnf), 'utf8');
      if (data.length > MAX_GRAMMAR_BYTES) throw arg.rangeError(what, what, `has ${data.length} bytes; at most ${MAX_GRAMMAR_BYTES}`);
      check(fn(model._handle(what), data, data.length, out), what);
    }
    this._h = out[0];
    this.model = model;
    this._unreg = {};
    registry.register(this, { free: c.grammar_free, handle: this._h }, this._unreg);
  }

  static fromJsonSchema(model, schema) {
    return new Grammar(model, schemaText('jsonSchema', schema), 'jsonSchema');
  }

  static forToolCalls(model, tools, opts) {
    const what = 'toolChoice';
    opts = arg.options(what, opts, new Set(['toolName', 'template', 'parallel']));
    if (!Array.isArray(tools)) throw arg.typeError(what, 'tools', `must be an array, got ${shown(tools)}`);
    const json = JSON.stringify(tools);
    if (json.includes('\u0000')) throw arg.rangeError(what, 'tools', 'must not contain NUL characters');
    const name = opts.toolName == null ? null : arg.string(what, 'opts.toolName', opts.toolName, false);
    const template = opts.template == null ? null : arg.string(what, 'opts.template', opts.template, false);
    const parallel = opts.parallel == null ? false : arg.bool(what, 'opts.parallel', opts.parallel);
    return new Grammar(model, '', what, { json, name, template, parallel });
  }

  close() {
    if (this._h === null) return;
    registry.unregister(this._unreg);
    lib().c.grammar_free(this._h);
    this._h = null;
  }

  get closed() { return this._h === null; }

  _handle(what) {
    if (this._h === null) throw invalid(`${what}: the grammar is closed`);
    return this._h;
  }
}

/** The Completion of a finished call. */
function completionOf(call, r) {
  return {
    text: call.text.join(''),
    finishReason: FINISH_REASONS[r.finish_reason] ?? `unknown ${r.finish_reason}`,
    tokens: Int32Array.from(call.tokens),
    promptTokens: Number(r.n_prompt),
    completionTokens: Number(r.n_generated),
    // chat: the reply's reasoning (analysis channel, <think> block), else null.
    reasoning: null,
    // Speculative decoding: the guesses, and how many were kept.
    drafted: Number(r.n_drafted ?? 0),
    draftAccepted: Number(r.n_draft_accepted ?? 0),
    // chat with opts.tools: the calls the reply makes, and the rest of it.
    toolCalls: null,
    content: null,
    toolCallError: null,
  };
}

/**
 * A cancel request sent while the call was already ending (so not consumed
 * by it) would cancel the session's next call: consume it with a one-token
 * evaluation that it stops, or undo one it did not.
 */
function drainCancel(session, tokens) {
  const { c } = lib();
  if (session._h === null) return;
  const pos = [0];
  if (c.session_position(session._h, pos) !== Status.OK) return;
  const one = tokens.subarray(tokens.length - 1);
  if (c.prefill(session._h, one, 1, null, 0) === Status.OK) c.session_rewind(session._h, Number(pos[0]));
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
    // A hybrid model's checkpoints: 0 (or unset) the default, negative none.
    if (opts.checkpointEvery != null) {
      params.checkpoint_every = arg.int('session', 'opts.checkpointEvery', opts.checkpointEvery, -INT32_MAX - 1, INT32_MAX);
    }
    if (opts.checkpointBytes != null) {
      params.checkpoint_bytes = arg.int('session', 'opts.checkpointBytes', opts.checkpointBytes,
        Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
    }
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
   * session stays open; the last generated token is not evaluated: pass
   * completion.tokens at its end first to continue). The session is busy
   * until the stream is exhausted or left. opts as for Model.stream
   * (grammar, jsonSchema, responseFormat, logprobs, topLogprobs too);
   * opts.sampler uses (and keeps open) a Sampler; opts.draft is 'lookup'
   * or a Session of a draft model (same vocabulary; busy during the call,
   * and worth reusing: it keeps what it evaluated).
   */
  stream(tokens, opts) {
    opts = arg.options('stream', opts, SESSION_STREAM_OPTS);
    const toks = arg.tokens('stream', 'tokens', tokens, true);
    const { maxTokens, stop, signal } = loopArgs('stream', opts);
    if (toks.length === 0) throw arg.rangeError('stream', 'tokens', 'has no tokens');
    const lp = logprobsOption('stream', opts);
    const draft = draftOption('stream', opts, Session);
    if (draft.session === this) throw arg.rangeError('stream', 'opts.draft', 'is this session; the draft model needs a session of its own');
    const own = opts.sampler == null;
    if (!own) {
      if (!(opts.sampler instanceof Sampler)) {
        throw arg.typeError('stream', 'opts.sampler', `must be a Sampler, got ${shown(opts.sampler)}`);
      }
      const extra = Object.keys(samplerOptions(opts));
      if (extra.length) throw arg.typeError('stream', `opts.${extra[0]}`, 'cannot be combined with opts.sampler');
    }
    const [grammar, ownGrammar] = resolveGrammar('stream', this.model, opts);
    let sampler;
    try {
      sampler = own ? new Sampler(samplerOptions(opts), 'stream') : opts.sampler;
    } catch (e) {
      if (ownGrammar) grammar.close();
      throw e;
    }
    const extra = { grammar, ownGrammar, topLogprobs: lp, pieceOf: (tok) => this.model.tokenToPiece(tok), draft };
    // One log-probability entry per token: no more than the context can hold.
    const max = lp === null ? maxTokens : Math.min(maxTokens, this.nCtx + 1);
    return generation('stream', this, toks, max, sampler, stop, signal, false, own, null, extra);
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
    for (const [js, [cname, kind, lo = INT32_MIN, hi = INT32_MAX]] of Object.entries(SAMPLER_FIELDS)) {
      const v = opts[js];
      if (v == null) continue;
      p[cname] = kind === 'int' ? arg.int(what, `opts.${js}`, v, lo, hi) : arg.float(what, `opts.${js}`, v);
    }
    if (opts.drySequenceBreakers != null) {
      const br = opts.drySequenceBreakers;
      if (!Array.isArray(br)) throw arg.typeError(what, 'opts.drySequenceBreakers', `must be an array of strings, got ${shown(br)}`);
      br.forEach((s, i) => arg.string(what, `opts.drySequenceBreakers[${i}]`, s, false));
      if (br.length > MAX_DRY_BREAKERS) {
        throw arg.rangeError(what, 'opts.drySequenceBreakers', `has ${br.length} strings; at most ${MAX_DRY_BREAKERS}`);
      }
      // NUL-terminated; a non-NULL pointer with no entries means none.
      p.dry_sequence_breakers = br.length ? br.map((s) => Buffer.from(s + '\0', 'utf8')) : [null];
      p.n_dry_sequence_breakers = br.length;
    }
    if (opts.logitBias != null) {
      const lb = opts.logitBias;
      const entries = lb instanceof Map ? [...lb.entries()] : (typeof lb === 'object' && !Array.isArray(lb) ? Object.entries(lb) : null);
      if (entries === null) throw arg.typeError(what, 'opts.logitBias', `must be an object or a Map { token: bias }, got ${shown(lb)}`);
      if (entries.length > MAX_LOGIT_BIAS) throw arg.rangeError(what, 'opts.logitBias', `has ${entries.length} entries; at most ${MAX_LOGIT_BIAS}`);
      const pairs = entries.map(([k, b]) => {
        const tok = typeof k === 'string' && /^-?[0-9]+$/.test(k) ? Number(k) : k;
        return { token: arg.token(what, `opts.logitBias key ${shown(k)}`, tok), bias: arg.float(what, `opts.logitBias[${shown(k)}]`, b) };
      });
      if (pairs.length) {
        p.logit_bias = pairs;
        p.n_logit_bias = pairs.length;
      }
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

// Model.fromPretrained and pull: the Hugging Face Hub download (hub.js).
const hub = require('./hub');

/**
 * Downloads a GGUF file of a Hugging Face Hub repository into the Hub cache
 * (unless it is there) and opens it. pattern and opts.revision, cacheDir,
 * token, endpoint, offline, progress: as hub.pull; the other opts go to
 * Model.open.
 */
Model.fromPretrained = async function fromPretrained(repo, pattern, opts = {}) {
  const { revision, cacheDir, token, endpoint, offline, progress, ...openOpts } = opts ?? {};
  const file = await hub.pull(repo, pattern, { revision, cacheDir, token, endpoint, offline, progress });
  return Model.open(file, openOpts);
};

module.exports = {
  pull: hub.pull,
  HubError: hub.HubError,
  Model,
  Session,
  Sampler,
  Grammar,
  MoonlmError,
  Status,
  libraryPath,
  libraryVersion,
  builtinChatTemplates,
};
// Session state (prefixReuse, stats, tokens, fork, saveState, loadState) and
// Conversation: state.js, given the internals it builds on.
module.exports.Conversation = require('./state.js').install({
  koffi, lib, check, invalid, arg, shown, Status, MoonlmError, Model, Session, Sampler, registry, callAsync,
  loopArgs, samplerOptions, SAMPLER_OPT_NAMES, LOOP_OPTS, abortedError, generation,
}).Conversation;
// Session.checkpoints(): checkpoint.js.
require('./checkpoint.js').install({ koffi, lib, check, Status, MoonlmError, Session });
// Batched decoding (decodeBatch, maxBatchTokens, Batcher): batch.js.
Object.assign(module.exports, require('./batch.js').install({
  koffi, lib, check, invalid, arg, shown, Status, MoonlmError, Model, Session, callAsync,
}));
module.exports.default = module.exports; // for `import moonlm from 'moonlm'` compiled to CommonJS
