'use strict';
// Errors are MoonlmError with the status code and the library's message.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { execFileSync } = require('node:child_process');
const h = require('./helpers');

const { Model, Sampler, MoonlmError, Status } = h.moonlm;
const skip = h.skipReason('models/stories260K.gguf');

describe('errors', { skip }, () => {
  let model;
  let tmp;
  before(async () => {
    model = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 2 });
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'moonlm-node-'));
  });
  after(() => {
    if (model) model.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('rejects a missing file with IO and the library\'s message', async () => {
    const missing = path.join(tmp, 'nope.gguf');
    await assert.rejects(Model.open(missing), (e) => {
      assert.ok(e instanceof MoonlmError);
      assert.equal(e.code, 'IO');
      assert.equal(e.status, Status.IO);
      assert.match(e.message, /nope\.gguf/);
      assert.match(e.message, /moonlm_model_open/); // the library's own wording
      return true;
    });
  });

  for (const [name, bytes] of [
    ['empty', Buffer.alloc(0)],
    ['not-gguf', Buffer.from('not a gguf file at all'.repeat(10))],
    ['garbage-header', Buffer.concat([Buffer.from('GGUF'), Buffer.from([3, 0, 0, 0]), Buffer.alloc(64, 0xff)])],
  ]) {
    it(`rejects a corrupt file (${name})`, async () => {
      const bad = path.join(tmp, `bad-${name}.gguf`);
      fs.writeFileSync(bad, bytes);
      await assert.rejects(Model.open(bad), (e) => {
        assert.ok(e instanceof MoonlmError);
        assert.ok(e.code === 'BAD_FILE' || e.code === 'IO', e.code);
        assert.match(e.message, /bad-/);
        return true;
      });
    });
  }

  it('rejects a truncated model with BAD_FILE', async () => {
    const data = fs.readFileSync(h.dataPath('models/stories260K.gguf'));
    const cut = path.join(tmp, 'cut.gguf');
    fs.writeFileSync(cut, data.subarray(0, data.length >> 1));
    await assert.rejects(Model.open(cut), { code: 'BAD_FILE' });
  });

  it('reports a full context with CONTEXT_FULL and the library\'s message', async () => {
    const toks = model.tokenize('Once upon a time, there was a little girl');
    assert.ok(toks.length > 8);
    const s = model.session({ nCtx: 8 });
    await assert.rejects(s.prefill(toks), (e) => {
      assert.equal(e.code, 'CONTEXT_FULL');
      assert.match(e.message, /moonlm_prefill/);
      return true;
    });
    assert.equal(s.position, 0);
    await s.prefill(toks.subarray(0, 8));
    await assert.rejects(s.decode(toks[8]), { code: 'CONTEXT_FULL' });
    assert.equal(s.position, 8);
    s.close();
    const long = new Int32Array(model.contextLength + 1).fill(403);
    long[0] = 1;
    await assert.rejects(model.generate(long, { maxTokens: 4 }), { code: 'CONTEXT_FULL' });
  });

  it('ends generation quietly at the end of an explicit small context', async () => {
    const text = await model.generate('Once upon a time', { maxTokens: 100, temperature: 0, nCtx: 8 });
    assert.equal(text, await model.generate('Once upon a time', { maxTokens: 4, temperature: 0 }));
  });

  it('rejects bad arguments', async () => {
    const s = model.session();
    await assert.rejects(s.decode(model.vocabSize), { code: 'INVALID_ARGUMENT' });
    await assert.rejects(s.prefill([]), { code: 'INVALID_ARGUMENT' });
    assert.equal(s.position, 0);
    s.close();
    assert.throws(() => model.session({ nCtx: 0 }), { code: 'INVALID_ARGUMENT' });
    assert.throws(() => model.session({ kvType: 'q4' }), { code: 'INVALID_ARGUMENT' });
    assert.throws(() => model.stream('', { addSpecial: false }), { code: 'INVALID_ARGUMENT' });
    assert.throws(() => model.applyChatTemplate([{ role: 'user', content: 5 }]), { code: 'INVALID_ARGUMENT' });
    assert.throws(() => model.stream('x', { maxTokens: -1 }), { code: 'INVALID_ARGUMENT' });
  });

  it('gives async failures the library\'s message, kept on the session', async () => {
    const s = model.session();
    const toks = model.tokenize('Once upon a time');
    s.cancel();
    await assert.rejects(s.prefill(toks), (e) => {
      assert.equal(e.code, 'CANCELLED');
      // The library's wording, not the binding's fallback "prefill: cancelled".
      assert.match(e.message, /^moonlm_prefill: cancelled by moonlm_session_cancel/);
      return true;
    });
    assert.equal(s.position, 0);
    await s.prefill(toks);
    await assert.rejects(s.decode(model.vocabSize), (e) => {
      assert.equal(e.code, 'INVALID_ARGUMENT');
      assert.match(e.message, new RegExp(`^moonlm_decode: token ${model.vocabSize} .*outside the vocabulary`));
      return true;
    });
    s.close();
  });

  it('reports an internal error in an async call with the library\'s message', () => {
    // A panic on a pool worker (armed at load time by MOONLM_DEBUG_PANIC),
    // in a child process so the hook cannot affect the other tests.
    const src = `
      const { Model } = require(${JSON.stringify(path.resolve(__dirname, '..'))});
      (async () => {
        const m = await Model.open(process.argv[1], { threads: 2 });
        const s = m.session();
        let out;
        try { await s.prefill([1, 100, 200, 300]); out = { ok: true }; } catch (e) { out = { code: e.code, message: e.message }; }
        await s.prefill([1, 100, 200, 300]); // the hook fires once: the session still works
        s.close(); m.close();
        process.stdout.write(JSON.stringify(out));
      })().catch((e) => { console.error(e); process.exit(1); });`;
    const stdout = execFileSync(process.execPath, ['-e', src, h.dataPath('models/stories260K.gguf')], {
      env: { ...process.env, MOONLM_DEBUG_PANIC: 'worker' }, encoding: 'utf8', timeout: 60000,
    });
    const got = JSON.parse(stdout);
    assert.equal(got.code, 'INTERNAL', stdout);
    assert.match(got.message, /^moonlm_prefill: .*panic/);
    assert.match(got.message, /MOONLM_DEBUG_PANIC=worker/);
  });

  it('reports BUSY for a second call on a busy session', async () => {
    const s = model.session();
    const toks = model.tokenize('Once upon a time');
    const first = s.prefill(toks);
    await assert.rejects(s.decode(403), { code: 'BUSY' });
    await first;
    assert.equal(s.position, toks.length);
    s.close();
  });

  it('fails cleanly after close', async () => {
    const m = await Model.open(h.dataPath('models/stories260K.gguf'));
    const s = m.session();
    m.close();
    m.close(); // idempotent
    assert.ok(m.closed);
    for (const call of [() => m.tokenize('hi'), () => m.detokenize([1]), () => m.session(), () => m.isEog(2),
      () => m.stream('hi')]) {
      assert.throws(call, (e) => e instanceof MoonlmError && e.code === 'INVALID_ARGUMENT' && /closed/.test(e.message));
    }
    await assert.rejects(m.generate('hi'), { code: 'INVALID_ARGUMENT' });
    // a session outlives its model's handle
    await s.prefill([1, 403]);
    s.close();
    s.close();
    await assert.rejects(s.decode(407), (e) => e.code === 'INVALID_ARGUMENT' && /closed/.test(e.message));
    assert.throws(() => s.position, { code: 'INVALID_ARGUMENT' });
    s.cancel(); // harmless
    const sm = new Sampler();
    sm.close();
    assert.throws(() => sm.sample([0, 1]), { code: 'INVALID_ARGUMENT' });
  });

  it('has no chat without a template', async () => {
    assert.throws(() => model.chatStream([{ role: 'user', content: 'hi' }]), { code: 'UNSUPPORTED' });
    await assert.rejects(model.chat([{ role: 'user', content: 'hi' }]), { code: 'UNSUPPORTED' });
  });
});
