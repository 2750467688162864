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

/**
 * A copy of a GGUF file (v2/v3) with one more string metadata key, e.g.
 * tokenizer.chat_template: the key/value section gains an entry and the
 * padding before the tensor data is recomputed; tensor offsets are relative
 * to the data section, so they stay valid.
 */
function ggufWithString(src, key, value) {
  let off = 0;
  const u32 = () => { const v = src.readUInt32LE(off); off += 4; return v; };
  const u64 = () => { const v = Number(src.readBigUInt64LE(off)); off += 8; return v; };
  const str = () => { const n = u64(); const s = src.toString('utf8', off, off + n); off += n; return s; };
  const skipValue = (type) => {
    if (type in GGUF_SCALAR) { off += GGUF_SCALAR[type]; return; }
    if (type === 8) { str(); return; }
    if (type === 9) { const et = u32(); const n = u64(); for (let i = 0; i < n; i++) skipValue(et); return; }
    throw new Error(`GGUF value type ${type} at ${off}`);
  };
  if (src.toString('latin1', 0, 4) !== 'GGUF') throw new Error('not a GGUF file');
  off = 4;
  const version = u32();
  if (version < 2) throw new Error(`GGUF version ${version}`);
  const nTensors = u64();
  const nKV = u64();
  let alignment = 32;
  const kvStart = off;
  for (let i = 0; i < nKV; i++) {
    const k = str();
    const t = u32();
    if (k === 'general.alignment' && t === 4) { alignment = src.readUInt32LE(off); }
    skipValue(t);
  }
  const kvEnd = off;
  for (let i = 0; i < nTensors; i++) {
    str();
    const nd = u32();
    off += 8 * nd + 4 + 8;
  }
  const infoEnd = off;
  const dataStart = Math.ceil(infoEnd / alignment) * alignment;
  const kb = Buffer.from(key, 'utf8');
  const vb = Buffer.from(value, 'utf8');
  const kv = Buffer.alloc(8 + kb.length + 4 + 8 + vb.length);
  let o = kv.writeBigUInt64LE(BigInt(kb.length), 0);
  o += kb.copy(kv, o);
  o = kv.writeUInt32LE(8, o);
  o = kv.writeBigUInt64LE(BigInt(vb.length), o);
  vb.copy(kv, o);
  const head = Buffer.from(src.subarray(0, kvStart));
  head.writeBigUInt64LE(BigInt(nKV + 1), 16);
  const meta = Buffer.concat([head, src.subarray(kvStart, kvEnd), kv, src.subarray(kvEnd, infoEnd)]);
  const pad = Buffer.alloc((alignment - (meta.length % alignment)) % alignment);
  return Buffer.concat([meta, pad, src.subarray(dataStart)]);
}

module.exports = {
  ggufWithString, moonlm, REPO, skipReason, dataPath, defaultModel, readJsonl, assertCloseToRef, tieFreePrefix, logSoftmax };
