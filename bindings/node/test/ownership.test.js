'use strict';
// The buffers a native call uses belong to the binding for the call's
// duration, whatever user code does with the arrays it was given.
const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const h = require('./helpers');

const skip = h.skipReason('models/stories260K.gguf');
const SMOL = h.defaultModel('SmolLM2-135M-Instruct.Q4_1.gguf');

/** Runs fixtures/transfer-logits.js (in a child: it needs --expose-gc, and a write into freed memory may crash it). */
function transferDuringCall(model, mode) {
  const stdout = execFileSync(process.execPath,
    ['--expose-gc', path.join(__dirname, 'fixtures', 'transfer-logits.js'), model, mode],
    { encoding: 'utf8', timeout: 180000 });
  const r = JSON.parse(stdout);
  assert.equal(r.rounds, 6, stdout);
  assert.equal(r.detachedDuring, 6, 'the transfer detached the array user code held');
  assert.equal(r.overwritten, 0, `arrays allocated after the transfer were written by the library: ${stdout}`);
  assert.equal(r.logitsOk, 6, `session.logits after each call holds that call's logits: ${stdout}`);
}

describe('buffer ownership', { skip }, () => {
  it('transferring session.logits during an async prefill writes into nothing freed', () => {
    transferDuringCall(h.dataPath('models/stories260K.gguf'), 'prefill');
  });

  // A decode of stories260K is over before the transfer; the real model's
  // takes long enough, and its logits (196 KB) are freed by munmap.
  it('transferring session.logits during an async decode writes into nothing freed', { skip: SMOL.skip }, () => {
    transferDuringCall(SMOL.path, 'decode');
  });

  it('prefill reads a private copy of the tokens', async () => {
    const { Model } = h.moonlm;
    const m = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 2 });
    try {
      const toks = Int32Array.from([1, 403, 407, 300, 200]);
      const s1 = m.session();
      const want = (await s1.prefill(toks)).slice();
      s1.close();
      const s2 = m.session();
      const p = s2.prefill(toks);
      toks.fill(0); // changed while the call runs: the call still sees the tokens it was given
      assert.deepEqual(await p, want);
      s2.close();
    } finally {
      m.close();
    }
  });
});
