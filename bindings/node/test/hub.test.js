'use strict';
// Model.fromPretrained and pull against a fake Hub on loopback started here
// (never the internet), with HF_HOME in a temporary folder.
const { it, before, after, beforeEach } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http = require('node:http');
const os = require('node:os');
const path = require('node:path');
const h = require('./helpers');
const { Hub, terminalProgress } = require('../hub');

const COMMIT = '0123456789abcdef0123456789abcdef01234567';
const TOKEN = 'hf_secret';
const sha = (b) => crypto.createHash('sha256').update(b).digest('hex');
const skip = h.skipReason('models/stories260K.gguf');

// Answers like the Hub: file lists, resolve redirects (LFS files to a CDN on
// another port, with X-Linked-Etag/X-Linked-Size/X-Repo-Commit), small files
// directly, ranges, 401 for a private repository without the token, 404.
// cut/corrupt misbehave once.
class FakeHub {
  constructor(files) {
    this.files = files;
    this.cut = 0;
    this.corrupt = false;
    this.cdnAuth = [];
    this.cdnRanges = [];
    this.hub = http.createServer((q, r) => this.serveHub(q, r));
    this.cdn = http.createServer((q, r) => this.serveCDN(q, r));
  }

  async start() {
    await Promise.all([this.hub, this.cdn].map((s) => new Promise((ok) => s.listen(0, '127.0.0.1', ok))));
    this.url = `http://127.0.0.1:${this.hub.address().port}`;
    this.cdnUrl = `http://127.0.0.1:${this.cdn.address().port}`;
  }

  async close() {
    for (const s of [this.hub, this.cdn]) {
      s.closeAllConnections();
      await new Promise((ok) => s.close(ok));
    }
  }

  refuse(q, r, repo) {
    if (!this.files[repo]) {
      r.writeHead(401, { 'X-Error-Code': 'RepoNotFound' }).end();
    } else if (repo === 'org/gated' && q.headers.authorization !== `Bearer ${TOKEN}`) {
      r.writeHead(401, { 'X-Error-Code': 'GatedRepo', 'X-Error-Message': 'Access to this repo is restricted' }).end();
    } else {
      return false;
    }
    return true;
  }

  serveHub(q, r) {
    const parts = q.url.slice(1).split('/');
    if (parts[0] === 'api' && parts[1] === 'models') {
      const repo = `${parts[2]}/${parts[3]}`;
      if (this.refuse(q, r, repo)) return;
      r.end(JSON.stringify({ id: repo, sha: COMMIT, siblings: Object.keys(this.files[repo]).map((f) => ({ rfilename: f })) }));
      return;
    }
    if (parts[2] !== 'resolve') { r.writeHead(404).end(); return; }
    const repo = `${parts[0]}/${parts[1]}`;
    const name = parts.slice(4).map(decodeURIComponent).join('/');
    if (this.refuse(q, r, repo)) return;
    const data = this.files[repo][name];
    if (!data) { r.writeHead(404, { 'X-Error-Code': 'EntryNotFound' }).end(); return; }
    if (name.endsWith('.gguf')) {
      r.writeHead(302, {
        'X-Repo-Commit': COMMIT, ETag: '"not-the-sha"', 'X-Linked-Etag': `"${sha(data)}"`,
        'X-Linked-Size': String(data.length), Location: `${this.cdnUrl}/blobs/${sha(data)}`,
      }).end();
      return;
    }
    r.writeHead(200, { 'X-Repo-Commit': COMMIT, ETag: `"${data.length.toString(16).padStart(40, '0')}"`, 'Content-Length': data.length });
    r.end(q.method === 'HEAD' ? undefined : data);
  }

  serveCDN(q, r) {
    this.cdnAuth.push(q.headers.authorization);
    this.cdnRanges.push(q.headers.range);
    const want = q.url.split('/').pop();
    let data = Object.values(this.files).flatMap((fs) => Object.values(fs)).find((d) => sha(d) === want);
    if (!data) { r.writeHead(404).end(); return; }
    if (this.corrupt) {
      this.corrupt = false;
      data = Buffer.from(data);
      data[data.length >> 1] ^= 1;
    }
    if (this.cut && !q.headers.range) {
      const cut = this.cut;
      this.cut = 0;
      r.writeHead(200, { 'Content-Length': data.length });
      r.write(data.subarray(0, cut), () => r.socket.destroy());
      return;
    }
    const m = /^bytes=(\d+)-$/.exec(q.headers.range || '');
    const start = m ? Number(m[1]) : 0;
    if (m) r.writeHead(206, { 'Content-Range': `bytes ${start}-${data.length - 1}/${data.length}`, 'Content-Length': data.length - start });
    else r.writeHead(200, { 'Content-Length': data.length });
    r.end(data.subarray(start));
  }
}

let fake;
let home;
const saved = {};
const rnd = (n) => crypto.randomBytes(n);

before(async () => {
  for (const k of ['HF_HOME', 'HF_ENDPOINT', 'HF_HUB_CACHE', 'HF_TOKEN', 'HF_HUB_OFFLINE']) saved[k] = process.env[k];
});
beforeEach(async () => {
  if (fake) await fake.close();
  if (home) fs.rmSync(home, { recursive: true, force: true });
  const stories = skip ? Buffer.from('not a model') : fs.readFileSync(h.dataPath('models/stories260K.gguf'));
  fake = new FakeHub({
    'org/model': { 'stories260K-Q8_0.gguf': stories, 'other-Q4_K_M.gguf': rnd(200000), 'README.md': Buffer.from('# a model\n') },
    'org/gated': { 'gated-Q4_0.gguf': rnd(1000) },
  });
  await fake.start();
  home = fs.mkdtempSync(path.join(os.tmpdir(), 'moonlm-hub-'));
  process.env.HF_HOME = path.join(home, 'hf');
  process.env.HF_ENDPOINT = fake.url;
  for (const k of ['HF_HUB_CACHE', 'HF_TOKEN', 'HF_HUB_OFFLINE']) delete process.env[k];
});
after(async () => {
  if (fake) await fake.close();
  if (home) fs.rmSync(home, { recursive: true, force: true });
  for (const [k, v] of Object.entries(saved)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
});

it('Model.fromPretrained downloads into the Hub cache layout and opens the model', { skip }, async () => {
  const lines = [];
  const model = await h.moonlm.Model.fromPretrained('org/model', 'q8_0', { threads: 1, progress: (f, d, t) => lines.push([f, d, t]) });
  const text = await model.generate('Once upon a time', { maxTokens: 8, temperature: 0 });
  model.close();
  assert.ok(text.startsWith(', there was'), text);
  const repo = path.join(home, 'hf', 'hub', 'models--org--model');
  const data = fake.files['org/model']['stories260K-Q8_0.gguf'];
  const pointer = path.join(repo, 'snapshots', COMMIT, 'stories260K-Q8_0.gguf');
  assert.equal(fs.readlinkSync(pointer), path.join('..', '..', 'blobs', sha(data)));
  assert.equal(fs.readFileSync(path.join(repo, 'refs', 'main'), 'utf8'), COMMIT);
  assert.deepEqual(lines.at(-1), ['stories260K-Q8_0.gguf', data.length, data.length]);
  assert.deepEqual(fs.readdirSync(path.join(repo, 'blobs')), [sha(data)]);
  // Again: from the cache; an exact name needs no listing, a glob works.
  const n = fake.cdnRanges.length;
  assert.equal(await h.moonlm.pull('org/model', 'stories260K-Q8_0.gguf', { progress: false }), pointer);
  assert.equal(await h.moonlm.pull('org/model', '*Q8_0.gguf', { progress: false }), pointer);
  assert.equal(fake.cdnRanges.length, n);
});

it('resumes a download that stopped, with Range', async () => {
  fake.cut = 70000;
  await assert.rejects(new Hub().fetch('org/model', 'Q4_K_M'), { name: 'HubError' });
  const data = fake.files['org/model']['other-Q4_K_M.gguf'];
  const part = path.join(home, 'hf', 'hub', 'models--org--model', 'blobs', `${sha(data)}.incomplete`);
  assert.equal(fs.statSync(part).size, 70000);
  const p = await new Hub().fetch('org/model', 'Q4_K_M');
  assert.deepEqual(fake.cdnRanges, [undefined, 'bytes=70000-']);
  assert.deepEqual(fs.readFileSync(p), data);
});

it('refuses a file whose sha256 does not match X-Linked-Etag', async () => {
  fake.corrupt = true;
  await assert.rejects(new Hub().fetch('org/model', 'Q4_K_M'), /sha256 [0-9a-f]+ does not match/);
  assert.deepEqual(fs.readdirSync(path.join(home, 'hf', 'hub', 'models--org--model', 'blobs')), []);
});

it('says what the Hub refused; the token goes to the Hub, never the CDN', async () => {
  await assert.rejects(new Hub().fetch('org/gated', 'Q4_0'), (e) => e.status === 401 && /restricted.*HF_TOKEN/.test(e.message));
  await assert.rejects(new Hub().fetch('org/model', 'missing.gguf'), (e) => e.status === 404);
  await assert.rejects(new Hub().fetch('org/model', 'IQ2'), /no .gguf file of org\/model has "IQ2"/);
  await assert.rejects(new Hub().fetch('not-a-repo'), /org\/name/);
  process.env.HF_TOKEN = TOKEN;
  const p = await new Hub().fetch('org/gated', 'q4_0');
  assert.deepEqual(fs.readFileSync(p), fake.files['org/gated']['gated-Q4_0.gguf']);
  assert.deepEqual(new Set(fake.cdnAuth), new Set([undefined]));
});

it('uses the cache offline and when the Hub is unreachable', async () => {
  const p = await new Hub().fetch('org/model', 'Q8_0');
  await fake.close();
  fake = null;
  assert.equal(await new Hub().fetch('org/model', 'Q8_0'), p);
  process.env.HF_HUB_OFFLINE = '1';
  assert.equal(await new Hub().fetch('org/model', 'q8_0'), p);
  assert.equal(await new Hub().fetch('org/model', 'stories260K-Q8_0.gguf'), p);
  await assert.rejects(new Hub().fetch('org/model', 'Q4_K_M'), /offline/);
});

it('draws progress as one line on a terminal, plain lines otherwise', () => {
  for (const tty of [false, true]) {
    let out = '';
    let now = 0;
    const p = terminalProgress({ write: (s) => { out += s; } }, tty, () => now);
    p('m.gguf', 0, 100 << 20);
    for (let i = 1; i <= 10; i++) { now = i; p('m.gguf', i * 10 << 20, 100 << 20); }
    if (!tty) {
      const lines = out.trim().split('\n');
      assert.equal(lines.length, 3);
      assert.equal(lines[1], 'm.gguf  50.0 MiB / 100.0 MiB   50%  10.0 MiB/s  ETA 0:05');
      assert.equal(lines[2], 'm.gguf  100.0 MiB / 100.0 MiB  100%  10.0 MiB/s  done in 0:10');
    } else {
      assert.equal(out.split('\r\x1b[K').length - 1, 11);
      assert.equal(out.split('\n').length - 1, 1);
    }
  }
});
