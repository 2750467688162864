'use strict';
// Shared test setup: the library and the shared test data.
//
// The test data is $MOONLM_TESTDATA or ../shared/testdata beside the
// repository; tests that need it are skipped with a reason when it is absent.
// The library is found as the package finds it; when MOONLM_LIBRARY is set
// (as `make test-node` does) a library that fails to load fails the tests.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

// Models opened with default options must not fill the user's packed-weight
// cache: point it at a temporary folder before the library is loaded (it
// reads its environment when it loads).
if (!process.env.MOONLM_PACKED_CACHE_DIR) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'moonlm-node-cache-'));
  process.env.MOONLM_PACKED_CACHE_DIR = dir;
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }));
}

const moonlm = require('..');

const REPO = path.resolve(__dirname, '..', '..', '..');

function testdataRoot() {
  const env = process.env.MOONLM_TESTDATA;
  if (env) return fs.existsSync(env) ? env : null;
  const d = path.join(REPO, '..', 'shared', 'testdata');
  return fs.existsSync(d) ? d : null;
}

/** Why tests that need the library and file rel must skip, or false. */
function skipReason(rel) {
  try {
    moonlm.libraryPath();
  } catch (e) {
    if (process.env.MOONLM_LIBRARY) throw e; // asked for explicitly: fail
    return `libmoonlm.so not available (run \`make lib\`): ${e.message}`;
  }
  const root = testdataRoot();
  if (!root) return 'shared test data not found: set MOONLM_TESTDATA or place it at ../shared/testdata';
  if (rel && !fs.existsSync(path.join(root, rel))) return `test data file ${rel} absent`;
  return false;
}

/**
 * The path of a default model, by the name scripts/fetch-model.sh gives it
 * (SmolLM2-135M-Instruct.Q4_1.gguf, gemma-3-270m-q4_k_m.gguf), searched as the
 * Go tests search (internal/shareddata): $MOONLM_MODELS (the Makefile sets
 * build/models), build/models of the repository, then ~/.cache/moonlm/models
 * (only read). Returns { path } or { skip: reason }.
 */
function defaultModel(name) {
  const dirs = [];
  if (process.env.MOONLM_MODELS) dirs.push(process.env.MOONLM_MODELS);
  dirs.push(path.join(REPO, 'build', 'models'));
  const xdg = process.env.XDG_CACHE_HOME;
  if (xdg && path.isAbsolute(xdg)) dirs.push(path.join(xdg, 'moonlm', 'models'));
  dirs.push(path.join(os.homedir(), '.cache', 'moonlm', 'models'));
  for (const d of dirs) {
    const p = path.join(d, name);
    try {
      const st = fs.statSync(p);
      if (st.isFile() && st.size > 0) return { path: p };
    } catch { /* not here */ }
  }
  return { skip: `model ${name} not found in ${dirs.join(', ')}: run scripts/fetch-model.sh (or make test)` };
}

/**
 * A synthetic model the engine's tests generate (synth-bert-Q8_0.gguf, ...),
 * in $MOONLM_SYNTH_DIR (the Makefile sets build/synth) or build/synth of the
 * repository: { path } once its sha256 is the one its references record,
 * or { skip: reason } when it is absent (`make synth-models` makes it).
 */
function synthModel(name, sha256) {
  const dir = process.env.MOONLM_SYNTH_DIR || path.join(REPO, 'build', 'synth');
  const p = path.join(dir, name);
  if (!fs.existsSync(p)) return { skip: `synthetic model ${name} absent from ${dir}: run \`make synth-models\`, which generates it` };
  const sum = require('node:crypto').createHash('sha256').update(fs.readFileSync(p)).digest('hex');
  if (sum !== sha256) throw new Error(`${p} is not the file its references were made from (sha256 ${sum})`);
  return { path: p };
}

function dataPath(rel) {
  return path.join(testdataRoot(), rel);
}

function readJsonl(rel) {
  return fs.readFileSync(dataPath(rel), 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
}

function logSoftmax(logits) {
  let m = -Infinity;
  for (const v of logits) if (v > m) m = v;
  let s = 0;
  for (const v of logits) s += Math.exp(v - m);
  const lse = m + Math.log(s);
  return Array.from(logits, (v) => v - lse);
}

const TOL = 0.02; // log-probability tolerance against llama.cpp (F16 KV cache both sides)

/** Asserts that our logits give the reference entry's top-10 log-probabilities. */
function assertCloseToRef(assert, logits, entry, where) {
  const lp = logSoftmax(logits);
  for (const [tok, logit] of entry.top) {
    const want = logit - entry.lse;
    assert.ok(Math.abs(lp[tok] - want) <= TOL,
      `${where}: token ${tok}: log-prob ${lp[tok].toFixed(4)}, llama.cpp ${want.toFixed(4)}`);
  }
}

/** How many greedy tokens are chosen without a near-tie (top two within 0.01). */
function tieFreePrefix(c) {
  const dists = [c.prompt_logits[c.prompt_logits.length - 1], ...c.greedy_logits];
  for (let k = 0; k < c.greedy.length; k++) {
    const top = dists[k].top;
    if (top[0][1] - top[1][1] < 0.01) return k;
  }
  return c.greedy.length;
}

// GGUF metadata value sizes by type (strings and arrays are variable).
const GGUF_SCALAR = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

// GGUF value types this writer makes, by name: [type id, encoder].
const GGUF_TYPES = {
  u32: [4, (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; }],
  i32: [5, (v) => { const b = Buffer.alloc(4); b.writeInt32LE(v); return b; }],
  f32: [6, (v) => { const b = Buffer.alloc(4); b.writeFloatLE(v); return b; }],
  u64: [10, (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); return b; }],
  string: [8, (v) => {
    const s = Buffer.from(v, 'utf8');
    const b = Buffer.alloc(8 + s.length);
    b.writeBigUInt64LE(BigInt(s.length));
    s.copy(b, 8);
    return b;
  }],
};

/**
 * A copy of a GGUF file (v2/v3) with metadata key set to value, encoded as
 * type ('u32', 'i32', 'f32', 'u64' or 'string'): an existing entry is
 * replaced, a missing one appended, and the padding before the tensor data
 * recomputed. Tensor offsets are relative to the data section, so they stay
 * valid. Used to make hostile files from a good one (a huge block count) and
 * to give a model a chat template.
 */
function ggufWith(src, key, type, value) {
  let off = 0;
  const u32 = () => { const v = src.readUInt32LE(off); off += 4; return v; };
  const u64 = () => { const v = Number(src.readBigUInt64LE(off)); off += 8; return v; };
  const str = () => { const n = u64(); const s = src.toString('utf8', off, off + n); off += n; return s; };
  const skipValue = (t) => {
    if (t in GGUF_SCALAR) { off += GGUF_SCALAR[t]; return; }
    if (t === 8) { str(); return; }
    if (t === 9) { const et = u32(); const n = u64(); for (let i = 0; i < n; i++) skipValue(et); return; }
    throw new Error(`GGUF value type ${t} at ${off}`);
  };
  if (src.toString('latin1', 0, 4) !== 'GGUF') throw new Error('not a GGUF file');
  off = 4;
  const version = u32();
  if (version < 2) throw new Error(`GGUF version ${version}`);
  const nTensors = u64();
  const nKV = u64();
  let alignment = 32;
  const kvStart = off;
  const entries = []; // [start, end, key] of each key/value pair
  for (let i = 0; i < nKV; i++) {
    const at = off;
    const k = str();
    const t = u32();
    if (k === 'general.alignment' && t === 4) alignment = src.readUInt32LE(off);
    skipValue(t);
    entries.push([at, off, k]);
  }
  for (let i = 0; i < nTensors; i++) {
    str();
    const nd = u32();
    off += 8 * nd + 4 + 8;
  }
  const infoEnd = off;
  const dataStart = Math.ceil(infoEnd / alignment) * alignment;
  const [typeId, encode] = GGUF_TYPES[type];
  const entry = Buffer.concat([GGUF_TYPES.string[1](key), GGUF_TYPES.u32[1](typeId), encode(value)]);
  const kvs = entries.filter(([, , k]) => k !== key).map(([a, b]) => src.subarray(a, b));
  kvs.push(entry);
  const head = Buffer.from(src.subarray(0, kvStart));
  head.writeBigUInt64LE(BigInt(kvs.length), 16);
  const meta = Buffer.concat([head, ...kvs, src.subarray(entries.length ? entries.at(-1)[1] : kvStart, infoEnd)]);
  const pad = Buffer.alloc((alignment - (meta.length % alignment)) % alignment);
  return Buffer.concat([meta, pad, src.subarray(dataStart)]);
}

/** A copy of a GGUF file with one more (or a replaced) string metadata key. */
function ggufWithString(src, key, value) {
  return ggufWith(src, key, 'string', value);
}

module.exports = {
  ggufWith, ggufWithString, moonlm, REPO, skipReason, dataPath, defaultModel, synthModel, readJsonl, assertCloseToRef, tieFreePrefix, logSoftmax };
