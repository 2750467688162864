'use strict';
// `moonlm serve` against the official openai npm package: the test starts
// the CLI (build/moonlm, or $MOONLM_CLI) on a free loopback port with
// SmolLM2 and talks to it through the client (raw fetch only for malformed
// JSON, which the client cannot send). Skipped with a reason when the CLI,
// the model or the library (for the end-of-generation token ids) is absent.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const OpenAI = require('openai');
const h = require('./helpers');

const KEY = 'test-key-456';
const CLI = process.env.MOONLM_CLI || path.join(h.REPO, 'build', 'moonlm');
const SMOL = h.defaultModel('SmolLM2-135M-Instruct.Q4_1.gguf');

function skipReason() {
  if (!fs.existsSync(CLI)) return `the moonlm CLI is not built at ${CLI} (run \`make cli\`)`;
  if (SMOL.skip) return SMOL.skip;
  try {
    h.moonlm.libraryPath();
  } catch (e) {
    if (process.env.MOONLM_LIBRARY) throw e;
    return `libmoonlm.so not available (run \`make lib\`): ${e.message}`;
  }
  return false;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe('moonlm serve with the openai package', { skip: skipReason() }, () => {
  let proc;
  let url;
  let client;
  let cacheDir;
  let noEog;

  async function metric(name) {
    const text = await (await fetch(`${url}/metrics`)).text();
    for (const line of text.split('\n')) {
      if (line.startsWith(name + ' ')) return Number(line.split(' ')[1]);
    }
    throw new Error(`no ${name} in /metrics`);
  }

  async function waitMetric(name, want, ms = 10000) {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = await metric(name);
      if (v === want) return;
      assert.ok(Date.now() < deadline, `${name} is ${v}, want ${want}`);
      await sleep(10);
    }
  }

  before(async () => {
    const m = await h.moonlm.Model.open(SMOL.path, { threads: 1 });
    noEog = {};
    for (let t = 0; t < m.vocabSize; t++) if (m.isEog(t)) noEog[String(t)] = -100;
    m.close();

    cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'moonlm-serve-cache-'));
    proc = spawn(CLI, ['serve', '-m', SMOL.path, '--port', '0', '--parallel', '4', '--ctx', '2048',
      '--api-key', KEY, '--alias', 'smol'], { env: { ...process.env, MOONLM_PACKED_CACHE_DIR: cacheDir }, stdio: ['ignore', 'ignore', 'pipe'] });
    const lines = readline.createInterface({ input: proc.stderr });
    url = await new Promise((resolve, reject) => {
      let seen = '';
      lines.on('line', (line) => {
        seen += line + '\n';
        const m = /listening on (http:\/\/\S+)/.exec(line);
        if (m) resolve(m[1]);
      });
      proc.on('exit', (code) => reject(new Error(`moonlm serve exited ${code}: ${seen}`)));
    });
    const deadline = Date.now() + 60000;
    for (;;) {
      try {
        if ((await fetch(`${url}/health`)).status === 200) break;
      } catch { /* not listening yet */ }
      assert.ok(Date.now() < deadline, 'the server was not ready in 60 s');
      await sleep(20);
    }
    client = new OpenAI({ baseURL: `${url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 120000 });
  });

  after(async () => {
    if (proc && proc.exitCode === null) {
      const exited = new Promise((r) => proc.on('exit', (code) => r(code)));
      proc.kill('SIGTERM');
      assert.equal(await exited, 0);
    }
    if (cacheDir) fs.rmSync(cacheDir, { recursive: true, force: true });
  });

  const ask = (text, opts = {}) => client.chat.completions.create({
    model: 'anything', messages: [{ role: 'user', content: text }], temperature: 0, max_tokens: 16, ...opts,
  });

  async function streamText(stream) {
    const text = {};
    const finish = {};
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const ch of chunk.choices) {
        text[ch.index] = (text[ch.index] || '') + (ch.delta?.content ?? ch.text ?? '');
        if (ch.finish_reason) finish[ch.index] = ch.finish_reason;
      }
    }
    return { text, finish, usage };
  }

  it('lists the model by its alias', async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    assert.deepEqual(ids, ['smol']);
  });

  it('chats, whole and streamed alike', async () => {
    const r = await ask('What is the capital of Germany?', { max_tokens: 24 });
    assert.equal(r.object, 'chat.completion');
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.match(r.choices[0].message.content, /Berlin/);
    assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
    const s = await streamText(await ask('What is the capital of Germany?',
      { max_tokens: 24, stream: true, stream_options: { include_usage: true } }));
    assert.equal(s.text[0], r.choices[0].message.content);
    assert.equal(s.finish[0], r.choices[0].finish_reason);
    assert.deepEqual(s.usage, r.usage);
  });

  it('completes text, with stop', async () => {
    const r = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
    assert.equal(r.object, 'text_completion');
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 12);
    const words = r.choices[0].text.split(' ').filter(Boolean);
    assert.ok(words.length >= 4, r.choices[0].text);
    const stop = ' ' + words[3];
    const cut = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 12, temperature: 0, stop });
    assert.equal(cut.choices[0].text, r.choices[0].text.slice(0, r.choices[0].text.indexOf(stop)));
    assert.equal(cut.choices[0].finish_reason, 'stop');
  });

  it('runs 16 concurrent streams, each equal to the same request alone', async () => {
    const topics = ['the sea', 'a cat', 'winter', 'bread', 'music', 'a robot', 'the moon', 'trains',
      'rain', 'a garden', 'coffee', 'mountains', 'a library', 'fire', 'bicycles', 'the desert'];
    const one = async (t) => {
      const s = await streamText(await ask(`Say one sentence about ${t}.`, { stream: true }));
      return [s.text[0], s.finish[0]];
    };
    const alone = [];
    for (const t of topics) alone.push(await one(t));
    const together = await Promise.all(topics.map(one));
    assert.deepEqual(together, alone);
    assert.ok(alone.every(([t]) => t.length > 0));
  });

  it('stops a stream whose client leaves', async () => {
    const stream = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 1500,
      temperature: 0, stream: true, logit_bias: noEog });
    const it = stream[Symbol.asyncIterator]();
    await it.next();
    await waitMetric('moonlm_active_sequences', 1);
    stream.controller.abort();
    await waitMetric('moonlm_active_sequences', 0, 5000);
  });

  function errorBody(e) {
    for (const k of ['message', 'type', 'param', 'code']) assert.ok(k in e.error, JSON.stringify(e.error));
    return e.error;
  }

  it('answers errors in OpenAI shape', async () => {
    await assert.rejects(client.chat.completions.create({ model: 'x', messages: [{ role: 'user' }] }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError);
      assert.equal(errorBody(e).code, 'missing_content');
      return true;
    });
    await assert.rejects(ask('x'.repeat(5 << 20)), (e) => {
      assert.equal(e.status, 413);
      assert.equal(errorBody(e).code, 'request_too_large');
      return true;
    });
    const bad = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'wrong', maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e) => {
      assert.ok(e instanceof OpenAI.AuthenticationError);
      assert.equal(errorBody(e).code, 'invalid_api_key');
      return true;
    });
    // A schema feature the grammar converter lacks is a 400 naming it.
    await assert.rejects(ask('hi', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'email' } } } }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      const b = errorBody(e);
      assert.equal(b.code, 'unsupported_schema');
      assert.match(b.message, /format/);
      return true;
    });
    const r = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST', body: '{"messages": [', headers: { Authorization: `Bearer ${KEY}`, 'Content-Type': 'application/json' },
    });
    assert.equal(r.status, 400);
    assert.equal((await r.json()).error.code, 'invalid_json');
  });

  it('constrains the output to a nested JSON schema at temperature 1, streamed and not', async () => {
    const schema = {
      type: 'object',
      properties: {
        name: { type: 'string', maxLength: 20 },
        role: { enum: ['admin', 'user', 'guest'] },
        address: { $ref: '#/$defs/address' },
        pets: { type: 'array', maxItems: 3, items: { type: 'object', properties: { kind: { enum: ['cat', 'dog'] }, age: { type: 'integer', minimum: 0, maximum: 30 } }, required: ['kind', 'age'] } },
      },
      required: ['name', 'role', 'address', 'pets'],
      $defs: { address: { type: 'object', properties: { city: { type: 'string', maxLength: 20 }, zip: { type: 'integer' } }, required: ['city', 'zip'] } },
    };
    const check = (text) => {
      const v = JSON.parse(text);
      assert.deepEqual(Object.keys(v).sort(), ['address', 'name', 'pets', 'role'], text);
      assert.ok(typeof v.name === 'string' && [...v.name].length <= 20, text);
      assert.ok(['admin', 'user', 'guest'].includes(v.role), text);
      assert.deepEqual(Object.keys(v.address).sort(), ['city', 'zip'], text);
      assert.ok(typeof v.address.city === 'string' && Number.isInteger(v.address.zip), text);
      assert.ok(Array.isArray(v.pets) && v.pets.length <= 3, text);
      for (const p of v.pets) {
        assert.deepEqual(Object.keys(p).sort(), ['age', 'kind'], text);
        assert.ok(['cat', 'dog'].includes(p.kind) && Number.isInteger(p.age) && p.age >= 0 && p.age <= 30, text);
      }
    };
    const rf = { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } };
    for (const seed of [1, 2]) {
      const r = await ask('Describe a person as JSON.', { temperature: 1.0, seed, max_tokens: 400, response_format: rf });
      assert.equal(r.choices[0].finish_reason, 'stop');
      check(r.choices[0].message.content);
      const s = await streamText(await ask('Describe a person as JSON.', { temperature: 1.0, seed, max_tokens: 400, response_format: rf, stream: true }));
      check(s.text[0]);
    }
  });

  it('forces a tool call and takes the tool result back', async () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Get the weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 30 }, unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'] } } }];
    const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
    const r = await client.chat.completions.create({ model: 'smol', messages, tools, tool_choice: 'required', temperature: 1.0, seed: 4, max_tokens: 200 });
    const ch = r.choices[0];
    assert.equal(ch.finish_reason, 'tool_calls');
    const call = ch.message.tool_calls[0];
    assert.equal(call.function.name, 'get_weather');
    const args = JSON.parse(call.function.arguments);
    assert.deepEqual(Object.keys(args).sort(), ['city', 'unit']);
    assert.ok(['celsius', 'fahrenheit'].includes(args.unit));
    messages.push(ch.message, { role: 'tool', tool_call_id: call.id, content: '{"temperature_c": 21}' });
    const r2 = await client.chat.completions.create({ model: 'smol', messages, tools, tool_choice: 'none', temperature: 0, max_tokens: 20 });
    assert.ok(r2.choices[0].message.content);
    assert.equal(r2.choices[0].message.tool_calls, undefined);
  });

  it('returns log-probabilities, whole and streamed', async () => {
    const r = await ask('The capital of France is', { max_tokens: 8, logprobs: true, top_logprobs: 4 });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens);
    for (const e of content) {
      assert.equal(e.top_logprobs.length, 4);
      assert.ok(Math.abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6, 'greedy picks the most likely token');
      assert.ok(e.logprob <= 0);
    }
    const streamed = [];
    for await (const chunk of await ask('The capital of France is', { max_tokens: 8, logprobs: true, top_logprobs: 4, stream: true })) {
      for (const c of chunk.choices) if (c.logprobs && c.logprobs.content) streamed.push(...c.logprobs.content);
    }
    assert.deepEqual(streamed.map((e) => e.token), content.map((e) => e.token));
    const c = await client.completions.create({ model: 'smol', prompt: 'The capital of France is', max_tokens: 5, temperature: 0, logprobs: 2 });
    assert.equal(c.choices[0].logprobs.tokens.join(''), c.choices[0].text);
  });
});
