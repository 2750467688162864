'use strict';
// Tool calling: tools and tool calls through the chat template, replies
// parsed back into calls (moonlm_chat_apply_template_json and
// moonlm_chat_parse_tool_calls).
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const h = require('./helpers');

const { Model, MoonlmError } = h.moonlm;
const skip = h.skipReason('models/stories260K.gguf');
const TOOLDATA = path.join(h.REPO, 'engine', 'chat', 'testdata', 'tools');

const TOOLS = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
}];
// A template that shows what it receives.
const SHOW = '{% for t in tools or [] %}[tool {{ t.function.name }}]{% endfor %}' +
  '{% for m in messages %}{{ m.role }}: {{ m.content }}' +
  '{% for c in m.tool_calls %}<call {{ c.function.name }} {{ c.function.arguments | tojson }}>{% endfor %}' +
  "{% if m.tool_call_id %}(for {{ m.tool_call_id }}){% endif %}{{ '\\n' }}{% endfor %}" +
  '{% if add_generation_prompt %}assistant:{% endif %}';

describe('tool calling', { skip }, () => {
  let tmp;
  let qwen;
  let show;
  let plain;
  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'moonlm-tools-'));
    const src = fs.readFileSync(h.dataPath('models/stories260K.gguf'));
    const open = async (name, tmpl) => {
      const file = path.join(tmp, name);
      fs.writeFileSync(file, h.ggufWithString(src, 'tokenizer.chat_template', tmpl));
      return Model.open(file, { threads: 2 });
    };
    qwen = await open('qwen.gguf', fs.readFileSync(path.join(TOOLDATA, 'qwen2.5.jinja'), 'utf8'));
    show = await open('show.gguf', SHOW);
    plain = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 2 });
  });
  after(() => {
    for (const m of [qwen, show, plain]) if (m) m.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('renders like Jinja2', () => {
    const cases = JSON.parse(fs.readFileSync(path.join(TOOLDATA, 'tools_cases.json'), 'utf8'));
    const qc = cases.templates['qwen2.5'].cases;
    assert.ok(qc.length > 0);
    for (const c of qc) {
      assert.equal(qwen.applyChatTemplate(c.messages, { addAssistant: c.gen, tools: cases.tools }), c.out, c.name);
    }
  });

  it('gives the template tools, calls and results', () => {
    const msgs = [
      { role: 'user', content: 'Weather?' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Oslo"}' } }] },
      { role: 'tool', content: 'cold', tool_call_id: 'c1', name: 'get_weather' },
    ];
    assert.equal(show.applyChatTemplate(msgs, { tools: TOOLS }),
      '[tool get_weather]user: Weather?\nassistant: <call get_weather {"city": "Oslo"}>\ntool: cold(for c1)\nassistant:');
    assert.ok(show.applyChatTemplate(msgs).includes('(for c1)')); // tool keys without tools
  });

  it('refuses unknown or malformed message keys and tools', () => {
    assert.throws(() => show.applyChatTemplate([{ role: 'user', content: 'x', images: [] }]),
      { name: 'TypeError', param: 'messages[0].images' });
    assert.throws(() => show.applyChatTemplate(
      [{ role: 'assistant', tool_calls: [{ function: { name: 'f', arguments: '{oops' } }] }], { tools: TOOLS }),
    (e) => e instanceof MoonlmError && e.code === 'INVALID_ARGUMENT' && /arguments/.test(e.message));
    assert.throws(() => show.applyChatTemplate([{ role: 'user', content: 'x' }], { tools: [{ ...TOOLS[0], strict: true }] }),
      (e) => e.code === 'INVALID_ARGUMENT' && /unknown key 'strict'/.test(e.message));
    assert.throws(() => show.applyChatTemplate([{ role: 'user', content: 'x' }], { tools: 'get_weather' }),
      { name: 'TypeError', param: 'opts.tools' });
  });

  it('parses replies into calls', () => {
    const text = 'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
    const p = qwen.parseToolCalls(text);
    assert.deepEqual(p, {
      format: 'hermes', content: 'Let me look.',
      tool_calls: [{ id: 'call00000', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }],
    });
    const bad = qwen.parseToolCalls('<tool_call>{nope</tool_call>');
    assert.deepEqual(bad.tool_calls, []);
    assert.match(bad.error, /<tool_call>/);
    assert.equal(plain.parseToolCalls(text, { template: 'chatml' }).tool_calls[0].function.name, 'get_weather');
    assert.throws(() => plain.parseToolCalls(text), { code: 'UNSUPPORTED' });
  });

  it('reports the calls of a chat with tools', async () => {
    const msgs = [{ role: 'user', content: 'Weather in Paris?' }];
    const o = { maxTokens: 24, temperature: 0, tools: TOOLS };
    const c = await show.chat(msgs, { ...o, details: true });
    assert.ok(Array.isArray(c.toolCalls));
    const p = show.parseToolCalls(c.text);
    assert.deepEqual(c.toolCalls, p.tool_calls);
    assert.equal(c.content, p.content);
    assert.equal(c.toolCallError, p.error ?? null);
    const st = show.chatStream(msgs, o);
    let text = '';
    for await (const piece of st) text += piece;
    assert.equal(text, c.text);
    assert.deepEqual(st.completion.toolCalls, c.toolCalls);
    assert.equal(await show.chat(msgs, o), c.text);
    assert.equal((await show.chat(msgs, { maxTokens: 4, temperature: 0, details: true })).toolCalls, null);
  });
});
