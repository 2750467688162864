'use strict';
// Session state: prefixReuse counts what it evaluates, fork continues bit for
// bit, a saved state restores bit for bit (also in another process), bad
// states throw; Conversation reuses the prefix per turn.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const h = require('./helpers');

const { Model, MoonlmError, Conversation } = h.moonlm;
const skip = h.skipReason('models/stories260K.gguf');
const TEXT = 'Once upon a time, there was a little dog named Max. He liked to run and play';

function argmax(x) {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/** n greedy decode steps from logits; every step's logits as bytes. */
async function greedy(s, logits, n) {
  let cur = logits.slice();
  const out = [];
  for (let i = 0; i < n; i++) {
    cur = (await s.decode(argmax(cur))).slice();
    out.push(Buffer.from(cur.buffer).toString('hex'));
  }
  return out;
}

function commonPrefix(a, b) {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

describe('session state', { skip }, () => {
  let model;
  let toks;
  let tmp;
  before(async () => {
    model = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 2 });
    toks = model.tokenize(TEXT);
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'moonlm-state-'));
  });
  after(() => {
    if (model) model.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('prefillReuse evaluates only the new tokens', async () => {
    const s = model.session({ nCtx: 128 });
    const ref = model.session({ nCtx: 128 });
    await s.prefillReuse(toks.subarray(0, 6));
    assert.equal(s.lastEvaluated, 6);
    const got = (await s.prefillReuse(toks)).slice();
    assert.equal(s.lastEvaluated, toks.length - 6);
    const want = (await ref.prefill(toks)).slice();
    assert.deepEqual(Buffer.from(got.buffer), Buffer.from(want.buffer));
    assert.deepEqual(s.tokens, toks);
    assert.deepEqual(s.stats(), { nPos: toks.length, nCtx: 128, nEvaluated: toks.length, nReused: 6 });
    const again = (await s.prefillReuse(toks)).slice();
    assert.equal(s.lastEvaluated, 1);
    assert.deepEqual(Buffer.from(again.buffer), Buffer.from(want.buffer));
    await assert.rejects(s.prefillReuse([]), { code: 'INVALID_ARGUMENT' });
    await assert.rejects(s.prefillReuse([model.vocabSize]), { code: 'INVALID_ARGUMENT' });
    await assert.rejects(s.prefillReuse(new Array(129).fill(1)), { code: 'CONTEXT_FULL' });
    assert.equal(s.position, toks.length);
    s.close();
    ref.close();
  });

  it('fork continues bit for bit', async () => {
    const ref = model.session({ nCtx: 128 });
    const want = await greedy(ref, await ref.prefill(toks), 6);
    ref.close();
    const a = model.session({ nCtx: 128, kvType: 'f32' });
    const ra = model.session({ nCtx: 128, kvType: 'f32' });
    const wantF32 = await greedy(ra, await ra.prefill(toks), 6);
    ra.close();
    for (const [s, w] of [[model.session({ nCtx: 128 }), want], [a, wantF32]]) {
      const logits = (await s.prefill(toks)).slice();
      const b = s.fork();
      assert.equal(b.position, toks.length);
      assert.equal(b.kvType, s.kvType);
      assert.equal(b.stats().nEvaluated, 0);
      await s.decode(3);
      s.close();
      assert.deepEqual(await greedy(b, logits, 6), w);
      b.close();
      assert.throws(() => b.fork(), { code: 'INVALID_ARGUMENT' });
    }
  });

  it('saves and loads bytes and files', async () => {
    const s = model.session({ nCtx: 128 });
    const logits = (await s.prefill(toks)).slice();
    const data = s.saveState();
    const file = path.join(tmp, 'state.bin');
    assert.equal(s.saveState(file), undefined);
    assert.deepEqual(fs.readFileSync(file), data);
    const want = await greedy(s, logits, 6);
    s.close();
    const m2 = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 1 });
    for (const src of [data, new Uint8Array(data), file, new URL(`file://${file}`)]) {
      const r = m2.session({ nCtx: 100 });
      r.loadState(src);
      assert.deepEqual(r.tokens, toks);
      assert.deepEqual(await greedy(r, logits, 6), want);
      r.close();
    }
    m2.close();
  });

  it('refuses bad states and leaves the session as it was', async () => {
    const s = model.session({ nCtx: 128 });
    await s.prefill(toks);
    const good = s.saveState();
    s.close();
    const r = model.session({ nCtx: 128 });
    await r.prefill(toks.subarray(0, 3));
    const flipped = Buffer.from(good);
    flipped[flipped.length >> 1] ^= 1;
    for (const bad of [good.subarray(0, good.length - 1), flipped, Buffer.alloc(0), Buffer.concat([Buffer.from('MOONLMKV'), Buffer.alloc(200)])]) {
      assert.throws(() => r.loadState(bad), { code: 'BAD_FILE' });
    }
    const f32 = model.session({ nCtx: 128, kvType: 'f32' });
    assert.throws(() => f32.loadState(good), (e) => e instanceof MoonlmError && e.code === 'INVALID_ARGUMENT' && /KV cache/.test(e.message));
    f32.close();
    const small = model.session({ nCtx: toks.length - 1 });
    assert.throws(() => small.loadState(good), { code: 'CONTEXT_FULL' });
    small.close();
    const other = await Model.open(h.dataPath('models/tiny-random-llama.gguf'), { threads: 1 });
    const o = other.session({ nCtx: 64 });
    await o.prefill([1, 2, 3]);
    assert.throws(() => r.loadState(o.saveState()), (e) => e.code === 'INVALID_ARGUMENT' && /another model/.test(e.message));
    o.close();
    other.close();
    assert.throws(() => r.loadState(path.join(tmp, 'absent')), { code: 'IO' });
    assert.throws(() => r.loadState(42), TypeError);
    assert.throws(() => r.saveState(''), RangeError);
    assert.equal(r.position, 3);
    r.close();
  });

  it('restores in another process bit for bit', () => {
    const file = path.join(tmp, 'xproc.bin');
    const child = `const m = require(${JSON.stringify(path.resolve(__dirname, '..'))});
      const [mode, modelPath, file, text, start] = process.argv.slice(1);
      const argmax = (x) => x.reduce((b, v, i) => (v > x[b] ? i : b), 0);
      (async () => {
        const model = await m.Model.open(modelPath, { threads: 1 });
        const s = model.session({ nCtx: 128 });
        let logits;
        if (mode === 'save') {
          logits = (await s.prefill(model.tokenize(text))).slice();
          s.saveState(file);
        } else {
          s.loadState(file);
          const b = Buffer.from(start, 'hex');
          logits = new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
        }
        const steps = [];
        let cur = logits;
        for (let i = 0; i < 6; i++) {
          cur = (await s.decode(argmax(cur))).slice();
          steps.push(Buffer.from(cur.buffer).toString('hex'));
        }
        console.log(JSON.stringify({ start: Buffer.from(logits.buffer).toString('hex'), steps }));
        s.close(); model.close();
      })().catch((e) => { console.error(e); process.exit(1); });`;
    const run = (...args) => JSON.parse(execFileSync(process.execPath,
      ['-e', child, ...args], { encoding: 'utf8', env: process.env }));
    const modelPath = h.dataPath('models/stories260K.gguf');
    const saved = run('save', modelPath, file, TEXT, '');
    const restored = run('load', modelPath, file, TEXT, saved.start);
    assert.deepEqual(restored.steps, saved.steps);
  });

  it('Conversation reuses the prefix on every turn', async () => {
    const chat = new Conversation(model, { system: 'Tell a story.', template: 'chatml', nCtx: 512 });
    const r1 = await chat.send('Once upon a time', { maxTokens: 12, temperature: 0 });
    assert.equal(chat.lastEvaluated, chat.lastPromptTokens);
    assert.deepEqual(chat.messages.at(-1), { role: 'assistant', content: r1 });
    assert.equal(r1, await model.chat(chat.messages.slice(0, -1), { maxTokens: 12, temperature: 0, template: 'chatml' }));
    let first = chat.lastPromptTokens;
    for (const turn of ['And then?', 'Who was there?']) {
      const held = chat.session.tokens;
      const want = await model.chat([...chat.messages, { role: 'user', content: turn }],
        { maxTokens: 12, temperature: 0, template: 'chatml' });
      assert.equal(await chat.send(turn, { maxTokens: 12, temperature: 0 }), want);
      const kept = commonPrefix(held, chat.session.tokens.subarray(0, chat.lastPromptTokens));
      assert.ok(kept >= first, 'the earlier turns are reused');
      assert.equal(chat.lastEvaluated, chat.lastPromptTokens - kept);
      first = chat.lastPromptTokens;
    }
    const pieces = [];
    for await (const p of chat.sendStream('The end.', { maxTokens: 6, temperature: 0 })) pieces.push(p);
    assert.equal(chat.messages.at(-1).content, pieces.join(''));
    const branch = chat.fork();
    assert.deepEqual(branch.session.tokens, chat.session.tokens);
    assert.equal(await branch.send('More', { maxTokens: 6, temperature: 0 }),
      await chat.send('More', { maxTokens: 6, temperature: 0 }));
    assert.equal(branch.lastEvaluated, chat.lastEvaluated);
    assert.throws(() => chat.sendStream('x', { temprature: 0 }), TypeError);
    assert.equal(chat.messages.at(-1).role, 'assistant', 'a refused turn adds nothing');
    assert.throws(() => new Conversation('model'), TypeError);
    branch.close();
    chat.close();
  });

  it('a q8_0 cache saves, restores and forks bit for bit', async (t) => {
    const sm = h.defaultModel('SmolLM2-135M-Instruct.Q4_1.gguf');
    if (sm.skip) { t.skip(sm.skip); return; }
    assert.throws(() => model.session({ nCtx: 16, kvType: 'q8_0' }), { code: 'UNSUPPORTED' });
    const m = await Model.open(sm.path);
    const s = m.session({ nCtx: 64, kvType: 'q8_0' });
    const logits = (await s.prefill(m.tokenize('The three primary colors are'))).slice();
    const data = s.saveState();
    const f = s.fork();
    assert.equal(f.kvType, 'q8_0');
    const want = await greedy(s, logits, 3);
    const r = m.session({ nCtx: 64, kvType: 'q8_0' });
    r.loadState(data);
    assert.deepEqual(await greedy(f, logits, 3), want);
    assert.deepEqual(await greedy(r, logits, 3), want);
    const f16 = m.session({ nCtx: 64 });
    assert.throws(() => f16.loadState(data), { code: 'INVALID_ARGUMENT' });
    for (const x of [s, f, r, f16]) x.close();
    m.close();
  });
});
