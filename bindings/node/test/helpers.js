'use strict';
// Shared test setup: the library and the shared test data.
//
// The test data is $MOONLM_TESTDATA or ../shared/testdata beside the
// repository; tests that need it are skipped with a reason when it is absent.
// The library is found as the package finds it; when MOONLM_LIBRARY is set
// (as `make test-node` does) a library that fails to load fails the tests.
const fs = require('node:fs');
const path = require('node:path');
const moonlm = require('..');

const REPO = path.resolve(__dirname, '..', '..', '..');

function testdataRoot() {
  const env = process.env.MOONLM_TESTDATA;
  if (env) return fs.existsSync(env) ? env : null;
  const d = path.join(REPO, '..', 'shared', 'testdata');
  return fs.existsSync(d) ? d : null;
}

/** Why tests that need the library and file rel must skip, or false. */
function skipReason(rel) {
  try {
    moonlm.libraryPath();
  } catch (e) {
    if (process.env.MOONLM_LIBRARY) throw e; // asked for explicitly: fail
    return `libmoonlm.so not available (run \`make lib\`): ${e.message}`;
  }
  const root = testdataRoot();
  if (!root) return 'shared test data not found: set MOONLM_TESTDATA or place it at ../shared/testdata';
  if (rel && !fs.existsSync(path.join(root, rel))) return `test data file ${rel} absent`;
  return false;
}

function dataPath(rel) {
  return path.join(testdataRoot(), rel);
}

function readJsonl(rel) {
  return fs.readFileSync(dataPath(rel), 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
}

function logSoftmax(logits) {
  let m = -Infinity;
  for (const v of logits) if (v > m) m = v;
  let s = 0;
  for (const v of logits) s += Math.exp(v - m);
  const lse = m + Math.log(s);
  return Array.from(logits, (v) => v - lse);
}

const TOL = 0.02; // log-probability tolerance against llama.cpp (F16 KV cache both sides)

/** Asserts that our logits give the reference entry's top-10 log-probabilities. */
function assertCloseToRef(assert, logits, entry, where) {
  const lp = logSoftmax(logits);
  for (const [tok, logit] of entry.top) {
    const want = logit - entry.lse;
    assert.ok(Math.abs(lp[tok] - want) <= TOL,
      `${where}: token ${tok}: log-prob ${lp[tok].toFixed(4)}, llama.cpp ${want.toFixed(4)}`);
  }
}

/** How many greedy tokens are chosen without a near-tie (top two within 0.01). */
function tieFreePrefix(c) {
  const dists = [c.prompt_logits[c.prompt_logits.length - 1], ...c.greedy_logits];
  for (let k = 0; k < c.greedy.length; k++) {
    const top = dists[k].top;
    if (top[0][1] - top[1][1] < 0.01) return k;
  }
  return c.greedy.length;
}

module.exports = { moonlm, REPO, skipReason, dataPath, readJsonl, assertCloseToRef, tieFreePrefix, logSoftmax };
