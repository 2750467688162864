'use strict';
// Checkpoint settings of a hybrid model's session: a tiny Qwen3.5 (one gated
// DeltaNet layer, one attention layer) written here over stories260K's
// tokenizer.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const h = require('./helpers');

const { Model } = h.moonlm;
const skip = h.skipReason('models/stories260K.gguf');

const str = (s) => {
  const b = Buffer.from(s, 'utf8');
  const out = Buffer.alloc(8 + b.length);
  out.writeBigUInt64LE(BigInt(b.length));
  b.copy(out, 8);
  return out;
};
const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; };
const u64 = (v) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); return b; };
const f32 = (v) => { const b = Buffer.alloc(4); b.writeFloatLE(v); return b; };

/** The raw key/value entries of a GGUF file whose key starts with prefix. */
function rawEntries(src, prefix) {
  const SCALAR = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  let off = 16;
  const rd32 = () => { const v = src.readUInt32LE(off); off += 4; return v; };
  const rd64 = () => { const v = Number(src.readBigUInt64LE(off)); off += 8; return v; };
  const skipValue = (t) => {
    if (t in SCALAR) { off += SCALAR[t]; return; }
    if (t === 8) { const n = rd64(); off += n; return; }
    if (t === 9) { const et = rd32(); const n = rd64(); for (let i = 0; i < n; i++) skipValue(et); return; }
    throw new Error(`GGUF value type ${t}`);
  };
  const nKV = Number(src.readBigUInt64LE(16));
  off = 24;
  const out = [];
  for (let i = 0; i < nKV; i++) {
    const at = off;
    const n = rd64();
    const key = src.toString('utf8', off, off + n);
    off += n;
    skipValue(rd32());
    if (key.startsWith(prefix)) out.push(src.subarray(at, off));
  }
  return out;
}

/** A tiny Qwen3.5 GGUF (F32, weights from a fixed formula) with src's tokenizer. */
function tinyHybrid(src) {
  const dim = 64, heads = 2, hd = 32, ff = 64, vocab = 512;
  const convK = 4, state = 16, kHeads = 2, vHeads = 2;
  const inner = vHeads * state, convDim = 2 * kHeads * state + inner;
  const kv = rawEntries(src, 'tokenizer.');
  kv.push(Buffer.concat([str('general.architecture'), u32(8), str('qwen35')]));
  const keys = {
    context_length: 256, embedding_length: dim, block_count: 2, feed_forward_length: ff,
    'attention.head_count': heads, 'attention.head_count_kv': 1, 'attention.key_length': hd,
    'attention.value_length': hd, 'rope.dimension_count': 8, full_attention_interval: 2,
    'ssm.conv_kernel': convK, 'ssm.state_size': state, 'ssm.group_count': kHeads,
    'ssm.time_step_rank': vHeads, 'ssm.inner_size': inner,
  };
  for (const [k, v] of Object.entries(keys)) kv.push(Buffer.concat([str('qwen35.' + k), u32(4), u32(v)]));
  kv.push(Buffer.concat([str('qwen35.attention.layer_norm_rms_epsilon'), u32(6), f32(1e-6)]));
  const tensors = [];
  let seed = 0;
  const add = (name, shape, value) => {
    seed++;
    const n = shape.reduce((a, b) => a * b, 1);
    const data = Buffer.alloc(4 * n);
    for (let i = 0; i < n; i++) data.writeFloatLE(value ?? 0.08 * Math.sin(i * 0.7 + seed * 1.3), 4 * i);
    tensors.push({ name, shape, data });
  };
  add('token_embd.weight', [dim, vocab]);
  for (let il = 0; il < 2; il++) {
    const p = `blk.${il}.`;
    add(p + 'attn_norm.weight', [dim], 1);
    if (il === 1) {
      add(p + 'attn_q.weight', [dim, 2 * heads * hd]);
      add(p + 'attn_k.weight', [dim, hd]);
      add(p + 'attn_v.weight', [dim, hd]);
      add(p + 'attn_q_norm.weight', [hd], 1);
      add(p + 'attn_k_norm.weight', [hd], 1);
      add(p + 'attn_output.weight', [heads * hd, dim]);
    } else {
      add(p + 'attn_qkv.weight', [dim, convDim]);
      add(p + 'attn_gate.weight', [dim, inner]);
      add(p + 'ssm_beta.weight', [dim, vHeads]);
      add(p + 'ssm_alpha.weight', [dim, vHeads]);
      add(p + 'ssm_conv1d.weight', [convK, convDim]);
      add(p + 'ssm_dt.bias', [vHeads], 0);
      add(p + 'ssm_a', [vHeads], -0.5);
      add(p + 'ssm_norm.weight', [state], 1);
      add(p + 'ssm_out.weight', [inner, dim]);
    }
    add(p + 'post_attention_norm.weight', [dim], 1);
    add(p + 'ffn_gate.weight', [dim, ff]);
    add(p + 'ffn_up.weight', [dim, ff]);
    add(p + 'ffn_down.weight', [ff, dim]);
  }
  add('output_norm.weight', [dim], 1);
  const align = 32;
  const infos = [];
  let dataOff = 0;
  const datas = [];
  for (const t of tensors) {
    infos.push(Buffer.concat([str(t.name), u32(t.shape.length), ...t.shape.map(u64), u32(0), u64(dataOff)]));
    const pad = (align - (t.data.length % align)) % align;
    datas.push(t.data, Buffer.alloc(pad));
    dataOff += t.data.length + pad;
  }
  const head = Buffer.concat([Buffer.from('GGUF', 'latin1'), u32(3), u64(tensors.length), u64(kv.length)]);
  const meta = Buffer.concat([head, ...kv, ...infos]);
  return Buffer.concat([meta, Buffer.alloc((align - (meta.length % align)) % align), ...datas]);
}

const PROMPT = [1, 403, 407, 261, 378, 290, 330, 324];

function argmax(x) {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

async function run(s) {
  let logits = await s.prefill(PROMPT);
  for (let i = 0; i < 10; i++) logits = await s.decode(argmax(logits));
}

describe('checkpoints of a hybrid model', { skip }, () => {
  let model, dense, dir;
  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'moonlm-hybrid-'));
    const file = path.join(dir, 'tiny-hybrid.gguf');
    fs.writeFileSync(file, tinyHybrid(fs.readFileSync(h.dataPath('models/stories260K.gguf'))));
    model = await Model.open(file, { threads: 1 });
    dense = await Model.open(h.dataPath('models/stories260K.gguf'), { threads: 1 });
  });
  after(() => {
    model?.close();
    dense?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('takes checkpointEvery and rewinds to a checkpoint for free', async () => {
    const s = model.session({ nCtx: 128, checkpointEvery: 4 });
    await run(s);
    const cp = s.checkpoints();
    assert.equal(cp.every, 4);
    assert.ok(cp.maxCount >= 2 && cp.bytesHeld > 0);
    assert.deepEqual(cp.positions, [8, 12, 16]);
    const before = s.stats().nEvaluated;
    s.rewind(12);
    assert.equal(s.stats().nEvaluated, before);
    assert.deepEqual(s.checkpoints().positions, [8, 12]);
    s.close();
  });

  it('defaults to every 32 positions; a negative budget keeps none', async () => {
    const s = model.session({ nCtx: 128 });
    await run(s);
    assert.equal(s.checkpoints().every, 32);
    assert.deepEqual(s.checkpoints().positions, [8]);
    s.close();
    const none = model.session({ nCtx: 128, checkpointEvery: 1, checkpointBytes: -1 });
    await run(none);
    assert.deepEqual(none.checkpoints(), { every: 0, maxCount: 0, bytesHeld: 0, positions: [] });
    none.close();
  });

  it('has none for a model without recurrent layers', async () => {
    const s = dense.session({ nCtx: 64, checkpointEvery: 4 });
    await s.prefill([1, 2, 3]);
    assert.deepEqual(s.checkpoints(), { every: 0, maxCount: 0, bytesHeld: 0, positions: [] });
    s.close();
  });

  it('checks the options', () => {
    assert.throws(() => model.session({ checkpointEvery: 'often' }), TypeError);
    assert.throws(() => model.session({ checkpointEvery: 2 ** 40 }), RangeError);
    assert.throws(() => model.session({ checkpointBytes: 0.5 }), RangeError);
  });
});
