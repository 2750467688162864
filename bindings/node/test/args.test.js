'use strict';
// Every value crossing the ABI is checked by the binding: a wrong type is a
// TypeError, a value out of range a RangeError, both with code
// 'INVALID_ARGUMENT', naming the parameter, and still a MoonlmError. Nothing
// is coerced ("abc" -> [0,0,0], 5.9 -> 5, 2**32+300 -> 300).
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const { Model, Session, Sampler, MoonlmError } = h.moonlm;
const skip = h.skipReason('models/stories260K.gguf');

/** A matcher for assert.throws/rejects: the class, the code, the parameter named. */
function bad(Ctor, param) {
  return (e) => {
    assert.ok(e instanceof Ctor, `${e && e.name}: ${e && e.message} (want ${Ctor.name})`);
    assert.ok(e instanceof MoonlmError, 'an argument error is a MoonlmError too');
    assert.equal(e.code, 'INVALID_ARGUMENT');
    assert.equal(e.status, 1);
    assert.equal(e.param, param);
    assert.ok(e.message.includes(param), `${e.message} names ${param}`);
    return true;
  };
}

describe('argument checks', { skip }, () => {
  let model;
  let s;
  before(async () => {
    model = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 2 });
    s = model.session({ nCtx: 64 });
  });
  after(() => {
    if (s) s.close();
    if (model) model.close();
  });

  it('prefill refuses what is not token ids, and the position stays', async () => {
    await assert.rejects(s.prefill('abc'), bad(TypeError, 'tokens'));
    await assert.rejects(s.prefill(Buffer.from('Hello')), bad(TypeError, 'tokens'));
    await assert.rejects(s.prefill(new Uint8Array([1, 2])), bad(TypeError, 'tokens'));
    await assert.rejects(s.prefill(5), bad(TypeError, 'tokens'));
    await assert.rejects(s.prefill(null), bad(TypeError, 'tokens'));
    await assert.rejects(s.prefill([1.5, NaN]), bad(RangeError, 'tokens[0]'));
    await assert.rejects(s.prefill([1, NaN]), bad(RangeError, 'tokens[1]'));
    await assert.rejects(s.prefill([1, '2']), bad(TypeError, 'tokens[1]'));
    await assert.rejects(s.prefill([1, 2 ** 32 + 300]), bad(RangeError, 'tokens[1]'));
    await assert.rejects(s.prefill([1, -1]), bad(RangeError, 'tokens[1]'));
    assert.equal(s.position, 0);
    await s.prefill([1, 403]); // arrays of integers and other typed arrays are fine
    await s.prefill(new Float64Array([407]));
    assert.equal(s.position, 3);
    s.rewind(0);
  });

  it('decode refuses fractions, huge values and non-numbers', async () => {
    await s.prefill([1]);
    for (const v of [5.9, 2 ** 32 + 300, -1, NaN, Infinity]) {
      await assert.rejects(s.decode(v), bad(RangeError, 'token'), String(v));
    }
    for (const v of ['5', 5n, null, undefined, [5]]) {
      await assert.rejects(s.decode(v), bad(TypeError, 'token'), String(v));
    }
    assert.equal(s.position, 1);
    s.rewind(0);
  });

  it('checks tokens everywhere else they cross the ABI', () => {
    assert.throws(() => model.isEog(2 ** 32 + 2), bad(RangeError, 'token'));
    assert.throws(() => model.isEog('2'), bad(TypeError, 'token'));
    assert.throws(() => model.tokenToPiece(2 ** 32 + 300), bad(RangeError, 'token'));
    assert.throws(() => model.detokenize('abc'), bad(TypeError, 'tokens'));
    assert.throws(() => model.detokenize([1, 2.5]), bad(RangeError, 'tokens[1]'));
    assert.throws(() => model.stream(Buffer.from('Hello')), bad(TypeError, 'prompt'));
    assert.throws(() => model.stream([1, 2 ** 32 + 403]), bad(RangeError, 'prompt[1]'));
    assert.throws(() => s.stream('abc'), bad(TypeError, 'tokens'));
    const sm = new Sampler();
    assert.throws(() => sm.accept(2 ** 32 + 5), bad(RangeError, 'token'));
    assert.throws(() => sm.sample('abc'), bad(TypeError, 'logits'));
    assert.throws(() => sm.sample([0, 'x']), bad(TypeError, 'logits[1]'));
    sm.close();
  });

  it('refuses unknown option names in every call that takes options', async () => {
    assert.throws(() => model.stream('Once', { max_tokens: 5 }), bad(TypeError, 'opts.max_tokens'));
    await assert.rejects(model.generate('Once', { max_tokens: 5 }), bad(TypeError, 'opts.max_tokens'));
    await assert.rejects(Model.open(h.dataPath('models/stories260K.gguf'), { nThreads: 2 }), bad(TypeError, 'opts.nThreads'));
    assert.throws(() => model.session({ n_ctx: 8 }), bad(TypeError, 'opts.n_ctx'));
    assert.throws(() => new Sampler({ top_k: 5 }), bad(TypeError, 'opts.top_k'));
    assert.throws(() => model.tokenize('x', { add_special: false }), bad(TypeError, 'opts.add_special'));
    assert.throws(() => model.applyChatTemplate([], { add_assistant: false }), bad(TypeError, 'opts.add_assistant'));
    assert.throws(() => model.chatStream([{ role: 'user', content: 'hi' }], { addSpecial: false }), bad(TypeError, 'opts.addSpecial'));
    assert.throws(() => s.stream([1], { nCtx: 5 }), bad(TypeError, 'opts.nCtx'));
    assert.throws(() => model.stream('Once', 5), bad(TypeError, 'opts'));
  });

  it('checks the options\' types and ranges', async () => {
    const p = h.dataPath('models/stories260K.gguf');
    await assert.rejects(Model.open(p, { threads: 'four' }), bad(TypeError, 'opts.threads'));
    await assert.rejects(Model.open(p, { threads: 2 ** 32 + 2 }), bad(RangeError, 'opts.threads'));
    await assert.rejects(Model.open(p, { threads: 1.5 }), bad(RangeError, 'opts.threads'));
    await assert.rejects(Model.open(p, { pack: 1 }), bad(TypeError, 'opts.pack'));
    await assert.rejects(Model.open(p, { pack: 'yes' }), bad(RangeError, 'opts.pack'));
    await assert.rejects(Model.open(p, { numerics: 3 }), bad(TypeError, 'opts.numerics'));
    await assert.rejects(Model.open(p, { packedCacheBytes: -1 }), bad(RangeError, 'opts.packedCacheBytes'));
    await assert.rejects(Model.open(p, { packedCacheBytes: 2 ** 64 }), bad(RangeError, 'opts.packedCacheBytes'));
    await assert.rejects(Model.open(p, { packedCacheDir: 'a\0b' }), bad(RangeError, 'opts.packedCacheDir'));
    await assert.rejects(Model.open(`${p}\0.txt`), bad(RangeError, 'path'));
    await assert.rejects(Model.open(Buffer.from(p)), bad(TypeError, 'path'));
    assert.throws(() => model.session({ nCtx: 2 ** 32 + 16 }), bad(RangeError, 'opts.nCtx'));
    assert.throws(() => model.session({ nCtx: '16' }), bad(TypeError, 'opts.nCtx'));
    assert.throws(() => model.session({ threads: -1 }), bad(RangeError, 'opts.threads'));
    assert.throws(() => model.session({ kvType: 'q4' }), bad(RangeError, 'opts.kvType'));
    assert.throws(() => model.session({ kvType: 1 }), bad(TypeError, 'opts.kvType'));
    assert.throws(() => new Session({}), bad(TypeError, 'model'));
    assert.throws(() => new Sampler({ topK: 2 ** 32 - 5 }), bad(RangeError, 'opts.topK'));
    assert.throws(() => new Sampler({ penaltyLastN: 2 ** 31 }), bad(RangeError, 'opts.penaltyLastN'));
    assert.throws(() => new Sampler({ temperature: '0.5' }), bad(TypeError, 'opts.temperature'));
    assert.throws(() => new Sampler({ temperature: NaN }), bad(RangeError, 'opts.temperature'));
    assert.throws(() => new Sampler({ topP: 1e39 }), bad(RangeError, 'opts.topP'));
    assert.throws(() => new Sampler({ seed: -1 }), bad(RangeError, 'opts.seed'));
    assert.throws(() => new Sampler({ seed: 2n ** 64n - 1n }), bad(RangeError, 'opts.seed'));
    assert.throws(() => new Sampler({ seed: 1.5 }), bad(RangeError, 'opts.seed'));
    assert.throws(() => new Sampler({ seed: '1' }), bad(TypeError, 'opts.seed'));
    assert.throws(() => model.stream('Once', { topK: 2 ** 32 - 5 }), bad(RangeError, 'opts.topK'));
    assert.throws(() => model.stream('Once', { maxTokens: 2.5 }), bad(RangeError, 'opts.maxTokens'));
    assert.throws(() => model.stream('Once', { maxTokens: '5' }), bad(TypeError, 'opts.maxTokens'));
    assert.throws(() => model.stream('Once', { nCtx: 2 ** 32 + 16 }), bad(RangeError, 'opts.nCtx'));
    assert.throws(() => model.stream('Once', { stop: 5 }), bad(TypeError, 'stop'));
    assert.throws(() => model.stream('Once', { stop: ['ok', 5] }), bad(TypeError, 'stop[1]'));
    assert.throws(() => model.stream('Once', { signal: {} }), bad(TypeError, 'opts.signal'));
    assert.throws(() => model.stream('Once', { addSpecial: 0 }), bad(TypeError, 'opts.addSpecial'));
    assert.throws(() => model.tokenize('x', { parseSpecial: 'yes' }), bad(TypeError, 'opts.parseSpecial'));
    assert.throws(() => model.tokenize(5), bad(TypeError, 'text'));
    assert.throws(() => s.rewind(2 ** 64), bad(RangeError, 'nKeep'));
    assert.throws(() => s.rewind('0'), bad(TypeError, 'nKeep'));
    const sm = new Sampler();
    assert.throws(() => s.stream([1], { sampler: {} }), bad(TypeError, 'opts.sampler'));
    assert.throws(() => s.stream([1], { sampler: sm, topK: 5 }), bad(TypeError, 'opts.topK'));
    sm.close();
    assert.throws(() => s.stream([1], { stop: 5 }), bad(TypeError, 'stop'));
  });

  it('refuses malformed chat messages', () => {
    const what = (m) => () => model.applyChatTemplate(m);
    assert.throws(what({ role: 'user', content: 'hi' }), bad(TypeError, 'messages'));
    assert.throws(what([{ role: 'user' }]), bad(TypeError, 'messages[0].content'));
    assert.throws(what([{ role: 'user', content: 'a' }, { content: 'hi' }]), bad(TypeError, 'messages[1].role'));
    assert.throws(what([{ role: 5, content: 'hi' }]), bad(TypeError, 'messages[0].role'));
    assert.throws(what([{ role: 'user', content: 5 }]), bad(TypeError, 'messages[0].content'));
    assert.throws(what([{ role: 'user', content: 'a\0b' }]), bad(RangeError, 'messages[0].content'));
    assert.throws(what(['hi']), bad(TypeError, 'messages[0]'));
    assert.throws(() => model.chatStream([{ role: 'user' }]), bad(TypeError, 'messages[0].content'));
    assert.throws(() => model.applyChatTemplate([], { template: 5 }), bad(TypeError, 'opts.template'));
    assert.throws(() => model.chatStream([{ role: 'user', content: 'hi' }], { template: 'chat\0ml' }), bad(RangeError, 'opts.template'));
  });

  it('the same calls with good values work', async () => {
    const text = await model.generate([1, 403], { maxTokens: 3, temperature: 0, seed: 5n, stop: ['zzz'] });
    assert.equal(typeof text, 'string');
    const sm = new Sampler({ topK: 5, seed: 2 ** 53 - 1, penaltyLastN: -1 });
    assert.ok(sm.sample([0, 1, 0.5]) === 1);
    sm.close();
  });
});
