'use strict';
// Chat over a model with a template: stories260K with a
// tokenizer.chat_template key added (test/helpers.js ggufWithString).
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const h = require('./helpers');

const { Model, MoonlmError, builtinChatTemplates } = h.moonlm;
const skip = h.skipReason('models/stories260K.gguf');

const TEMPLATE = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}" +
  '{% if add_generation_prompt %}assistant:{% endif %}';
const MESSAGES = [
  { role: 'system', content: 'Tell a story.' },
  { role: 'user', content: 'Once upon a time' },
];
const RENDERED = 'system: Tell a story.\nuser: Once upon a time\nassistant:';

describe('chat', { skip }, () => {
  let tmp;
  let chatModel;
  let model;
  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'moonlm-chat-'));
    const src = fs.readFileSync(h.dataPath('models/stories260K.gguf'));
    const file = path.join(tmp, 'stories-chat.gguf');
    fs.writeFileSync(file, h.ggufWithString(src, 'tokenizer.chat_template', TEMPLATE));
    chatModel = await Model.open(file, { threads: 2 });
    model = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 2 });
  });
  after(() => {
    if (chatModel) chatModel.close();
    if (model) model.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('exposes and renders the template', () => {
    assert.equal(chatModel.chatTemplate, TEMPLATE);
    assert.equal(chatModel.applyChatTemplate(MESSAGES), RENDERED);
    assert.equal(chatModel.applyChatTemplate(MESSAGES, { addAssistant: false }), RENDERED.slice(0, -'assistant:'.length));
    assert.equal(chatModel.applyChatTemplate([{ role: 'user', content: null }]), 'user: \nassistant:');
  });

  it('chats: generation from the rendered prompt', async () => {
    const reply = await chatModel.chat(MESSAGES, { maxTokens: 24, temperature: 0 });
    // The copy has the weights and vocabulary of stories260K itself.
    const want = await model.generate(RENDERED, { maxTokens: 24, temperature: 0, parseSpecial: true });
    assert.ok(reply.length > 0);
    assert.equal(reply, want);
  });

  it('streams a chat reply equal to the whole one', async () => {
    const opts = { maxTokens: 24, temperature: 0.7, seed: 11 };
    const full = await chatModel.chat(MESSAGES, opts);
    const pieces = [];
    for await (const p of chatModel.chatStream(MESSAGES, opts)) pieces.push(p);
    assert.equal(pieces.join(''), full);
    assert.ok(pieces.length > 1);
  });

  // A model without a template (stories260K, like the base Gemma 3 270M):
  // UNSUPPORTED naming the built-in formats unless template names one.
  it('refuses a model without a template, naming the built-in ones', async () => {
    assert.equal(model.chatTemplate, null);
    const names = builtinChatTemplates();
    const check = (e) => {
      assert.ok(e instanceof MoonlmError);
      assert.equal(e.code, 'UNSUPPORTED');
      assert.match(e.message, /no chat template/);
      assert.match(e.message, /template: 'NAME'/);
      for (const n of names) assert.ok(e.message.includes(n), `${n} in ${e.message}`);
      return true;
    };
    assert.throws(() => model.applyChatTemplate(MESSAGES), check);
    await assert.rejects(model.chat(MESSAGES, { maxTokens: 4 }), check);
    assert.throws(() => model.chatStream(MESSAGES, { maxTokens: 4 }), check);
  });

  it('renders and chats with a named built-in template', async () => {
    const text = model.applyChatTemplate(MESSAGES, { template: 'chatml' });
    assert.equal(text, '<|im_start|>system\nTell a story.<|im_end|>\n' +
      '<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n');
    assert.equal(model.applyChatTemplate(MESSAGES, { template: 'chatml', addAssistant: false }),
      text.slice(0, -'<|im_start|>assistant\n'.length));
    for (const n of builtinChatTemplates()) {
      assert.ok(model.applyChatTemplate(MESSAGES, { template: n }).includes('Once upon a time'), n);
    }
    const reply = await model.chat(MESSAGES, { maxTokens: 8, temperature: 0, template: 'chatml' });
    const want = await model.generate(text, { maxTokens: 8, temperature: 0, parseSpecial: true });
    assert.equal(reply, want);
    // The name wins over the model's own template; null/undefined keep it.
    assert.ok(chatModel.applyChatTemplate(MESSAGES, { template: 'zephyr' }).startsWith('<|system|>\nTell a story.'));
    assert.equal(chatModel.applyChatTemplate(MESSAGES, { template: null }), RENDERED);
    assert.equal(chatModel.applyChatTemplate(MESSAGES, { template: undefined }), RENDERED);
  });

  it('rejects unknown or malformed template names', async () => {
    assert.throws(() => model.applyChatTemplate(MESSAGES, { template: 'ChatML' }),
      (e) => e.code === 'INVALID_ARGUMENT' && e.message.includes('"ChatML"') && e.message.includes('chatml'));
    await assert.rejects(model.chat(MESSAGES, { template: 'nope' }), (e) => e.code === 'INVALID_ARGUMENT');
    assert.throws(() => model.applyChatTemplate(MESSAGES, { template: 'chat\0ml' }), (e) => e.code === 'INVALID_ARGUMENT');
    assert.throws(() => model.applyChatTemplate(MESSAGES, { template: 3 }), (e) => e.code === 'INVALID_ARGUMENT');
  });
});

describe('builtinChatTemplates', { skip: h.skipReason() }, () => {
  it('lists sorted names that index.d.ts declares', () => {
    const names = builtinChatTemplates();
    assert.ok(names.includes('chatml') && names.includes('gemma'), names.join());
    assert.deepEqual(names, [...names].sort());
    const dts = fs.readFileSync(path.join(__dirname, '..', 'index.d.ts'), 'utf8');
    const m = dts.match(/export type BuiltinChatTemplate = ([^;]+);/);
    assert.ok(m, 'index.d.ts declares BuiltinChatTemplate');
    const declared = m[1].split('|').map((x) => x.trim().replace(/'/g, '')).sort();
    assert.deepEqual(declared, names);
  });
});
