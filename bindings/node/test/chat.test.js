'use strict';
// Chat over a model with a template: stories260K with a
// tokenizer.chat_template key added (test/helpers.js ggufWithString).
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const h = require('./helpers');

const { Model } = h.moonlm;
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
});
