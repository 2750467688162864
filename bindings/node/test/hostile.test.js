'use strict';
// Hostile files and parameters give the binding's error, never a crash, a
// hang or an allocation bomb. Each runs in a child process with a 4 GiB
// address-space limit (so that a huge allocation fails fast instead of
// eating the machine) and a timeout.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { spawnSync, execFileSync } = require('node:child_process');
const h = require('./helpers');

const skip = h.skipReason('models/stories260K.gguf');
const FIXTURE = path.join(__dirname, 'fixtures', 'hostile.js');

/** Runs fixtures/hostile.js CASE in a limited child; its JSON result. */
function hostile(kind, other = '') {
  const r = spawnSync('/bin/sh', ['-c', 'ulimit -v 4194304 && exec "$0" "$@"',
    process.execPath, FIXTURE, kind, h.dataPath('models/stories260K.gguf'), other],
  { encoding: 'utf8', timeout: 30000 });
  assert.equal(r.error, undefined, `${kind}: ${r.error}`);
  assert.equal(r.signal, null, `${kind}: killed by ${r.signal} (timeout or crash); stderr: ${r.stderr.slice(0, 1500)}`);
  assert.equal(r.status, 0, `${kind}: exit ${r.status}; stderr: ${r.stderr.slice(0, 1500)}`);
  return JSON.parse(r.stdout);
}

describe('hostile inputs', { skip }, () => {
  let tmp;
  before(() => { tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'moonlm-node-hostile-')); });
  after(() => tmp && fs.rmSync(tmp, { recursive: true, force: true }));

  for (const n of [2147483647, 100000000]) {
    it(`a file with llama.block_count = ${n} is BAD_FILE`, () => {
      const src = fs.readFileSync(h.dataPath('models/stories260K.gguf'));
      const file = path.join(tmp, `blocks-${n}.gguf`);
      fs.writeFileSync(file, h.ggufWith(src, 'llama.block_count', 'u32', n));
      const r = hostile('file', file);
      assert.equal(r.code, 'BAD_FILE', JSON.stringify(r));
      assert.match(r.message, /blocks-/);
    });
  }

  it('the GGUF writer makes a file that opens when nothing hostile is in it', () => {
    const src = fs.readFileSync(h.dataPath('models/stories260K.gguf'));
    const file = path.join(tmp, 'blocks-5.gguf');
    fs.writeFileSync(file, h.ggufWith(src, 'llama.block_count', 'u32', 5));
    assert.deepEqual(hostile('file', file), { ok: true });
  });

  it('a FIFO is refused with IO instead of blocking forever', () => {
    const fifo = path.join(tmp, 'model.fifo');
    execFileSync('mkfifo', [fifo]);
    const r = hostile('file', fifo);
    assert.equal(r.code, 'IO', JSON.stringify(r));
  });

  for (const kind of ['modelThreads', 'sessionThreads', 'penaltyLastN']) {
    it(`${kind} = 2**31-1 is INVALID_ARGUMENT`, () => {
      const r = hostile(kind);
      assert.equal(r.code, 'INVALID_ARGUMENT', JSON.stringify(r));
    });
  }
});
