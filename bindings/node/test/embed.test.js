'use strict';
// Embeddings and reranking (moonlm_embed, moonlm_embed_tokens,
// moonlm_rerank) on the engine's synthetic BERT (generated into build/synth
// by `make synth-models`), against llama.cpp's vectors
// (engine/testdata/synth/synth-bert-Q8_0.embed.json).
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const h = require('./helpers');

const { Model, MoonlmError } = h.moonlm;
const SYNTH = path.join(h.REPO, 'engine', 'testdata', 'synth');
const REF = JSON.parse(fs.readFileSync(path.join(SYNTH, 'synth-bert-Q8_0.embed.json'), 'utf8'));
const refCase = (pooling, normalize) => REF.cases.find((c) => c.pooling === pooling && c.normalize === normalize);

function cosine(a, b) {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) { dot += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i]; }
  return dot / Math.sqrt(na * nb);
}

const BERT = h.synthModel('synth-bert-Q8_0.gguf', REF.sha256);

describe('embeddings', { skip: BERT.skip }, () => {
  let bert;
  before(async () => { bert = await Model.open(BERT.path, { threads: 2 }); });
  after(() => bert.close());

  for (const [pooling, normalize] of [['mean', 2], ['mean', -1], ['cls', -1], ['last', 2]]) {
    it(`${pooling} (normalize ${normalize}) matches llama.cpp`, () => {
      const c = refCase(pooling, normalize);
      const got = bert.embed(c.texts, { pooling, normalize: normalize === 2 });
      assert.equal(got.length, c.embeddings.length);
      got.forEach((g, i) => {
        assert.ok(g instanceof Float32Array);
        assert.equal(g.length, 256);
        assert.ok(cosine(g, c.embeddings[i]) >= 0.999, `text ${i}`);
      });
    });
  }

  it('one string gives one vector; the default pooling is the file\'s', () => {
    const c = refCase('mean', 2);
    const one = bert.embed(c.texts[0], { normalize: true });
    assert.ok(one instanceof Float32Array);
    assert.deepEqual(one, bert.embed([c.texts[0]], { pooling: 'mean', normalize: true })[0]);
    assert.equal(bert.embeddingLength(), 256);
    assert.equal(bert.embeddingLength('rank'), 1);
  });

  it('pooling none gives each token\'s vector; token lists equal texts', () => {
    const c = refCase('none', -1);
    const got = bert.embed(c.texts.slice(0, 2), { pooling: 'none' });
    got.forEach((rows, i) => {
      assert.equal(rows.length, c.tokens[i].length);
      rows.forEach((r, j) => assert.ok(cosine(r, c.embeddings[i][j]) >= 0.999));
    });
    const cls = refCase('cls', -1);
    assert.deepEqual(bert.embedTokens(cls.tokens, { pooling: 'cls' }), bert.embed(cls.texts, { pooling: 'cls' }));
  });

  it('rerank matches llama.cpp', () => {
    const c = refCase('rank', -1);
    c.pairs.forEach(([q, d], i) => {
      const [s] = bert.rerank(q, [d]);
      assert.ok(Math.abs(s - c.embeddings[i][0]) <= 3e-2, `pair ${i}: ${s}`);
    });
    assert.deepEqual(bert.rerank('q', []), []);
  });

  it('refuses bad arguments', () => {
    assert.deepEqual(bert.embed([]), []);
    assert.throws(() => bert.embed(['a'], { pooling: 'max' }), RangeError);
    assert.throws(() => bert.embed(['a'], { pool: 'mean' }), TypeError);
    assert.throws(() => bert.embed([1]), TypeError);
    assert.throws(() => bert.embed(['a\0b']), RangeError);
    assert.throws(() => bert.embedTokens([[101, 1e6, 102]]), (e) => e instanceof MoonlmError);
    assert.throws(() => bert.embedTokens([[]]), (e) => e instanceof MoonlmError);
    assert.throws(() => bert.embedTokens([new Array(513).fill(101)]), (e) => e instanceof MoonlmError && /context/i.test(e.message));
  });
});

describe('embeddings of a decoder', { skip: h.skipReason('models/stories260K.gguf') }, () => {
  it('embeds with last-token pooling and has no reranker', async () => {
    const m = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 1 });
    try {
      const [v] = m.embed(['Once upon a time'], { pooling: 'last' });
      assert.equal(v.length, m.embeddingSize);
      assert.throws(() => m.rerank('q', ['d']), (e) => e instanceof MoonlmError && e.status === 4);
    } finally {
      m.close();
    }
  });
});
