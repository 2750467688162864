'use strict';
// The API on the real stories260K model, checked against llama.cpp's
// reference outputs (reference/stories260K.ref.jsonl, F16 KV cache) and the
// model's published golden text.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const h = require('./helpers');

const { Model, Sampler, MoonlmError } = h.moonlm;
const skip = h.skipReason('models/stories260K.gguf');

describe('stories260K', { skip }, () => {
  let model;
  let ref;
  before(async () => {
    model = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 2 });
    ref = h.readJsonl('reference/stories260K.ref.jsonl');
  });
  after(() => model && model.close());

  it('reports the model facts', () => {
    // From the shared data's README and the file's metadata.
    assert.equal(model.vocabSize, 512);
    assert.equal(model.architecture, 'llama');
    assert.equal(model.contextLength, 2048);
    assert.equal(model.embeddingSize, 64);
    assert.equal(model.nLayers, 5);
    assert.equal(model.nHeads, 8);
    assert.equal(model.nKvHeads, 4);
    assert.equal(model.bosTokenId, 1);
    assert.equal(model.eosTokenId, 2);
    assert.equal(model.chatTemplate, null);
    assert.ok(model.isEog(2));
    assert.ok(!model.isEog(1));
  });

  it('tokenizes like llama.cpp', () => {
    for (const c of ref) {
      const toks = model.tokenize(c.prompt);
      assert.ok(toks instanceof Int32Array);
      assert.deepEqual(Array.from(toks), c.tokens, c.prompt);
      assert.deepEqual(Array.from(model.tokenize(c.prompt, { addSpecial: false })), c.tokens.slice(1));
    }
  });

  it('detokenizes, and token pieces join to llama.cpp\'s text', () => {
    for (const c of ref) {
      const pieces = Buffer.concat(c.greedy.map((t) => model.tokenToPiece(t)));
      assert.equal(pieces.toString('utf8'), c.greedy_text);
      if (c.prompt) {
        // Like llama.cpp, the word-initial space of the first piece may be
        // kept after BOS; the text is otherwise exact.
        assert.equal(model.detokenize(c.tokens).replace(/^ /, ''), c.prompt);
        assert.equal(model.detokenize([...c.tokens, ...c.greedy]).replace(/^ /, ''), c.prompt + c.greedy_text);
      }
    }
    assert.equal(model.detokenize(new Int32Array([1, 403, 407])).replace(/^ /, ''), 'Once upon');
    assert.equal(model.detokenize([]), '');
  });

  it('gives llama.cpp\'s logits at every prompt position', async () => {
    for (const c of ref) {
      const s = model.session();
      for (let i = 0; i < c.tokens.length; i++) {
        const logits = i ? await s.decode(c.tokens[i]) : await s.prefill([c.tokens[0]]);
        h.assertCloseToRef(assert, logits, c.prompt_logits[i], `${JSON.stringify(c.prompt)} pos ${i}`);
      }
      assert.equal(s.position, c.tokens.length);
      s.close();
      const s2 = model.session();
      const logits = await s2.prefill(c.tokens);
      h.assertCloseToRef(assert, logits, c.prompt_logits[c.prompt_logits.length - 1], 'batched');
      s2.close();
    }
  });

  it('gives llama.cpp\'s logits along its greedy path (teacher forced)', async () => {
    for (const c of ref) {
      const s = model.session();
      await s.prefill(c.tokens);
      for (let i = 0; i < c.greedy.length; i++) {
        const logits = await s.decode(c.greedy[i]);
        h.assertCloseToRef(assert, logits, c.greedy_logits[i], `${JSON.stringify(c.prompt)} step ${i}`);
      }
      s.close();
    }
  });

  it('decodes greedily like llama.cpp', async () => {
    for (const c of ref) {
      const n = h.tieFreePrefix(c);
      const s = model.session();
      const sm = new Sampler({ temperature: 0 });
      let logits = await s.prefill(c.tokens);
      const got = [];
      for (let i = 0; i < n; i++) {
        const t = sm.sample(logits);
        got.push(t);
        logits = await s.decode(t);
      }
      s.close();
      sm.close();
      assert.deepEqual(got, c.greedy.slice(0, n), c.prompt);
    }
  });

  it('generates the golden text', async () => {
    const golden = fs.readFileSync(h.dataPath('models/stories260K.golden.txt'), 'utf8').trimEnd();
    const n = model.tokenize(golden, { addSpecial: false }).length + 4;
    const text = await model.generate('', { maxTokens: n, temperature: 0 });
    // The golden text is the continuation with its leading space removed.
    assert.ok(text.replace(/^ /, '').startsWith(golden), text.slice(0, 120));
  });

  it('generates llama.cpp\'s greedy text', async () => {
    for (const c of ref) {
      const n = h.tieFreePrefix(c);
      if (!c.prompt || n === 0) continue;
      const text = await model.generate(c.prompt, { maxTokens: c.greedy.length, temperature: 0 });
      const common = model.detokenize([...c.tokens, ...c.greedy.slice(0, n)]).replace(/^ /, '').slice(c.prompt.length);
      assert.ok(text.startsWith(common), c.prompt);
      if (n === c.greedy.length) assert.equal(text, c.greedy_text);
      const fromTokens = await model.generate(c.tokens, { maxTokens: c.greedy.length, temperature: 0 });
      assert.equal(fromTokens, text);
    }
  });

  const optionSets = [
    { temperature: 0 },
    { temperature: 0.9, seed: 42 },
    { temperature: 1.2, topK: 0, topP: 1, minP: 0, seed: 7, repeatPenalty: 1.3 },
    { temperature: 0, stop: ['Lily', 'park'] },
    { temperature: 0.8, seed: 3n, stop: '.' },
  ];
  for (const opts of optionSets) {
    it(`streams what generate returns (${JSON.stringify(opts, (k, v) => (typeof v === 'bigint' ? `${v}n` : v))})`, async () => {
      const o = { maxTokens: 48, ...opts };
      const full = await model.generate('Once upon a time', o);
      const pieces = [];
      for await (const p of model.stream('Once upon a time', o)) pieces.push(p);
      assert.equal(pieces.join(''), full);
      assert.ok(pieces.every((p) => typeof p === 'string' && p.length > 0));
      if (!opts.stop) assert.ok(pieces.length > 1);
    });
  }

  it('honours seeds', async () => {
    const o = { maxTokens: 40, temperature: 1 };
    const a = await model.generate('One day', { ...o, seed: 1 });
    const b = await model.generate('One day', { ...o, seed: 1 });
    const c = await model.generate('One day', { ...o, seed: 2 });
    assert.equal(a, b);
    assert.notEqual(a, c); // 40 draws at temperature 1: equal only if seeds were ignored
  });

  it('cuts at stop strings', async () => {
    const full = await model.generate('Once upon a time', { maxTokens: 64, temperature: 0 });
    assert.ok(full.includes('Lily'));
    const cut = await model.generate('Once upon a time', { maxTokens: 64, temperature: 0, stop: ['Lily'] });
    assert.equal(cut, full.slice(0, full.indexOf('Lily')));
    assert.equal(await model.generate('Once upon a time', { maxTokens: 0 }), '');
    assert.equal(await model.generate('Once upon a time', { maxTokens: 1, temperature: 0 }), ',');
  });

  it('stops a stream early when the loop is left', async () => {
    const it = model.stream('Once upon a time', { maxTokens: 200, temperature: 0 });
    let n = 0;
    for await (const piece of it) {
      assert.ok(piece);
      if (++n === 2) break;
    }
    assert.deepEqual(await it.next(), { value: undefined, done: true });
  });

  it('reuses one logits buffer per session; rewinds', async () => {
    const s = model.session({ nCtx: 64 });
    assert.equal(s.nCtx, 64);
    const toks = ref[0].tokens;
    const a = await s.prefill(toks);
    assert.ok(a instanceof Float32Array && a.length === 512);
    assert.equal(a, s.logits);
    const first = (await s.decode(432)).slice();
    assert.equal(s.position, toks.length + 1);
    const b = await s.decode(383);
    assert.equal(b, a); // the same object, refilled
    assert.notDeepEqual(Array.from(b), Array.from(first));
    s.rewind(toks.length);
    assert.equal(s.position, toks.length);
    const again = await s.decode(432);
    for (let i = 0; i < again.length; i++) assert.ok(Math.abs(again[i] - first[i]) <= 1e-5);
    assert.throws(() => s.rewind(s.position + 1), { code: 'INVALID_ARGUMENT' });
    s[Symbol.dispose]();
    assert.ok(s.closed);
  });

  it('samples with penalties', () => {
    const logits = new Float32Array([0, 5, 4.9, -1]);
    const g = new Sampler({ temperature: 0 });
    assert.equal(g.sample(logits), 1);
    assert.equal(g.sample([0, 1, 3]), 2);
    const p = new Sampler({ temperature: 0, repeatPenalty: 2 });
    p.accept(1); // 5 / 2 falls below 4.9
    assert.equal(p.sample(logits), 2);
    p.reset();
    assert.equal(p.sample(logits), 1);
    assert.throws(() => new Sampler({ seed: -1 }), MoonlmError);
    g.close();
    p.close();
  });
});
