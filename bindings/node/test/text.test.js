'use strict';
// The pure-JS streaming helpers, with a fake detokenizer (no library needed).
const test = require('node:test');
const assert = require('node:assert/strict');
const { IncrementalDetokenizer, StopFilter } = require('..');

// SentencePiece-like pieces with a leading space dropped after BOS (1), and
// byte tokens that together make multi-byte characters.
const e = Buffer.from('é');
const smile = Buffer.from('😀');
const VOCAB = {
  1: Buffer.alloc(0), 10: Buffer.from(' Once'), 11: Buffer.from(' upon'), 12: Buffer.from(' a'),
  13: Buffer.from(' time'), 14: Buffer.from(','), 20: e.subarray(0, 1), 21: e.subarray(1),
  22: smile.subarray(0, 2), 23: smile.subarray(2), 24: Buffer.from([0xff]),
};

function fakeDetok(tokens) {
  const toks = Array.from(tokens);
  let out = Buffer.concat(toks.map((t) => VOCAB[t]));
  const body = toks.filter((t) => t !== 1);
  if (toks[0] === 1 && body.length && VOCAB[body[0]][0] === 0x20) out = out.subarray(1);
  return out;
}

function stream(tokens, context = [1]) {
  const d = new IncrementalDetokenizer(fakeDetok, context);
  const pieces = tokens.map((t) => d.push(t));
  pieces.push(d.flush());
  return pieces;
}

test('pieces join to the whole text, with the tokenizer joining rules', () => {
  const toks = [10, 11, 12, 13, 14, 20, 21, 12, 22, 23];
  const pieces = stream(toks);
  assert.equal(pieces.join(''), fakeDetok([1, ...toks]).toString());
  assert.equal(pieces[0], 'Once');
  assert.equal(pieces[1], ' upon');
});

test('partial characters are held back, unfinished ones flush as U+FFFD', () => {
  assert.deepEqual(stream([10, 20, 21, 22, 23]), ['Once', '', 'é', '', '😀', '']);
  assert.deepEqual(stream([10, 20]), ['Once', '', '\ufffd']);
  assert.deepEqual(stream([10, 24]), ['Once', '\ufffd', '']);
});

test('context tokens are not emitted', () => {
  assert.equal(stream([13, 14], [1, 10, 11, 12]).join(''), ' time,');
});

function runStop(stops, pieces) {
  const f = new StopFilter(stops);
  const out = [];
  for (const p of pieces) {
    out.push(f.push(p));
    if (f.done) break;
  }
  out.push(f.push('', true));
  return { text: out.join(''), out, done: f.done };
}

test('stop strings split across pieces are caught and not shown', () => {
  for (const pieces of [['Hello wor', 'ld. END and more'], ['Hello world.', ' E', 'N', 'D!'], ['Hello world. END']]) {
    const r = runStop(['END'], pieces);
    assert.equal(r.text, 'Hello world. ');
    assert.ok(r.done);
  }
});

test('earliest of several stops wins; held text is released when it is no stop', () => {
  let r = runStop(['xyz', 'bc'], ['a', 'b', 'c', 'd']);
  assert.equal(r.text, 'a');
  r = runStop(['abcd'], ['ab', 'c', 'x']);
  assert.deepEqual(r.out.slice(0, 2), ['', '']);
  assert.equal(r.text, 'abcx');
  assert.ok(!r.done);
  assert.throws(() => new StopFilter([1]), TypeError);
});
