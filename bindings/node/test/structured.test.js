'use strict';
// Structured output (grammar, jsonSchema, responseFormat), log-probabilities,
// tool_choice and the newer sampler options.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const h = require('./helpers');

const { Model, Grammar, Sampler, MoonlmError } = h.moonlm;
const smol = h.defaultModel('SmolLM2-135M-Instruct.Q4_1.gguf');
const skip = h.skipReason('models/stories260K.gguf');

const SCHEMA = {
  $defs: {
    pet: {
      type: 'object',
      properties: { name: { type: 'string', maxLength: 12 }, kind: { enum: ['cat', 'dog', 'fish'] } },
      required: ['name', 'kind'], additionalProperties: false,
    },
  },
  type: 'object',
  properties: {
    owner: { type: 'string', maxLength: 16 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    pets: { type: 'array', items: { $ref: '#/$defs/pet' }, minItems: 1, maxItems: 3 },
  },
  required: ['owner', 'age', 'pets'], additionalProperties: false,
};

// SCHEMA checked by hand (no validator dependency).
function checkOwner(v) {
  assert.deepEqual(Object.keys(v).sort(), ['age', 'owner', 'pets']);
  assert.equal(typeof v.owner, 'string');
  assert.ok(v.owner.length <= 16);
  assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 120, `age ${v.age}`);
  assert.ok(Array.isArray(v.pets) && v.pets.length >= 1 && v.pets.length <= 3);
  for (const p of v.pets) {
    assert.deepEqual(Object.keys(p).sort(), ['kind', 'name']);
    assert.ok(typeof p.name === 'string' && p.name.length <= 12);
    assert.ok(['cat', 'dog', 'fish'].includes(p.kind));
  }
}

const TOOLS = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 24 }, unit: { $ref: '#/$defs/unit' } },
        required: ['city', 'unit'], additionalProperties: false,
        $defs: { unit: { enum: ['celsius', 'fahrenheit'] } },
      },
    },
  },
  {
    type: 'function',
    function: {
      name: 'get_time',
      parameters: { type: 'object', properties: { zone: { type: 'string', maxLength: 24 } }, required: ['zone'], additionalProperties: false },
    },
  },
];
const ASK = [{ role: 'user', content: 'What is the weather like in Paris?' }];

function checkCall(call) {
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === 'get_weather') {
    assert.deepEqual(Object.keys(args).sort(), ['city', 'unit']);
    assert.ok(['celsius', 'fahrenheit'].includes(args.unit));
    assert.ok(typeof args.city === 'string' && args.city.length <= 24);
  } else {
    assert.equal(call.function.name, 'get_time');
    assert.deepEqual(Object.keys(args), ['zone']);
    assert.ok(typeof args.zone === 'string' && args.zone.length <= 24);
  }
}

describe('structured output on SmolLM2', { skip: smol.skip }, () => {
  let model;
  let prompt;
  before(async () => {
    model = await Model.open(smol.path, { threads: 2 });
    prompt = model.applyChatTemplate([{ role: 'user', content: 'Describe a pet owner as JSON.' }]);
  });
  after(() => model.close());

  it('a JSON schema at temperature 1.5 yields valid JSON', async () => {
    for (const seed of [1, 2]) {
      const c = await model.generate(prompt, { maxTokens: 400, jsonSchema: SCHEMA, temperature: 1.5, seed, details: true, parseSpecial: true });
      assert.equal(c.finishReason, 'eog', c.text);
      checkOwner(JSON.parse(c.text));
    }
  });

  it('responseFormat and a reused compiled Grammar', async () => {
    const rf = { type: 'json_schema', json_schema: { name: 'owner', schema: SCHEMA } };
    checkOwner(JSON.parse(await model.generate(prompt, { maxTokens: 400, responseFormat: rf, temperature: 1, seed: 3, parseSpecial: true })));
    const g = Grammar.fromJsonSchema(model, JSON.stringify(SCHEMA));
    try {
      for (const seed of [4, 5]) {
        checkOwner(JSON.parse(await model.generate(prompt, { maxTokens: 400, grammar: g, temperature: 1, seed, parseSpecial: true })));
      }
    } finally {
      g.close();
    }
    await assert.rejects(model.generate(prompt, { maxTokens: 4, grammar: g }), /closed/);
    const obj = await model.generate(prompt, { maxTokens: 200, responseFormat: { type: 'json_object' }, temperature: 0.7, seed: 1, parseSpecial: true });
    assert.equal(typeof JSON.parse(obj), 'object');
  });

  it('a grammar of one string yields exactly it', async () => {
    for (const seed of [1, 2, 3]) {
      const c = await model.generate('Say anything:', { maxTokens: 50, grammar: 'root ::= "moon river"', temperature: 1.5, seed, details: true });
      assert.equal(c.text, 'moon river');
      assert.equal(c.finishReason, 'eog');
    }
  });

  it('grammar errors name line:col; options are checked', async () => {
    await assert.rejects(model.generate('x', { maxTokens: 5, grammar: 'root ::= "a"\nfoo ::= ( "b"\n' }),
      (e) => e instanceof MoonlmError && /2:\d+/.test(e.message));
    await assert.rejects(model.generate('x', { maxTokens: 5, jsonSchema: { type: 'object', properties: 5 } }), MoonlmError);
    await assert.rejects(model.generate('x', { grammar: 'root ::= "a"', jsonSchema: {} }), /cannot be combined/);
    await assert.rejects(model.generate('x', { grammar: 5 }), TypeError);
    await assert.rejects(model.generate('x', { responseFormat: { type: 'yaml' } }), RangeError);
    await assert.rejects(model.generate('x', { responseFormat: { type: 'json_schema' } }), /json_schema/);
  });

  it("toolChoice 'required' yields a call valid against its tool's schema", async () => {
    for (const seed of [1, 2, 3]) {
      const c = await model.chat(ASK, { maxTokens: 200, tools: TOOLS, toolChoice: 'required', temperature: 1.2, seed, details: true });
      assert.equal(c.toolCallError, null, c.text);
      assert.equal(c.toolCalls.length, 1, c.text);
      checkCall(c.toolCalls[0]);
    }
  });

  it('parallelToolCalls: true allows several calls, false keeps one', async () => {
    let multi = 0;
    for (const seed of [1, 2, 3]) {
      const c = await model.chat(ASK, { maxTokens: 300, tools: TOOLS, toolChoice: 'required', parallelToolCalls: true, temperature: 1.0, seed, details: true });
      assert.equal(c.toolCallError, null, c.text);
      assert.ok(c.toolCalls.length >= 1, c.text);
      if (c.toolCalls.length > 1) multi++;
      c.toolCalls.forEach(checkCall);
    }
    assert.ok(multi > 0, 'no reply made several calls');
    const one = await model.chat(ASK, { maxTokens: 300, tools: TOOLS, toolChoice: 'required', parallelToolCalls: false, temperature: 1.0, seed: 1, details: true });
    assert.equal(one.toolCalls.length, 1);
    await assert.rejects(model.chat(ASK, { tools: TOOLS, parallelToolCalls: 'yes' }), TypeError);
  });

  it('a named toolChoice calls that tool; none and auto', async () => {
    const choice = { type: 'function', function: { name: 'get_time' } };
    const s = model.chatStream(ASK, { maxTokens: 200, tools: TOOLS, toolChoice: choice, temperature: 1.2, seed: 1 });
    for await (const p of s) void p; // eslint-disable-line no-unused-vars
    assert.deepEqual(s.completion.toolCalls.map((c) => c.function.name), ['get_time'], s.completion.text);
    checkCall(s.completion.toolCalls[0]);
    const none = await model.chat(ASK, { maxTokens: 20, tools: TOOLS, toolChoice: 'none', temperature: 0, details: true });
    assert.deepEqual(none.toolCalls, []);
    assert.equal(none.content, none.text);
    const plain = await model.chat(ASK, { maxTokens: 1, temperature: 0, details: true });
    assert.equal(none.promptTokens, plain.promptTokens); // rendered without the tools
    await assert.rejects(model.chat(ASK, { tools: TOOLS, toolChoice: 'always' }), RangeError);
    await assert.rejects(model.chat(ASK, { tools: TOOLS, toolChoice: 1 }), TypeError);
    await assert.rejects(model.chat(ASK, { toolChoice: 'required' }), /needs opts.tools/);
    await assert.rejects(model.chat(ASK, { tools: TOOLS, toolChoice: { type: 'function', function: { name: 'nosuch' } } }), /nosuch/);
  });
});

describe('logprobs and sampler options on stories260K', { skip }, () => {
  let model;
  before(async () => { model = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 2 }); });
  after(() => model.close());

  it('logprobs match a log_softmax of the logits (greedy)', async () => {
    const prompt = model.tokenize('Once upon a time');
    const c = await model.generate(prompt, { maxTokens: 6, temperature: 0, logprobs: true, topLogprobs: 5, details: true });
    const content = c.logprobs.content;
    assert.deepEqual(content.map((e) => e.id), [...c.tokens]);
    assert.equal(content.length, 6);
    const s = model.session();
    try {
      let logits = Float32Array.from(await s.prefill(prompt));
      for (const e of content) {
        const lsm = h.logSoftmax(logits);
        const order = [...lsm.keys()].sort((a, b) => lsm[b] - lsm[a] || a - b);
        assert.equal(e.id, order[0]);
        assert.ok(Math.abs(e.logprob - lsm[e.id]) < 1e-4, `${e.logprob} vs ${lsm[e.id]}`);
        assert.deepEqual(e.topLogprobs.map((t) => t.id), order.slice(0, 5));
        for (const t of e.topLogprobs) {
          assert.ok(Math.abs(t.logprob - lsm[t.id]) < 1e-4);
          assert.deepEqual(Buffer.from(t.bytes), model.tokenToPiece(t.id));
        }
        logits = Float32Array.from(await s.decode(e.id));
      }
    } finally {
      s.close();
    }
    await assert.rejects(model.generate('x', { logprobs: true, topLogprobs: 21 }), RangeError);
    const all = await model.generate('x', { maxTokens: 2 ** 40, temperature: 0.8, seed: 1, logprobs: true, details: true });
    assert.ok(['context', 'eog'].includes(all.finishReason));
    assert.equal(all.logprobs.content.length, all.completionTokens);
    assert.equal(all.completionTokens, all.tokens.length);
    await assert.rejects(model.generate('x', { topLogprobs: 2 }), /needs opts.logprobs/);
    assert.equal((await model.generate('x', { maxTokens: 2, temperature: 0, details: true })).logprobs, undefined);
  });

  it('logit bias bans and forces tokens', async () => {
    const free = await model.generate('Once upon a time', { maxTokens: 8, temperature: 0, details: true });
    const banned = free.tokens[0];
    const c = await model.generate('Once upon a time', { maxTokens: 8, temperature: 0, logitBias: { [banned]: -1e30 }, details: true });
    assert.ok(!c.tokens.includes(banned));
    const forced = model.tokenize(' moon', { addSpecial: false })[0];
    const f = await model.generate('Once upon a time', { maxTokens: 4, temperature: 0, logitBias: new Map([[forced, 100]]), details: true });
    assert.deepEqual([...f.tokens], [forced, forced, forced, forced]);
  });

  it('typical-p, XTC, DRY and mirostat run seeded; DRY changes a greedy path', async () => {
    const kw = { temperature: 1, typicalP: 0.9, xtcProbability: 0.5, xtcThreshold: 0.1, dryMultiplier: 0.8, drySequenceBreakers: ['\n', '.'], seed: 7, maxTokens: 24 };
    assert.equal(await model.generate('Once upon a time', kw), await model.generate('Once upon a time', kw));
    for (const mirostat of [1, 2]) {
      const m = { mirostat, mirostatTau: 3, mirostatEta: 0.2, seed: 7, maxTokens: 24 };
      assert.equal(await model.generate('Once upon a time', m), await model.generate('Once upon a time', m));
    }
    const base = { temperature: 0, maxTokens: 80, dryAllowedLength: 1, dryPenaltyLastN: -1, drySequenceBreakers: [] };
    const plain = await model.generate('Once upon a time', { ...base, dryMultiplier: 0 });
    assert.equal(plain, await model.generate('Once upon a time', { temperature: 0, maxTokens: 80 }));
    assert.notEqual(await model.generate('Once upon a time', { ...base, dryMultiplier: 3 }), plain);
  });

  it('the new options are range-checked', () => {
    const bad = [
      [{ mirostat: 3 }, RangeError], [{ mirostat: -1 }, RangeError], [{ mirostat: true }, TypeError],
      [{ dryAllowedLength: -1 }, RangeError], [{ dryPenaltyLastN: -2 }, RangeError],
      [{ dryAllowedLength: 2 ** 31 }, RangeError], [{ typicalP: NaN }, RangeError], [{ xtcThreshold: '0.1' }, TypeError],
      [{ drySequenceBreakers: 'x' }, TypeError], [{ drySequenceBreakers: ['a\0b'] }, RangeError],
      [{ logitBias: [[1, 2]] }, TypeError], [{ logitBias: { '-1': 1 } }, RangeError],
      [{ logitBias: { [2 ** 31]: 1 } }, RangeError], [{ logitBias: { 1: Infinity } }, RangeError],
      [{ logitBias: { 1.5: 1 } }, TypeError],
    ];
    for (const [opts, E] of bad) {
      assert.throws(() => new Sampler(opts), E, JSON.stringify(opts));
    }
    const s = new Sampler({ mirostat: 2, dryMultiplier: 1, drySequenceBreakers: [], logitBias: { 1: -2.5 } });
    assert.equal(s.params.mirostat, 2);
    s.close();
  });
});
