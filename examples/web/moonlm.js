// moonlm in the browser: the page-side API. The engine runs in a Web
// Worker (moonlm-worker.js), so the page never blocks.
//
//   import { MoonLM } from './moonlm.js';
//   const lm = new MoonLM();
//   const info = await lm.open(fileInput.files[0]);   // a File or an ArrayBuffer
//   for await (const text of lm.generate('Once upon a time', { maxTokens: 64 })) ...
//   for await (const text of lm.chat([{ role: 'user', content: 'Hi' }])) ...
//   lm.abort();
//
// generate and chat return an async iterable of text pieces with a
// `result` promise: {finish, promptTokens, tokens, ids, promptMs,
// decodeMs, wasmBytes}. Options: maxTokens, temperature (0 = greedy, the
// default), topK, topP, minP, repeatPenalty, repeatLastN, seed, stop.

export class MoonLM {
  constructor(workerURL = new URL('moonlm-worker.js', import.meta.url)) {
    this.worker = new Worker(workerURL);
    this.nextID = 1;
    this.pending = new Map(); // id -> {resolve, reject, onText, onProgress}
    this.worker.onmessage = (e) => this.receive(e.data);
    this.worker.onerror = (e) => this.failAll(new Error(`moonlm worker: ${e.message}`));
  }

  receive(msg) {
    const p = this.pending.get(msg.id);
    if (!p) return;
    if (msg.text !== undefined) { if (p.onText) p.onText(msg.text); return; }
    if (msg.progress !== undefined) { if (p.onProgress) p.onProgress(msg.progress); return; }
    this.pending.delete(msg.id);
    if (msg.ok) p.resolve(msg.value); else p.reject(new Error(msg.error));
  }

  failAll(err) {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }

  request(op, fields, hooks = {}, transfer = []) {
    const id = this.nextID++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, ...hooks });
      this.worker.postMessage({ id, op, ...fields }, transfer);
    });
  }

  // open loads a model from a File (read in chunks, never fetched) or an
  // ArrayBuffer (transferred to the worker). onProgress({loaded, total}).
  open(source, { nCtx = 0, onProgress } = {}) {
    const transfer = source instanceof ArrayBuffer ? [source] : [];
    return this.request('open', { source, options: { nCtx } }, { onProgress }, transfer);
  }

  tokenize(text, { addSpecial = true, parseSpecial = false } = {}) {
    return this.request('tokenize', { text, addSpecial, parseSpecial });
  }

  detokenize(ids) { return this.request('detokenize', { ids: Array.from(ids) }); }

  // generate continues prompt (a string, "" = from BOS, or an array of
  // token ids) from an empty context.
  generate(prompt, options = {}) {
    if (typeof prompt !== 'string') prompt = Array.from(prompt);
    return this.stream('generate', { prompt, options });
  }

  // chat renders messages [{role, content}] with the model's chat template
  // and generates the assistant's reply.
  chat(messages, options = {}) {
    return this.stream('chat', { messages, options });
  }

  abort() { this.worker.postMessage({ op: 'abort' }); }

  memory() { return this.request('memory', {}); }

  close() { return this.request('close', {}); }

  terminate() { this.worker.terminate(); this.failAll(new Error('moonlm: terminated')); }

  stream(op, fields) {
    const queue = [];
    let wake = null;
    let done = false;
    const notify = () => { if (wake) { wake(); wake = null; } };
    const result = this.request(op, fields, {
      onText: (text) => { queue.push(text); notify(); },
    });
    result.then(() => { done = true; notify(); }, () => { done = true; notify(); });
    return {
      result,
      async *[Symbol.asyncIterator]() {
        for (;;) {
          if (queue.length) { yield queue.shift(); continue; }
          if (done) { await result; return; } // rethrows a failure
          await new Promise((r) => { wake = r; });
        }
      },
    };
  }
}
