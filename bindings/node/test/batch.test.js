'use strict';
// Batched decoding: decodeBatch advances several sessions in one step with
// each session's logits bit for bit those it gets alone; a bad entry fails
// alone; Batcher runs one step for every waiting caller.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const { Model, MoonlmError, Status, decodeBatch, maxBatchTokens, Batcher } = h.moonlm;
const skip = h.skipReason('models/stories260K.gguf');
const PROMPTS = ['Once upon a time, there was a little dog named Max.', 'The cat sat', 'Tom and Lily went to the park to play'];

function argmax(x) {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

const hex = (x) => Buffer.from(Float32Array.from(x).buffer).toString('hex');

/** Prefill then n greedy decodes on a fresh session: every step's logits. */
async function alone(model, toks, n, nCtx = 128) {
  const s = model.session({ nCtx });
  try {
    let cur = (await s.prefill(toks)).slice();
    const out = [hex(cur)];
    for (let i = 0; i < n; i++) {
      cur = (await s.decode(argmax(cur))).slice();
      out.push(hex(cur));
    }
    return out;
  } finally {
    s.close();
  }
}

/**
 * Three sessions stepped together for six steps (the prompts prefilled in
 * the first) equal each alone, bit for bit.
 */
async function matchesAlone(model) {
  const prompts = PROMPTS.map((p) => model.tokenize(p));
  const want = [];
  for (const t of prompts) want.push(await alone(model, t, 5));
  const sessions = prompts.map(() => model.session({ nCtx: 128 }));
  try {
    const got = prompts.map(() => []);
    let entries = sessions.map((s, i) => [s, prompts[i]]);
    for (let step = 0; step < 6; step++) {
      assert.deepEqual(await decodeBatch(model, entries), entries.map(() => null));
      sessions.forEach((s, i) => got[i].push(hex(s.logits)));
      entries = sessions.map((s) => [s, argmax(s.logits)]);
    }
    assert.deepEqual(got, want);
    assert.deepEqual(sessions.map((s) => s.position), prompts.map((p) => p.length + 5));
  } finally {
    for (const s of sessions) s.close();
  }
}

// The synthetic gemma4 (layers of different shapes) and Qwen3.5 (recurrent
// layers beside attention, whose state each session keeps) batch too. The
// sha256 are those engine/synth_models_test.go records.
const SYNTH = [
  ['synth-gemma4-Q8_0.gguf', 'c79c939b0cf5f1dc2fbc89ededb1f9f5a719d8bdb61abc7122c658946b2c1947'],
  ['synth-qwen35-Q8_0.gguf', 'ff75b3713cc28c5ae9f04279e1b1b5c2181fa3ec68fd351b02f9153dd89ca615'],
];

describe('batched decoding of the synthetic gemma4 and qwen35', () => {
  for (const [name, sha256] of SYNTH) {
    const sm = h.synthModel(name, sha256);
    it(`${name}: decodeBatch equals each session alone, bit for bit`, { skip: sm.skip }, async () => {
      const m = await Model.open(sm.path, { threads: 2 });
      try {
        await matchesAlone(m);
      } finally {
        m.close();
      }
    });
  }
});

describe('batched decoding', { skip }, () => {
  let model;
  before(async () => { model = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 2 }); });
  after(() => model?.close());

  it('decodeBatch equals each session alone, bit for bit', async () => {
    await matchesAlone(model);
  });

  it('a bad entry fails alone', async () => {
    const a = model.session({ nCtx: 16 }), b = model.session({ nCtx: 16 }), c = model.session({ nCtx: 16 });
    try {
      const errs = await decodeBatch(model, [[a, [1, 2]], [b, [model.vocabSize]], [c, 5]]);
      assert.equal(errs[0], null);
      assert.equal(errs[2], null);
      assert.ok(errs[1] instanceof MoonlmError);
      assert.equal(errs[1].status, Status.INVALID_ARGUMENT);
      assert.deepEqual([a.position, b.position, c.position], [2, 0, 1]);
      const full = await decodeBatch(model, [[c, Array.from({ length: 16 }, (_, i) => i + 1)]]);
      assert.equal(full[0].status, Status.CONTEXT_FULL);
      await assert.rejects(decodeBatch(model, [[a, 1], [a, 2]]), (e) => e.status === Status.BUSY);
      assert.throws(() => maxBatchTokens('x'), TypeError);
      assert.deepEqual(await decodeBatch(model, []), []);
    } finally {
      a.close(); b.close(); c.close();
    }
  });

  it('Batcher runs one step for every waiting caller', async () => {
    const prompts = PROMPTS.map((p) => model.tokenize(p));
    const n = 6;
    const want = [];
    for (const t of prompts) want.push(await alone(model, t, n));
    const b = new Batcher(model);
    const sessions = prompts.map(() => model.session({ nCtx: 128 }));
    try {
      const got = await Promise.all(sessions.map(async (s, i) => {
        const out = [hex(await b.decode(s, prompts[i]))];
        for (let k = 0; k < n; k++) {
          const last = Buffer.from(out[out.length - 1], 'hex');
          out.push(hex(await b.decode(s, argmax(new Float32Array(last.buffer, last.byteOffset, last.length / 4)))));
        }
        return out;
      }));
      assert.deepEqual(got, want);
      assert.equal(b.steps, n + 1, 'every caller\'s tokens went in the same steps');
    } finally {
      for (const s of sessions) s.close();
    }
  });

  it('Batcher feeds a long prompt in chunks', async () => {
    const toks = model.tokenize(Array(8).fill(PROMPTS.join(' ')).join(' '));
    assert.ok(toks.length > maxBatchTokens(model));
    const want = (await alone(model, toks, 0, 512))[0];
    const b = new Batcher(model);
    const s = model.session({ nCtx: 512 });
    try {
      assert.equal(hex(await b.decode(s, toks)), want);
      assert.ok(b.steps >= 2);
    } finally {
      s.close();
    }
  });
});

/** The checkpoints a fresh session holds after one prefill per chunk. */
async function checkpointPositions(model, chunks) {
  const s = model.session({ nCtx: 512 });
  try {
    for (const c of chunks) await s.prefill(c);
    return s.checkpoints().positions;
  } finally {
    s.close();
  }
}

// A prompt fed in chunks to the synthetic Qwen3.5 (a hybrid model, whose
// sessions keep checkpoints of their recurrent state): marked continues but
// the last, the chunks are checkpointed as one prefill; unmarked, as one
// prefill each.
describe('continues on the synthetic qwen35', () => {
  const sm = h.synthModel(...SYNTH[1]);
  let m;
  before(async () => { if (!sm.skip) m = await Model.open(sm.path, { threads: 2 }); });
  after(() => m?.close());

  it('decodeBatch: chunks marked continues are one prefill for the checkpoints', { skip: sm.skip }, async () => {
    const toks = Array.from(m.tokenize(PROMPTS[0]));
    assert.ok(toks.length >= 12);
    const chunks = [0, 4, 8].map((i) => toks.slice(i, i + 4));
    const joined = await checkpointPositions(m, [toks.slice(0, 12)]);
    const split = await checkpointPositions(m, chunks);
    assert.notDeepEqual(joined, split, 'the test needs chunks that leave checkpoints of their own');
    const a = m.session({ nCtx: 128 }), b = m.session({ nCtx: 128 });
    try {
      for (let k = 0; k < chunks.length; k++) {
        const la = await decodeBatch(m, [[a, chunks[k], { continues: k + 1 < chunks.length }], [b, chunks[k]]]);
        assert.deepEqual(la, [null, null]);
      }
      assert.deepEqual(a.checkpoints().positions, joined);
      assert.deepEqual(b.checkpoints().positions, split);
      assert.equal(hex(a.logits), hex(b.logits));
      await assert.rejects(decodeBatch(m, [[a, 1, { continues: 'yes' }]]), TypeError);
      await assert.rejects(decodeBatch(m, [[a, 1, true]]), TypeError);
    } finally {
      a.close(); b.close();
    }
  });

  it('Batcher marks a long prompt\'s chunks, and a caller\'s own with opts.continues', { skip: sm.skip }, async () => {
    const toks = Array.from(m.tokenize(Array(4).fill(PROMPTS.join(' ')).join(' ')));
    const step = maxBatchTokens(m);
    assert.ok(toks.length > step && toks.length <= 512);
    const joined = await checkpointPositions(m, [toks]);
    const chunks = [];
    for (let i = 0; i < toks.length; i += step) chunks.push(toks.slice(i, i + step));
    assert.notDeepEqual(joined, await checkpointPositions(m, chunks));
    const b = new Batcher(m);
    const s = m.session({ nCtx: 512 }), t = m.session({ nCtx: 512 });
    try {
      await b.decode(s, toks);
      assert.ok(b.steps >= 2);
      assert.deepEqual(s.checkpoints().positions, joined);
      await b.decode(t, toks.slice(0, 5), { continues: true });
      await b.decode(t, toks.slice(5));
      assert.deepEqual(t.checkpoints().positions, joined);
      assert.throws(() => b.decode(t, 1, { continues: 1 }), TypeError);
    } finally {
      s.close(); t.close();
    }
  });
});
