// The Web Worker that runs the moonlm engine (moonlm.wasm, built from
// cmd/moonlm-wasm) off the page's thread. It speaks the message protocol
// of moonlm.js: requests {id, op, ...}; replies {id, ok, value | error};
// streamed text {id, text}; load progress {id, progress}.
'use strict';
importScripts('wasm_exec.js');

const CHUNK = 16 << 20; // bytes read from the File at a time

let instance = null;
let busy = null; // the op running, if any: ops do not overlap
const ready = new Promise((resolve, reject) => {
  self.moonlmReady = resolve;
  const go = new Go();
  WebAssembly.instantiateStreaming(fetch('moonlm.wasm'), go.importObject)
    .then((r) => { instance = r.instance; go.run(instance); })
    .catch(reject);
});

// call runs a synchronous Go function and unwraps its {ok, value, error}.
function call(name, ...args) {
  const r = self.moonlmGo[name](...args);
  if (!r.ok) throw new Error(r.error);
  return r.value;
}

function memory() {
  return { wasmBytes: instance ? instance.exports.mem.buffer.byteLength : 0 };
}

// open copies the model's bytes into one Go buffer of the file's size,
// chunk by chunk (a File is read a slice at a time, never whole into JS).
async function open(id, src, options) {
  const size = src.size !== undefined ? src.size : src.byteLength;
  call('alloc', size);
  for (let off = 0; off < size; off += CHUNK) {
    const end = Math.min(size, off + CHUNK);
    const bytes = src instanceof ArrayBuffer
      ? new Uint8Array(src, off, end - off)
      : new Uint8Array(await src.slice(off, end).arrayBuffer());
    call('write', off, bytes);
    self.postMessage({ id, progress: { loaded: end, total: size } });
  }
  return Object.assign(call('load', options || {}), memory());
}

async function generate(id, prompt, options) {
  const r = await self.moonlmGo.generate(prompt, options || {}, (text) => {
    self.postMessage({ id, text });
  });
  return Object.assign(r, memory());
}

async function handle(msg) {
  await ready;
  switch (msg.op) {
    case 'open': return open(msg.id, msg.source, msg.options);
    case 'tokenize': return call('tokenize', msg.text, msg.addSpecial, msg.parseSpecial);
    case 'detokenize': return call('detokenize', msg.ids);
    case 'generate': return generate(msg.id, msg.prompt, msg.options);
    case 'chat': return generate(msg.id, call('applyChatTemplate', msg.messages), msg.options);
    case 'memory': return memory();
    case 'close': return call('close');
  }
  throw new Error(`unknown operation ${msg.op}`);
}

self.onmessage = async (e) => {
  const msg = e.data;
  if (msg.op === 'abort') { // not queued: it must reach a running generate
    if (self.moonlmGo) self.moonlmGo.abort();
    return;
  }
  if (busy) {
    self.postMessage({ id: msg.id, ok: false, error: `busy: ${busy} is running` });
    return;
  }
  busy = msg.op;
  try {
    self.postMessage({ id: msg.id, ok: true, value: await handle(msg) });
  } catch (err) {
    self.postMessage({ id: msg.id, ok: false, error: String(err && err.message || err) });
  } finally {
    busy = null;
  }
};
