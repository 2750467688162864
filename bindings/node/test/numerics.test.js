'use strict';
// The numerics open option: validation, that it reaches the engine
// (ik_llama.cpp's reference logits), and that an invalid MOONLM_NUMERICS
// still fails a default open (in a child: the library reads its environment
// when it loads).
const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const os = require('node:os');
const path = require('node:path');
const h = require('./helpers');

const { Model, MoonlmError, Status } = h.moonlm;
const IK_MODEL = 'synth/synth-qwen3-Q4_K_M.gguf';
const IK_REFS = 'synth/synth-qwen3-Q4_K_M.ref.jsonl';
const skip = h.skipReason('models/stories260K.gguf');

/** The largest log-probability difference over the reference's top 10. */
function worstTopDiff(logits, dist) {
  const lp = h.logSoftmax(logits);
  let worst = 0;
  for (const [tok, logit] of dist.top.slice(0, 10)) worst = Math.max(worst, Math.abs(lp[tok] - (logit - dist.lse)));
  return worst;
}

async function firstPositionLogits(file, numerics, token) {
  const m = await Model.open(file, { threads: 2, numerics });
  try {
    assert.equal(m.numerics, numerics ?? 'default');
    const s = m.session({ nCtx: 64 });
    try {
      return Array.from(await s.prefill([token]));
    } finally {
      s.close();
    }
  } finally {
    m.close();
  }
}

describe('numerics option', { skip }, () => {
  const missing = path.join(os.tmpdir(), `moonlm-missing-${process.pid}.gguf`);

  it('refuses bad values before opening', async () => {
    for (const v of ['fast', 'IK', 'llama.cpp', '', 0, 3, true, 'toString']) {
      await assert.rejects(Model.open(missing, { numerics: v }), (e) => {
        assert.ok(e instanceof MoonlmError, String(e));
        assert.equal(e.status, Status.INVALID_ARGUMENT);
        assert.match(e.message, /numerics must be 'default', 'llamacpp', 'llamacpp-norepack' or 'ik'/);
        return true;
      }, String(v));
    }
  });

  it('passes good values to the library (the open fails on the missing file)', async () => {
    for (const v of [undefined, null, 'default', 'llamacpp', 'llamacpp-norepack', 'ik']) {
      await assert.rejects(Model.open(missing, { numerics: v }), (e) => e.status === Status.IO, String(v));
    }
  });

  // numerics 'ik' gives ik_llama.cpp's logits at the first prompt position of
  // the synthetic Q4_K_M model exactly (1e-4 leaves room for the log-sum-exp
  // only), while the default (fast) mode is measurably off there (the C ABI
  // test measured 0.05), so the check tells the modes apart.
  it("'ik' matches ik_llama.cpp's reference; the default does not", async (t) => {
    const why = h.skipReason(IK_MODEL) || h.skipReason(IK_REFS);
    if (why) return t.skip(why);
    if (process.env.MOONLM_NUMERICS) {
      return t.skip(`MOONLM_NUMERICS=${process.env.MOONLM_NUMERICS} is set: the default is not the fast mode`);
    }
    const ref = h.readJsonl(IK_REFS)[0];
    const dist = ref.prompt_logits[0];
    const file = h.dataPath(IK_MODEL);
    const ik = worstTopDiff(await firstPositionLogits(file, 'ik', ref.tokens[0]), dist);
    const fast = worstTopDiff(await firstPositionLogits(file, undefined, ref.tokens[0]), dist);
    const llamacpp = worstTopDiff(await firstPositionLogits(file, 'llamacpp', ref.tokens[0]), dist);
    assert.ok(ik <= 1e-4, `ik: worst top-10 log-probability difference ${ik}`);
    assert.ok(fast > 1e-4, `default: ${fast}, as close as ik: the test cannot tell the modes apart`);
    assert.ok(fast <= 0.5 && llamacpp <= 0.5, `default ${fast}, llamacpp ${llamacpp}: the same model`);
  });

  it('an invalid MOONLM_NUMERICS fails a default open, not an explicit one (ES module entry)', () => {
    const file = h.dataPath('models/stories260K.gguf');
    const entry = path.join(__dirname, '..', 'index.mjs');
    const code = `
import { Model } from ${JSON.stringify(entry)};
const file = ${JSON.stringify(file)};
try {
  await Model.open(file);
  throw new Error('default open succeeded with MOONLM_NUMERICS=bogus');
} catch (e) {
  if (e.code !== 'INVALID_ARGUMENT' || !e.message.includes('MOONLM_NUMERICS')) throw e;
}
const m = await Model.open(file, { numerics: 'llamacpp' });
m.close();
console.log('child ok');
`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], {
      env: { ...process.env, MOONLM_NUMERICS: 'bogus', MOONLM_LIBRARY: h.moonlm.libraryPath() },
      encoding: 'utf8',
      timeout: 120e3,
    });
    assert.ok(r.status === 0 && r.stdout.includes('child ok'), `${r.stdout}${r.stderr}`);
  });
});
