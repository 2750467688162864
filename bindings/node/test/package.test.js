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

// The arm64 library `make lib-arm64` cross-compiles, when it has been built.
const ARM64_LIB = path.resolve(PKG, '..', '..', 'build', 'linux-arm64', 'libmoonlm.so');
const HOST = `${process.platform}-${process.arch}`;

it('installs from `npm pack` and finds its bundled library; other platforms get a clear error', { skip, timeout: 240000 }, () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'moonlm-pack-'));
  try {
    const env = { ...process.env };
    const lib = h.moonlm.libraryPath(); // the library these tests use
    // Pack a copy of the package, so that the lib/ folder prepack fills never
    // appears in the source tree while other test files load the library.
    const pkg = path.join(tmp, 'pkg');
    fs.mkdirSync(pkg);
    for (const f of ['package.json', 'index.js', 'index.mjs', 'index.d.ts', 'hub.js', 'state.js', 'checkpoint.js', 'batch.js', 'README.md', 'scripts']) {
      fs.cpSync(path.join(PKG, f), path.join(pkg, f), { recursive: true });
    }
    const packEnv = { ...env, MOONLM_LIBRARY: lib };
    const withArm64 = HOST !== 'linux-arm64' && fs.existsSync(ARM64_LIB);
    if (withArm64) packEnv.MOONLM_LIBRARY_LINUX_ARM64 = ARM64_LIB;
    // prepack copies the libraries into lib/<platform>/ for the tarball
    const packed = execFileSync('npm', ['pack', '--silent', '--pack-destination', tmp],
      { cwd: pkg, env: packEnv, encoding: 'utf8' }).trim().split('\n').pop();
    const tgz = path.join(tmp, packed);
    const listing = execFileSync('tar', ['tzf', tgz], { encoding: 'utf8' }).split('\n');
    const want = ['package/index.js', 'package/index.mjs', 'package/index.d.ts', 'package/hub.js', 'package/state.js', 'package/checkpoint.js', 'package/batch.js', `package/lib/${HOST}/libmoonlm.so`];
    if (withArm64) want.push('package/lib/linux-arm64/libmoonlm.so');
    for (const f of want) assert.ok(listing.includes(f), `${f} missing from the tarball`);
    const manifest = JSON.parse(execFileSync('tar', ['xzOf', tgz, 'package/package.json'], { encoding: 'utf8' }));
    for (const hook of ['preinstall', 'install', 'postinstall']) {
      assert.equal(manifest.scripts?.[hook], undefined, `package.json has a ${hook} script`);
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
    assert.equal(fs.realpathSync(libPath),
      fs.realpathSync(path.join(app, 'node_modules', 'moonlm', 'lib', HOST, 'libmoonlm.so')));
    assert.ok(text.startsWith(', there was'), text);

    // On a platform the tarball has no library for (here: this machine made
    // to say it is a riscv64 one once koffi, which ships its own binaries for
    // many platforms, has loaded), opening anything names the platforms that
    // exist and how to build from source.
    const fake = path.join(tmp, 'riscv64.js');
    fs.writeFileSync(fake, "require('node:module').createRequire(process.cwd() + '/')('koffi');\n" +
      "Object.defineProperty(process, 'arch', { value: 'riscv64' });\n");
    const probe = `try { require('moonlm').libraryPath(); console.log('loaded'); } catch (e) { console.log(e.message); }`;
    const msg = execFileSync(process.execPath, ['-r', fake, '-e', probe], { cwd: app, env, encoding: 'utf8' });
    assert.match(msg, new RegExp(`no prebuilt library for ${process.platform}-riscv64`));
    assert.match(msg, new RegExp(`carries libraries for [^.]*${HOST}`));
    if (withArm64) assert.match(msg, /linux-arm64/);
    assert.match(msg, /make lib/);
    assert.match(msg, /MOONLM_LIBRARY/);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
});
