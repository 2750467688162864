'use strict';
// Cancellation with AbortSignal, sessions running at once, and the event
// loop staying responsive while the library computes.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const { Model, MoonlmError } = h.moonlm;
const skip = h.skipReason('models/stories260K.gguf');

describe('concurrency', { skip }, () => {
  let model;
  before(async () => {
    model = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 2 });
  });
  after(() => model && model.close());

  it('aborts a stream mid-generation', async () => {
    const ac = new AbortController();
    const pieces = [];
    await assert.rejects(async () => {
      for await (const p of model.stream('Once upon a time', { maxTokens: 500, temperature: 0, signal: ac.signal })) {
        pieces.push(p);
        if (pieces.length === 3) ac.abort();
      }
    }, (e) => {
      assert.ok(e instanceof MoonlmError);
      assert.equal(e.code, 'CANCELLED');
      return true;
    });
    assert.equal(pieces.length, 3);
  });

  it('aborts generate while it computes (timer-driven)', async () => {
    const ac = new AbortController();
    const started = Date.now();
    const p = model.generate('Once upon a time', { maxTokens: 1900, temperature: 0, signal: ac.signal });
    setTimeout(() => ac.abort(new Error('enough')), 20);
    await assert.rejects(p, (e) => {
      assert.equal(e.code, 'CANCELLED');
      assert.equal(e.cause.message, 'enough');
      return true;
    });
    assert.ok(Date.now() - started < 5000);
  });

  it('aborting a session stream leaves the session usable', async () => {
    const s = model.session();
    const ac = new AbortController();
    let n = 0;
    await assert.rejects(async () => {
      for await (const p of s.stream(model.tokenize('Once upon a time'), { maxTokens: 50, temperature: 0, signal: ac.signal })) {
        assert.ok(p);
        if (++n === 2) ac.abort();
      }
    }, { code: 'CANCELLED' });
    const pos = s.position;
    assert.ok(pos > 5);
    await s.decode(403); // no cancellation request left behind
    assert.equal(s.position, pos + 1);
    s.close();
  });

  it('rejects at once with an already aborted signal', async () => {
    await assert.rejects(model.generate('Once', { signal: AbortSignal.abort() }), { code: 'CANCELLED' });
  });

  it('cancels a session call, and the next call runs normally', async () => {
    const s = model.session();
    const toks = model.tokenize('Once upon a time');
    s.cancel();
    await assert.rejects(s.prefill(toks), { code: 'CANCELLED' });
    assert.equal(s.position, 0);
    await s.prefill(toks);
    assert.equal(s.position, toks.length);
    s.close();
  });

  it('runs two sessions generating at once', async () => {
    const prompts = ['Once upon a time', 'One day, a big bear'];
    const want = [];
    for (const p of prompts) want.push(await model.generate(p, { maxTokens: 48, temperature: 0 }));
    for (let round = 0; round < 3; round++) {
      const got = await Promise.all(prompts.map((p) => model.generate(p, { maxTokens: 48, temperature: 0 })));
      assert.deepEqual(got, want);
    }
  });

  it('keeps the event loop responsive during a long prefill', async (t) => {
    // A prefill of 600 tokens, twice: each call runs on a worker
    // thread, so a 1 ms timer keeps firing while it computes.
    const s = model.session({ nCtx: 600 });
    const toks = new Int32Array(600).map((_, i) => (i === 0 ? 1 : 259 + (i % 200)));
    let ticks = 0;
    const timer = setInterval(() => { ticks++; }, 1);
    let longest = 0;
    let ticksInLongest = 0;
    try {
      for (let i = 0; i < 2; i++) {
        s.rewind(0);
        const t0 = performance.now();
        const before = ticks;
        await s.prefill(toks);
        const dt = performance.now() - t0;
        if (dt > longest) { longest = dt; ticksInLongest = ticks - before; }
      }
    } finally {
      clearInterval(timer);
      s.close();
    }
    if (longest < 20) {
      t.skip(`the longest prefill took ${longest.toFixed(1)} ms: too short to tell a blocked loop`);
      return;
    }
    // A blocked loop would show 0 ticks during the call.
    assert.ok(ticksInLongest >= 3, `${ticksInLongest} timer ticks during a ${longest.toFixed(0)} ms prefill`);
  });
});
