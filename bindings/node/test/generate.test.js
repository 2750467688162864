'use strict';
// The details form of generation (Completion) and its finish reasons: the
// library's one loop (moonlm_generate_ex) as the binding reports it.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const { Model, Sampler, MoonlmError } = h.moonlm;
const skip = h.skipReason('models/stories260K.gguf');
const PROMPT = 'Once upon a time';

describe('generation details', { skip }, () => {
  let model;
  before(async () => {
    model = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 2 });
  });
  after(() => model && model.close());

  it('gives the text, finish reason, token ids and counts', async () => {
    const text = await model.generate(PROMPT, { maxTokens: 24, temperature: 0 });
    const c = await model.generate(PROMPT, { maxTokens: 24, temperature: 0, details: true });
    assert.equal(c.text, text);
    assert.equal(c.finishReason, 'length');
    assert.ok(c.tokens instanceof Int32Array);
    assert.equal(c.tokens.length, 24);
    assert.equal(c.completionTokens, 24);
    const prompt = model.tokenize(PROMPT);
    assert.equal(c.promptTokens, prompt.length);
    const whole = model.detokenize([...prompt, ...c.tokens]);
    assert.ok(whole.endsWith(text) && whole.length > text.length);
    // The first token is the one a greedy Sampler picks after the prompt.
    const s = model.session();
    const g = new Sampler({ temperature: 0 });
    assert.equal(g.sample(await s.prefill(prompt)), c.tokens[0]);
    s.close();
    g.close();
  });

  it('reports stop, context and a prefill-only call', async () => {
    const full = await model.generate(PROMPT, { maxTokens: 64, temperature: 0, details: true });
    assert.ok(full.text.includes('Lily'));
    const c = await model.generate(PROMPT, { maxTokens: 64, temperature: 0, stop: ['Lily'], details: true });
    assert.equal(c.finishReason, 'stop');
    assert.equal(c.text, full.text.slice(0, full.text.indexOf('Lily')));
    assert.deepEqual(c.tokens, full.tokens.subarray(0, c.tokens.length));
    assert.ok(model.detokenize(c.tokens).includes('Lily'));
    assert.ok(!model.detokenize(c.tokens.subarray(0, -1)).includes('Lily'));

    // 5 prompt tokens in a context of 8: 3 decoded + 1 sampled last.
    const ctx = await model.generate(PROMPT, { maxTokens: 100, temperature: 0, nCtx: 8, details: true });
    assert.equal(ctx.finishReason, 'context');
    assert.equal(ctx.promptTokens, 5);
    assert.equal(ctx.completionTokens, 4);

    const zero = await model.generate(PROMPT, { maxTokens: 0, details: true });
    assert.deepEqual([zero.text, zero.finishReason, zero.tokens.length, zero.promptTokens], ['', 'length', 0, 5]);
  });

  it('gives a stream its completion once exhausted', async () => {
    const st = model.stream(PROMPT, { maxTokens: 20, temperature: 0, stop: ['park'] });
    assert.equal(st.completion, null);
    const pieces = [];
    for await (const p of st) pieces.push(p);
    assert.equal(st.completion.text, pieces.join(''));
    assert.ok(['stop', 'length'].includes(st.completion.finishReason));
    assert.throws(() => model.stream(PROMPT, { details: true }), { name: 'TypeError', param: 'opts.details' });
    await assert.rejects(model.generate(PROMPT, { details: 1 }), { name: 'TypeError', param: 'opts.details' });
  });

  it('continues a session stream from its last token', async () => {
    const prompt = model.tokenize(PROMPT);
    const want = await model.generate(PROMPT, { maxTokens: 12, temperature: 0, details: true });
    const s = model.session();
    const g = new Sampler({ temperature: 0 });
    const a = s.stream(prompt, { maxTokens: 6, sampler: g });
    let first = '';
    for await (const p of a) first += p;
    assert.equal(a.completion.finishReason, 'length');
    assert.equal(s.position, prompt.length + 5); // the last token is not evaluated
    const b = s.stream(a.completion.tokens.subarray(-1), { maxTokens: 6, sampler: g });
    let second = '';
    for await (const p of b) second += p;
    assert.deepEqual([...a.completion.tokens, ...b.completion.tokens], [...want.tokens]);
    assert.equal(first + second, want.text);
    s.close();
    g.close();
  });

  it('rejects Session.cancel() with the partial completion; the session stays usable', async () => {
    const s = model.session();
    const got = [];
    await assert.rejects(async () => {
      for await (const p of s.stream(model.tokenize(PROMPT), { maxTokens: 1900, temperature: 0 })) {
        got.push(p);
        if (got.length === 2) s.cancel();
      }
    }, (e) => {
      assert.ok(e instanceof MoonlmError);
      assert.equal(e.code, 'CANCELLED');
      assert.equal(e.completion.finishReason, 'cancelled');
      assert.ok(e.completion.text.startsWith(got.join('')));
      assert.ok(e.completion.completionTokens < 1900);
      return true;
    });
    const pos = s.position;
    await s.decode(403);
    assert.equal(s.position, pos + 1);
    s.close();
  });

  it('leaving a session stream early leaves the session usable', async () => {
    const s = model.session();
    const st = s.stream(model.tokenize(PROMPT), { maxTokens: 200, temperature: 0 });
    for await (const p of st) { assert.ok(p); break; }
    assert.equal(st.completion, null);
    const pos = s.position;
    assert.ok(pos > 5);
    await s.decode(403);
    assert.equal(s.position, pos + 1);
    s.close();
  });

  it('checks the stop strings against the library bounds at the call', async () => {
    assert.throws(() => model.stream(PROMPT, { stop: new Array(1025).fill('x') }), { name: 'RangeError', param: 'stop' });
    assert.throws(() => model.stream(PROMPT, { stop: ['x'.repeat(1 << 20), 'y'] }), { name: 'RangeError', param: 'stop' });
    // NUL and non-ASCII stop strings are bytes to the library.
    assert.equal(await model.generate(PROMPT, { maxTokens: 8, temperature: 0, stop: ['\0', 'é'] }),
      await model.generate(PROMPT, { maxTokens: 8, temperature: 0 }));
  });
});

const smol = h.defaultModel('SmolLM2-135M-Instruct.Q4_1.gguf');

describe('end of generation', { skip: skip || smol.skip }, () => {
  it('reports eog when the model ends its turn', async () => {
    const m = await Model.open(smol.path, { threads: 2 });
    try {
      const msgs = [{ role: 'user', content: 'Say hello.' }];
      const c = await m.chat(msgs, { maxTokens: 128, temperature: 0, details: true });
      assert.equal(c.finishReason, 'eog');
      assert.ok(c.completionTokens > 0 && c.completionTokens < 128);
      for (const t of c.tokens) assert.ok(!m.isEog(t));
      assert.equal(await m.chat(msgs, { maxTokens: 128, temperature: 0 }), c.text);
    } finally {
      m.close();
    }
  });
});
