'use strict';
// Packaging: the ES module entry, and `npm pack` + install into a fresh
// project that finds the bundled library with no MOONLM_LIBRARY set.
const { it } = require('node:test');
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const h = require('./helpers');

const PKG = path.resolve(__dirname, '..');
const skip = h.skipReason('models/stories260K.gguf');

it('loads as an ES module with named and default exports', { skip }, () => {
  const url = new URL(`file://${path.join(PKG, 'index.mjs')}`).href;
  const src = `import moonlm, { Model, MoonlmError, Status } from ${JSON.stringify(url)};
    const m = await Model.open(process.argv[1], { threads: 1 });
    const text = await m.generate('Once upon a time', { maxTokens: 8, temperature: 0 });
    m.close();
    console.log(JSON.stringify([typeof moonlm.Model, typeof MoonlmError, Status.CONTEXT_FULL, text]));`;
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', src, h.dataPath('models/stories260K.gguf')],
    { encoding: 'utf8' });
  const [kind, errKind, st, text] = JSON.parse(out);
  assert.equal(kind, 'function');
  assert.equal(errKind, 'function');
  assert.equal(st, 6);
  assert.ok(text.startsWith(', there was'), text);
});

it('installs from `npm pack` and finds its bundled library', { skip, timeout: 240000 }, () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'moonlm-pack-'));
  try {
    const env = { ...process.env };
    const lib = h.moonlm.libraryPath(); // the library these tests use
    // Pack a copy of the package, so that the lib/ folder prepack fills never
    // appears in the source tree while other test files load the library.
    const pkg = path.join(tmp, 'pkg');
    fs.mkdirSync(pkg);
    for (const f of ['package.json', 'index.js', 'index.mjs', 'index.d.ts', 'state.js', 'README.md', 'scripts']) {
      fs.cpSync(path.join(PKG, f), path.join(pkg, f), { recursive: true });
    }
    // prepack copies the library into lib/ for the tarball
    const packed = execFileSync('npm', ['pack', '--silent', '--pack-destination', tmp],
      { cwd: pkg, env: { ...env, MOONLM_LIBRARY: lib }, encoding: 'utf8' }).trim().split('\n').pop();
    const tgz = path.join(tmp, packed);
    const listing = execFileSync('tar', ['tzf', tgz], { encoding: 'utf8' });
    for (const f of ['package/index.js', 'package/index.mjs', 'package/index.d.ts', 'package/state.js', 'package/lib/libmoonlm.so']) {
      assert.ok(listing.includes(f), `${f} missing from the tarball`);
    }
    const app = path.join(tmp, 'app');
    fs.mkdirSync(app);
    fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'app', private: true }));
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', '--silent', tgz],
      { cwd: app, env, stdio: 'pipe' });
    delete env.MOONLM_LIBRARY;
    const src = `const m = require('moonlm');
      m.Model.open(process.argv[1], { threads: 1 }).then(async (model) => {
        const text = await model.generate('Once upon a time', { maxTokens: 8, temperature: 0 });
        model.close();
        console.log(JSON.stringify([m.libraryPath(), text]));
      });`;
    const out = execFileSync(process.execPath, ['-e', src, h.dataPath('models/stories260K.gguf')],
      { cwd: app, env, encoding: 'utf8' });
    const [libPath, text] = JSON.parse(out);
    assert.equal(fs.realpathSync(libPath), fs.realpathSync(path.join(app, 'node_modules', 'moonlm', 'lib', 'libmoonlm.so')));
    assert.ok(text.startsWith(', there was'), text);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
