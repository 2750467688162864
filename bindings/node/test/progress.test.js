'use strict';
// Model.open(path, { progress }): the load-progress callback, which the
// library calls from the worker thread that opens (koffi runs it on the
// main thread).
const { describe, it } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const h = require('./helpers');

const { Model, MoonlmError, Status } = h.moonlm;
const skip = h.skipReason('models/stories260K.gguf');
const smol = h.defaultModel('SmolLM2-135M-Instruct.Q4_1.gguf');

function assertRising(fs_) {
  assert.ok(fs_.length > 0, 'no progress calls');
  for (let i = 0; i < fs_.length; i++) {
    assert.ok(fs_[i] >= 0 && fs_[i] <= 1, `fraction ${fs_[i]} out of [0, 1]`);
    if (i > 0) assert.ok(fs_[i] >= fs_[i - 1], `fractions decrease: ${fs_}`);
  }
  assert.ok(fs_.length <= 102, `more than about a hundred calls: ${fs_.length}`);
}

describe('open progress', { skip }, () => {
  const stories = () => h.dataPath('models/stories260K.gguf');

  it('rises to 1', async () => {
    const got = [];
    const m = await Model.open(stories(), { threads: 1, progress: (f) => { got.push(f); } });
    m.close();
    assertRising(got);
    assert.equal(got[0], 0);
    assert.equal(got[got.length - 1], 1);
  });

  it('reports while packing', { skip: smol.skip }, async () => {
    const got = [];
    const m = await Model.open(smol.path, { threads: 1, pack: true, packedCache: false, progress: (f) => { got.push(f); return true; } });
    m.close();
    assertRising(got);
    assert.equal(got[got.length - 1], 1);
    assert.ok(got.filter((f) => f > 0.2 && f < 1).length > 10, `${got}`);
  });

  it('false cancels at any call', async () => {
    const full = [];
    (await Model.open(stories(), { threads: 1, progress: (f) => { full.push(f); } })).close();
    for (let stop = 1; stop <= full.length; stop++) {
      let calls = 0;
      await assert.rejects(
        Model.open(stories(), { threads: 1, progress: () => ++calls < stop }),
        (e) => e instanceof MoonlmError && e.status === Status.CANCELLED,
      );
      assert.equal(calls, stop, 'calls after the cancelling one');
    }
  });

  it('cancels while packing and leaves nothing mapped', { skip: smol.skip }, async () => {
    const got = [];
    await assert.rejects(
      Model.open(smol.path, { threads: 1, pack: true, packedCache: false, progress: (f) => { got.push(f); return f < 0.5; } }),
      (e) => e instanceof MoonlmError && e.status === Status.CANCELLED,
    );
    assert.ok(got[got.length - 1] >= 0.5 && got[got.length - 1] < 1, `${got}`);
    if (fs.existsSync('/proc/self/maps')) {
      assert.ok(!fs.readFileSync('/proc/self/maps', 'utf8').includes(smol.path), 'a cancelled open left the model mapped');
    }
  });

  it('a throwing callback cancels and rejects with its error', async () => {
    const boom = new Error('from the callback');
    await assert.rejects(
      Model.open(stories(), { threads: 1, progress: (f) => { if (f > 0.05) throw boom; } }),
      (e) => e === boom,
    );
  });

  it('must be a function', async () => {
    await assert.rejects(Model.open(stories(), { progress: 1 }), /progress/);
  });
});
