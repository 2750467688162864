'use strict';
// The packing open options (pack, packedCache, packedCacheDir,
// packedCacheBytes): validation, and that they reach the engine (its
// packed-weight cache on disk, and openStats).
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const h = require('./helpers');

const { Model, MoonlmError, Status } = h.moonlm;
const skip = h.skipReason('models/stories260K.gguf');

// Shared synth models with matrix types that may have packed layouts.
const PACKABLE = [
  'synth/synth-llama-Q8_0.gguf',
  'synth/synth-llama-Q4_K_M.gguf',
  'synth/synth-qwen3-Q8_0.gguf',
  'synth/synth-qwen3-Q4_K_M.gguf',
];

/** The cache entries below dir (none if it does not exist): its regular
 * files without the .ok stamps beside them. */
function cacheFiles(dir) {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { recursive: true })
    .filter((f) => !f.endsWith('.ok') && fs.statSync(path.join(dir, f)).isFile()).sort();
}

async function logitsOf(model) {
  const s = model.session({ nCtx: 32 });
  try {
    return Array.from(await s.prefill([1, 40, 90, 200, 7, 311]));
  } finally {
    s.close();
  }
}

async function openAndClose(file, opts) {
  const m = await Model.open(file, opts);
  const st = m.openStats();
  m.close();
  return st;
}

describe('packing options', { skip }, () => {
  let tmp;
  let packable = []; // paths the library packs something of
  let why = false;
  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'moonlm-pack-'));
    for (const rel of PACKABLE) {
      const r = h.skipReason(rel);
      if (r) { why = r; continue; }
      const st = await openAndClose(h.dataPath(rel), { threads: 1, pack: true, packedCache: false });
      if (st.packSource !== 'none') packable.push(h.dataPath(rel));
    }
    if (!why && packable.length === 0) {
      why = `no packed layout for the matrices of ${PACKABLE.join(', ')} with this CPU's kernels: nothing to pack or cache`;
    }
  });
  after(() => tmp && fs.rmSync(tmp, { recursive: true, force: true }));

  /** Skips the test (with the reason) unless n packable models exist. */
  function needPackable(t, n) {
    if (packable.length >= n) return false;
    t.skip(why || `only ${packable.length} packable model(s), need ${n}`);
    return true;
  }

  it('refuses bad values before opening', async () => {
    const missing = path.join(tmp, 'missing.gguf');
    for (const [opts, name] of [
      [{ pack: 1 }, 'pack'], [{ pack: 'yes' }, 'pack'], [{ packedCache: 0 }, 'packedCache'],
      [{ packedCache: 'ON' }, 'packedCache'], [{ packedCacheDir: 5 }, 'packedCacheDir'],
      [{ packedCacheDir: 'a\0b' }, 'packedCacheDir'], [{ packedCacheBytes: -1 }, 'packedCacheBytes'],
      [{ packedCacheBytes: 1.5 }, 'packedCacheBytes'], [{ packedCacheBytes: 1n << 63n }, 'packedCacheBytes'],
    ]) {
      await assert.rejects(Model.open(missing, opts), (e) => {
        assert.ok(e instanceof MoonlmError, String(e));
        assert.equal(e.status, Status.INVALID_ARGUMENT);
        assert.match(e.message, new RegExp(name));
        return true;
      }, JSON.stringify(opts, (k, v) => (typeof v === 'bigint' ? String(v) : v)));
    }
  });

  it('passes good values to the library (the open fails on the missing file)', async () => {
    const missing = path.join(tmp, 'missing.gguf');
    for (const v of [undefined, null, true, false, 'default', 'on', 'off']) {
      await assert.rejects(Model.open(missing, {
        pack: v, packedCache: v, packedCacheDir: tmp, packedCacheBytes: (1n << 63n) - 1n,
      }), (e) => e.status === Status.IO, String(v));
    }
    await assert.rejects(Model.open(missing, { packedCacheBytes: Number.MAX_SAFE_INTEGER }),
      (e) => e.status === Status.IO);
  });

  it('reports nothing packed for an all-F32 model', async () => {
    const dir = path.join(tmp, 'f32');
    const st = await openAndClose(h.dataPath('models/stories260K.gguf'),
      { pack: 'on', packedCache: 'on', packedCacheDir: dir });
    assert.equal(st.packSource, 'none');
    assert.equal(st.packedMatrices, 0);
    assert.equal(st.packedBytes, 0);
    for (const ms of [st.mapMs, st.parseMs, st.tensorsMs, st.packMs]) assert.ok(ms >= 0, String(ms));
    assert.deepEqual(cacheFiles(dir), []);
  });

  it('writes an entry to packedCacheDir and maps it on the next open', async (t) => {
    if (needPackable(t, 1)) return;
    const file = packable[0];
    const dir = path.join(tmp, 'reuse');
    let m = await Model.open(file, { threads: 2, pack: true, packedCache: true, packedCacheDir: dir });
    const cold = m.openStats();
    const coldLogits = await logitsOf(m);
    m.close();
    assert.equal(cold.packSource, 'packed+cache-write');
    assert.ok(cold.packedMatrices > 0 && cold.packedBytes > 0, JSON.stringify(cold));
    const entries = cacheFiles(dir);
    assert.ok(entries.length > 0, `no cache entry in ${dir}`);

    m = await Model.open(file, { threads: 2, pack: 'on', packedCache: 'on', packedCacheDir: dir });
    const warm = m.openStats();
    const warmLogits = await logitsOf(m);
    m.close();
    assert.equal(warm.packSource, 'cache-hit');
    assert.equal(warm.packedBytes, cold.packedBytes);
    assert.deepEqual(cacheFiles(dir), entries);
    assert.deepEqual(warmLogits, coldLogits);
  });

  it('writes nothing with packedCache off or pack off', async (t) => {
    if (needPackable(t, 1)) return;
    const dir = path.join(tmp, 'off');
    let st = await openAndClose(packable[0], { threads: 2, pack: true, packedCache: 'off', packedCacheDir: dir });
    assert.equal(st.packSource, 'packed');
    assert.deepEqual(cacheFiles(dir), []);
    st = await openAndClose(packable[0], { threads: 2, pack: false, packedCache: true, packedCacheDir: dir });
    assert.equal(st.packSource, 'off');
    assert.equal(st.packedBytes, 0);
    assert.deepEqual(cacheFiles(dir), []);
  });

  it('evicts down to packedCacheBytes, keeping the newest entry', async (t) => {
    if (needPackable(t, 2)) return;
    const roomy = path.join(tmp, 'roomy');
    const tight = path.join(tmp, 'tight');
    for (const file of packable.slice(0, 2)) {
      await openAndClose(file, { threads: 1, pack: true, packedCache: true, packedCacheDir: roomy });
      await openAndClose(file, { threads: 1, pack: true, packedCache: true, packedCacheDir: tight, packedCacheBytes: 1 });
    }
    assert.equal(cacheFiles(roomy).length, 2);
    assert.equal(cacheFiles(tight).length, 1);
  });
});
