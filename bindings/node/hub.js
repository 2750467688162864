'use strict';
// Downloading GGUF files from the Hugging Face Hub (Model.fromPretrained,
// pull): plain JavaScript over Node's fetch, not a call into libmoonlm, so
// the library stays a compute library that opens no sockets. The same rules
// as `moonlm pull` and the Hub's own tools: the cache layout
// <cache>/models--ORG--NAME/{blobs/<etag>, snapshots/<commit>/FILE -> blob,
// refs/<revision>} in HF_HUB_CACHE (else HF_HOME/hub, else
// ~/.cache/huggingface/hub), shared with them; resume from
// blobs/<etag>.incomplete with HTTP Range; an LFS file's sha256 checked
// against X-Linked-Etag; HF_TOKEN (else HF_HOME/token) sent to the Hub and
// never to the CDN it redirects to; HF_ENDPOINT; HF_HUB_OFFLINE=1 or an
// unreachable Hub uses the cache. Unlike `moonlm pull` and the Python
// binding, it takes no lock (Node has no flock): two processes downloading
// the same file at once may collide (one of them then fails; run it again).

const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const DEFAULT_ENDPOINT = 'https://huggingface.co';
const REPO = /^[A-Za-z0-9][A-Za-z0-9._-]{0,95}\/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$/;
const ETAG = /^[A-Za-z0-9_-]{1,128}$/;
const COMMIT = /^[0-9a-f]{40}$/;
const MAX_FILE = 2 ** 40; // the largest size the Hub may announce for a file
const MAX_LISTING = 16 << 20;

/** The Hub refused or could not serve a file; .status is the HTTP status (0 if none). */
class HubError extends Error {
  constructor(message, status = 0, opts) {
    super(message, opts);
    this.name = 'HubError';
    this.status = status;
  }
}

function truthy(v) { return ['1', 'true', 'yes', 'on'].includes(String(v || '').trim().toLowerCase()); }

function hfHome() {
  if (process.env.HF_HOME) return process.env.HF_HOME;
  const xdg = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(xdg, 'huggingface');
}

/** The Hub cache folder: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub. */
function cacheDir() { return process.env.HF_HUB_CACHE || path.join(hfHome(), 'hub'); }

function envToken() {
  const t = (process.env.HF_TOKEN || '').trim();
  if (t) return t;
  try {
    const f = path.join(hfHome(), 'token');
    if (fs.statSync(f).size < 4096) return fs.readFileSync(f, 'utf8').trim() || null;
  } catch { /* no token file */ }
  return null;
}

function checkFile(f) {
  const parts = f.split('/');
  if (!f || f.length > 1024 || f.startsWith('/') || f.includes('\\') || f.includes('\0') ||
    parts.some((p) => p === '' || p === '.' || p === '..')) {
    throw new TypeError(`moonlm: ${JSON.stringify(f)} is not a file path in a repository`);
  }
}

const isExact = (p) => !/[*?[]/.test(p) && (p.toLowerCase().endsWith('.gguf') || p.includes('/'));

function globToRegExp(g) {
  let re = '';
  for (const ch of g) {
    if (ch === '*') re += '.*';
    else if (ch === '?') re += '.';
    else re += ch.replace(/[\\^$.+()|{}[\]]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/**
 * The GGUF file pattern names among files: the file itself; a glob
 * ("*Q4_K_M.gguf"); a quantization name the file's name contains (any case,
 * "q8_0"); with no pattern, the only GGUF file, else the Q4_K_M one.
 * Anything ambiguous throws, listing the candidates.
 */
function choose(repo, files, pattern) {
  const ggufs = files.filter((f) => f.toLowerCase().endsWith('.gguf')).sort();
  if (pattern && files.includes(pattern)) return pattern;
  let matches;
  if (pattern && /[*?]/.test(pattern)) {
    const re = globToRegExp(pattern);
    matches = files.filter((f) => re.test(f));
    if (!matches.length) throw new HubError(`moonlm: no file of ${repo} matches ${JSON.stringify(pattern)}; its GGUF files: ${ggufs.join(', ')}`, 404);
  } else if (pattern && isExact(pattern)) {
    throw new HubError(`moonlm: ${repo} has no file ${pattern}`, 404);
  } else {
    if (!ggufs.length) throw new HubError(`moonlm: ${repo} has no .gguf file`, 404);
    const quant = (pattern || (ggufs.length === 1 ? '' : 'Q4_K_M')).toLowerCase();
    matches = ggufs.filter((f) => f.split('/').pop().toLowerCase().includes(quant));
    if (!matches.length) {
      if (pattern) throw new HubError(`moonlm: no .gguf file of ${repo} has ${JSON.stringify(pattern)} in its name; it has: ${ggufs.join(', ')}`, 404);
      throw new HubError(`moonlm: ${repo} has several .gguf files; pass a file name, a glob or a quantization like 'Q8_0': ${ggufs.join(', ')}`, 404);
    }
  }
  if (matches.length > 1) throw new HubError(`moonlm: ${matches.length} files of ${repo} match; name one: ${matches.join(', ')}`, 404);
  return matches[0];
}

function httpError(res, url) {
  const msg = (res.headers.get('x-error-message') || '').trim().slice(0, 300);
  let hint = '';
  if (res.status === 401 || res.status === 403) hint = ': the repository is private or gated, or does not exist; set HF_TOKEN to a token that can read it';
  else if (res.status === 404) hint = ': no such repository, file or revision';
  return new HubError(`moonlm: ${url}: HTTP ${res.status}${msg ? ` (${msg})` : ''}${hint}`, res.status);
}

const bytes = (n) => {
  if (n < 1024) return `${Math.floor(n)} B`;
  let u = 0;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  n /= 1024;
  while (n >= 1024 && u < units.length - 1) { n /= 1024; u++; }
  return `${n.toFixed(1)} ${units[u]}`;
};
const clock = (s) => {
  s = Math.round(s);
  const mm = String(Math.floor(s / 60) % 60).padStart(2, '0');
  const ss = String(s % 60).padStart(2, '0');
  return s >= 3600 ? `${Math.floor(s / 3600)}:${mm}:${ss}` : `${Math.floor(s / 60)}:${ss}`;
};

/**
 * Progress on a stream (default stderr): one line redrawn in place on a
 * terminal (bytes, rate, ETA); plain lines every few seconds and at the end
 * otherwise. now() is in seconds.
 */
function terminalProgress(stream = process.stderr, tty = Boolean(stream.isTTY), now = () => performance.now() / 1000) {
  let file = null; let start = 0; let origin = 0; let last = null;
  return (f, done, total) => {
    const t = now();
    if (f !== file) { file = f; start = t; origin = done; last = null; }
    const finished = total >= 0 && done >= total;
    if (!tty && !finished && last !== null && t - last < 5) return;
    last = t;
    const elapsed = t - start;
    const rate = elapsed > 0 ? (done - origin) / elapsed : 0;
    let line = `${f}  ${bytes(done)}`;
    if (total >= 0) line += ` / ${bytes(total)}  ${String(Math.round(total ? (100 * done) / total : 100)).padStart(3)}%`;
    line += `  ${bytes(rate)}/s`;
    if (total >= 0 && done < total && rate > 0) line += `  ETA ${clock((total - done) / rate)}`;
    else if (finished) line += `  done in ${clock(elapsed)}`;
    stream.write(tty ? `\r\x1b[K${line}${finished ? '\n' : ''}` : `${line}\n`);
  };
}

class Restart extends Error {}

/** One configuration: endpoint, cache, token, revision, offline, progress. */
class Hub {
  constructor(opts = {}) {
    this.endpoint = (opts.endpoint || process.env.HF_ENDPOINT || DEFAULT_ENDPOINT).replace(/\/+$/, '');
    let u;
    try { u = new URL(this.endpoint); } catch { u = null; }
    if (!u || !['http:', 'https:'].includes(u.protocol)) throw new TypeError(`moonlm: endpoint ${JSON.stringify(this.endpoint)} is not an http(s) URL`);
    this.host = u.host;
    this.cache = opts.cacheDir != null ? String(opts.cacheDir) : cacheDir();
    this.token = opts.token != null ? opts.token : envToken();
    this.revision = opts.revision || 'main';
    if (this.revision.includes('..') || /[\\\0]/.test(this.revision) || this.revision.length > 256) {
      throw new TypeError(`moonlm: ${JSON.stringify(this.revision)} is not a revision`);
    }
    this.offline = opts.offline != null ? Boolean(opts.offline) : truthy(process.env.HF_HUB_OFFLINE);
    this.progress = opts.progress || null;
  }

  repoDir(repo) { return path.join(this.cache, `models--${repo.replace('/', '--')}`); }

  async request(url, { method = 'GET', headers = {} } = {}) {
    const h = { 'User-Agent': 'moonlm', ...headers };
    if (this.token && new URL(url).host === this.host) h.Authorization = `Bearer ${this.token}`; // never to the CDN
    return fetch(url, { method, headers: h, redirect: 'manual' });
  }

  /** The repository's files (GET /api/models/{repo}/revision/{revision}). */
  async files(repo) {
    const url = `${this.endpoint}/api/models/${repo}/revision/${encodeURIComponent(this.revision)}`;
    const res = await this.request(url);
    if (res.status !== 200) { await res.body?.cancel(); throw httpError(res, url); }
    const body = Buffer.from(await res.arrayBuffer());
    if (body.length > MAX_LISTING) throw new HubError(`moonlm: listing ${repo}: the answer is over ${MAX_LISTING} bytes`);
    try {
      return JSON.parse(body.toString('utf8')).siblings.map((s) => String(s.rfilename));
    } catch (e) {
      throw new HubError(`moonlm: listing ${repo}: ${e.message}`);
    }
  }

  /** The local path of the file of repo that pattern names (see choose), downloaded unless cached. */
  async fetch(repo, pattern) {
    if (typeof repo !== 'string' || !REPO.test(repo) || repo.includes('..')) {
      throw new TypeError(`moonlm: ${JSON.stringify(repo)} is not a repository name of the form org/name`);
    }
    if (this.offline) {
      try { return this.cached(repo, pattern); } catch (e) {
        throw new HubError(`moonlm: offline (HF_HUB_OFFLINE): ${e.message}`, e.status || 0);
      }
    }
    try {
      const name = pattern && isExact(pattern) ? pattern : choose(repo, await this.files(repo), pattern);
      return await this.download(repo, name);
    } catch (e) {
      if (!(e instanceof TypeError && e.message === 'fetch failed')) throw e;
      // the network failed, not the Hub saying no: the cache will do
      try { return this.cached(repo, pattern); } catch {
        throw new HubError(`moonlm: cannot reach ${this.endpoint}: ${e.cause?.message || e.message}`, 0, { cause: e });
      }
    }
  }

  cached(repo, pattern) {
    const d = this.repoDir(repo);
    let commit = this.revision;
    if (!COMMIT.test(commit)) {
      try { commit = fs.readFileSync(path.join(d, 'refs', commit), 'utf8').trim(); } catch {
        throw new HubError(`${repo} (revision ${this.revision}) is not in the cache ${this.cache}`, 404);
      }
      if (!COMMIT.test(commit)) throw new HubError(`the cache's refs/${this.revision} of ${repo} holds no commit`);
    }
    const snap = path.join(d, 'snapshots', commit);
    const files = [];
    const walk = (dir, rel) => {
      let ents = [];
      try { ents = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
      for (const e of ents) {
        const r = rel ? `${rel}/${e.name}` : e.name;
        if (e.isDirectory()) walk(path.join(dir, e.name), r);
        else if (fs.existsSync(path.join(dir, e.name))) files.push(r);
      }
    };
    walk(snap, '');
    if (pattern && isExact(pattern)) {
      if (!files.includes(pattern)) throw new HubError(`${pattern} of ${repo} is not in the cache ${this.cache}`, 404);
      return path.join(snap, pattern);
    }
    try { return path.join(snap, choose(repo, files, pattern)); } catch (e) {
      throw new HubError(`in the cache: ${e.message}`, 404);
    }
  }

  /** {commit, etag, size, url} from HEAD .../resolve/..., following same-host redirects only. */
  async head(repo, file) {
    let url = `${this.endpoint}/${repo}/resolve/${encodeURIComponent(this.revision)}/${file.split('/').map(encodeURIComponent).join('/')}`;
    for (let hop = 0; hop < 6; hop++) {
      const res = await this.request(url, { method: 'HEAD' });
      const loc = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && loc) {
        const next = new URL(loc, url);
        if (next.host === this.host) { url = next.href; continue; }
        return meta(file, res.headers, null, next.href);
      }
      if (res.status === 200) return meta(file, res.headers, res.headers.get('content-length'), url);
      throw httpError(res, url);
    }
    throw new HubError(`moonlm: ${file}: too many redirects`);
  }

  /** Fetches one file into the cache (unless its blob is there); its path in the snapshot folder. */
  async download(repo, file) {
    checkFile(file);
    const m = await this.head(repo, file);
    const d = this.repoDir(repo);
    const blob = path.join(d, 'blobs', m.etag);
    const pointer = path.join(d, 'snapshots', m.commit, ...file.split('/'));
    let ok = false;
    try { ok = fs.statSync(blob).isFile() && (m.size < 0 || fs.statSync(blob).size === m.size); } catch { /* absent */ }
    if (!ok) await this.downloadBlob(file, m, blob);
    fs.mkdirSync(path.dirname(pointer), { recursive: true });
    const rel = path.relative(path.dirname(pointer), blob);
    let cur = null;
    try { cur = fs.readlinkSync(pointer); } catch { /* absent */ }
    if (cur !== rel) {
      // A link under a name of this call's own, renamed over the pointer:
      // concurrent fetches of one file each replace it atomically.
      const tmp = `${pointer}.${process.pid}.${crypto.randomBytes(6).toString('hex')}.link`;
      fs.symlinkSync(rel, tmp);
      try {
        fs.renameSync(tmp, pointer);
      } catch (e) {
        fs.rmSync(tmp, { force: true });
        throw e;
      }
    }
    if (this.revision !== m.commit) {
      const ref = path.join(d, 'refs', this.revision);
      fs.mkdirSync(path.dirname(ref), { recursive: true });
      fs.writeFileSync(ref, m.commit);
    }
    return pointer;
  }

  async downloadBlob(file, m, blob) {
    fs.mkdirSync(path.dirname(blob), { recursive: true });
    const part = `${blob}.incomplete`;
    const lfs = /^[0-9a-f]{64}$/.test(m.etag); // its etag is its sha256
    const fd = fs.openSync(part, 'a+');
    let have = 0;
    let hash = lfs ? crypto.createHash('sha256') : null;
    try {
      const buf = Buffer.alloc(1 << 20);
      for (let n; (n = fs.readSync(fd, buf, 0, buf.length, have)) > 0; have += n) hash?.update(buf.subarray(0, n));
      const reset = () => { fs.ftruncateSync(fd, 0); have = 0; hash = lfs ? crypto.createHash('sha256') : null; };
      if (m.size >= 0 && have > m.size) reset();
      for (let attempt = 0; ; attempt++) {
        try {
          have = await this.get(file, m, fd, () => hash, have, reset);
          break;
        } catch (e) {
          if (!(e instanceof Restart)) throw e;
          if (attempt) throw new HubError(`moonlm: ${file}: the server cannot resume the download`);
          reset();
        }
      }
    } finally {
      fs.closeSync(fd);
    }
    if (m.size >= 0 && have !== m.size) throw new HubError(`moonlm: ${file}: got ${have} bytes, the Hub said ${m.size} (run again to resume)`);
    if (hash) {
      const got = hash.digest('hex');
      if (got !== m.etag) {
        fs.rmSync(part, { force: true });
        throw new HubError(`moonlm: ${file}: sha256 ${got} does not match the Hub's ${m.etag}: the download is corrupt (removed; try again)`);
      }
    }
    fs.renameSync(part, blob);
  }

  async get(file, m, fd, hashOf, have, reset) {
    if (m.size >= 0 && have === m.size) return have;
    let url = m.url;
    let res;
    for (let hop = 0; ; hop++) {
      res = await this.request(url, { headers: have > 0 ? { Range: `bytes=${have}-` } : {} });
      const loc = res.headers.get('location');
      if (res.status >= 300 && res.status < 400 && loc && hop < 5) { await res.body?.cancel(); url = new URL(loc, url).href; continue; }
      break;
    }
    if (res.status === 416) { await res.body?.cancel(); throw new Restart(); }
    if (res.status === 206 && have > 0) {
      const mm = /^bytes (\d+)-/.exec(res.headers.get('content-range') || '');
      if (!mm || Number(mm[1]) !== have) { await res.body?.cancel(); throw new Restart(); }
    } else if (res.status === 200) {
      if (have > 0) { reset(); have = 0; } // the whole file again: start over
    } else {
      await res.body?.cancel();
      throw httpError(res, url);
    }
    let last = 0;
    try {
      for await (const chunk of res.body) {
        if (m.size >= 0 && have + chunk.length > m.size) throw new HubError(`moonlm: ${file}: the server sent more than the ${m.size} bytes the Hub said`);
        fs.writeSync(fd, chunk, 0, chunk.length, have);
        hashOf()?.update(chunk);
        have += chunk.length;
        if (this.progress && performance.now() - last >= 100) { this.progress(file, have, m.size); last = performance.now(); }
      }
    } catch (e) {
      if (e instanceof HubError) throw e;
      throw new HubError(`moonlm: downloading ${file}: ${e.cause?.message || e.message} (run again to resume)`, 0, { cause: e });
    }
    if (this.progress) this.progress(file, have, m.size);
    return have;
  }
}

function meta(file, h, length, url) {
  const commit = h.get('x-repo-commit') || '';
  if (!COMMIT.test(commit)) throw new HubError(`moonlm: ${file}: the Hub's answer has no commit (X-Repo-Commit ${JSON.stringify(commit.slice(0, 80))})`);
  const raw = h.get('x-linked-etag') || h.get('etag') || '';
  const etag = raw.replace(/^W\//, '').replace(/^"|"$/g, '');
  if (!ETAG.test(etag)) throw new HubError(`moonlm: ${file}: the Hub's answer has no usable ETag (${JSON.stringify(raw.slice(0, 80))})`);
  const s = h.get('x-linked-size') ?? length;
  let size = -1;
  if (s != null) {
    if (!/^\d{1,16}$/.test(s)) throw new HubError(`moonlm: ${file}: bad size ${JSON.stringify(String(s).slice(0, 40))}`);
    size = Number(s);
    if (size > MAX_FILE) throw new HubError(`moonlm: ${file}: the Hub says it is ${size} bytes, over the ${MAX_FILE} this accepts`);
  }
  return { commit, etag, size, url };
}

/**
 * The local path of a GGUF file of a Hub repository, downloaded into the Hub
 * cache unless it is there. pattern: a file name, a glob ("*Q4_K_M.gguf")
 * or a quantization ("q8_0"); none: the only GGUF file, or the Q4_K_M one.
 * opts: revision, cacheDir, token, endpoint, offline, progress (true: to
 * stderr, the default; false: none; or a function (file, done, total)).
 */
async function pull(repo, pattern, opts = {}) {
  const progress = opts.progress === false ? null
    : typeof opts.progress === 'function' ? opts.progress : terminalProgress();
  return new Hub({ ...opts, progress }).fetch(repo, pattern || undefined);
}

module.exports = { Hub, HubError, pull, choose, cacheDir, terminalProgress };
