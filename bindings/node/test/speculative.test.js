'use strict';
// Speculative decoding (opts.draft) and the structured-output and
// log-probability options of Session.stream.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const { Model, Grammar, Sampler, MoonlmError } = h.moonlm;
const smol = h.defaultModel('SmolLM2-135M-Instruct.Q4_1.gguf');
const skip = h.skipReason('models/stories260K.gguf');
const PROMPT = 'Once upon a time, there was a little dog named Max. He liked to run';

async function collect(stream) {
  let text = '';
  for await (const piece of stream) text += piece;
  return text;
}

describe('speculative decoding on stories260K', { skip }, () => {
  let model;
  before(async () => { model = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 1 }); });
  after(() => model.close());

  it('greedy output with prompt lookup or a draft model is the plain output', async () => {
    const plain = await model.generate(PROMPT, { maxTokens: 80, temperature: 0, details: true });
    const look = await model.generate(PROMPT, { maxTokens: 80, temperature: 0, details: true, draft: 'lookup' });
    const drafted = await model.generate(PROMPT, { maxTokens: 80, temperature: 0, details: true, draft: model, draftTokens: 4 });
    assert.deepEqual(look.tokens, plain.tokens);
    assert.equal(look.text, plain.text);
    assert.deepEqual(drafted.tokens, plain.tokens);
    assert.equal(plain.drafted, 0);
    assert.ok(look.drafted > 0 && look.draftAccepted <= look.drafted);
    assert.ok(drafted.draftAccepted > 0);
  });

  it('Session.stream drafts with a Session of the draft model', async () => {
    const toks = model.tokenize('Once upon a time');
    const s = model.session({ nCtx: 256 });
    const ds = model.session({ nCtx: 256 });
    try {
      const st = s.stream(toks, { maxTokens: 40, temperature: 0, draft: ds, draftTokens: 5 });
      const text = await collect(st);
      assert.ok(st.completion.draftAccepted > 0);
      assert.equal(text, await model.generate(toks, { maxTokens: 40, temperature: 0 }));
      assert.throws(() => s.stream(toks, { maxTokens: 4, draft: s }), /session of its own/);
    } finally {
      s.close();
      ds.close();
    }
  });

  it('refuses bad draft options', async () => {
    await assert.rejects(model.generate('Hi', { maxTokens: 4, draft: 'ngram' }), RangeError);
    await assert.rejects(model.generate('Hi', { maxTokens: 4, draft: 3 }), TypeError);
    await assert.rejects(model.generate('Hi', { maxTokens: 4, draft: 'lookup', draftTokens: 65 }), RangeError);
    await assert.rejects(model.generate('Hi', { maxTokens: 4, draftTokens: 4 }), /needs opts.draft/);
  });
});

describe('Session.stream options on SmolLM2', { skip: smol.skip || skip }, () => {
  let model;
  before(async () => { model = await Model.open(smol.path, { threads: 2 }); });
  after(() => model.close());

  it('takes jsonSchema, grammar and logprobs', async () => {
    const schema = {
      type: 'object',
      properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0 } },
      required: ['name', 'age'], additionalProperties: false,
    };
    const prompt = model.applyChatTemplate([{ role: 'user', content: 'A person as JSON.' }], { addAssistant: true });
    const toks = model.tokenize(prompt, { parseSpecial: true });
    const s = model.session({ nCtx: 512 });
    const sampler = new Sampler({ temperature: 1.2, seed: 5 });
    try {
      const st = s.stream(toks, { maxTokens: 200, sampler, jsonSchema: schema, logprobs: true, topLogprobs: 3 });
      const v = JSON.parse(await collect(st));
      assert.deepEqual(Object.keys(v).sort(), ['age', 'name']);
      assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.name.length <= 10);
      const c = st.completion;
      assert.equal(c.finishReason, 'eog');
      assert.equal(c.logprobs.content.length, c.completionTokens);
      assert.ok(c.logprobs.content.every((e) => e.logprob <= 0 && e.topLogprobs.length <= 3));
      s.rewind(0);
      const g = new Grammar(model, 'root ::= "yes" | "no"');
      assert.ok(['yes', 'no'].includes(await collect(s.stream(toks, { maxTokens: 10, sampler, grammar: g }))));
      g.close();
      assert.throws(() => s.stream(toks, { topLogprobs: 2 }), /needs opts.logprobs/);
      // A draft model of another vocabulary is refused by the library.
      const stories = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 1 });
      try {
        await assert.rejects(model.generate('Hi', { maxTokens: 4, draft: stories }), /vocabularies differ/);
      } finally {
        stories.close();
      }
    } finally {
      sampler.close();
      s.close();
    }
  });
});

describe('keepSpecial and reasoning', { skip: smol.skip || skip }, () => {
  let stories;
  let model;
  before(async () => {
    stories = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 1 });
    model = await Model.open(smol.path, { threads: 2 });
  });
  after(() => { stories.close(); model.close(); });

  it('renders control tokens only with keepSpecial', async () => {
    const grammar = 'root ::= "Once" <[1]> "up"';
    assert.equal(await stories.generate('Hi', { maxTokens: 10, grammar, temperature: 0 }), 'Onceup');
    assert.equal(await stories.generate('Hi', { maxTokens: 10, grammar, temperature: 0, keepSpecial: true }), 'Once<s>up');
  });

  it('chat splits the reasoning of a reply from its content', async () => {
    const c = await model.chat([{ role: 'user', content: '2+3?' }],
      { maxTokens: 40, grammar: 'root ::= "<think>Add them.</think>" "5"', temperature: 0, details: true });
    assert.equal(c.reasoning, 'Add them.');
    assert.equal(c.content, '5');
    const p = model.parseToolCalls('<think>x</think>y');
    assert.equal(p.reasoning, 'x');
    assert.equal(p.content, 'y');
  });
});
