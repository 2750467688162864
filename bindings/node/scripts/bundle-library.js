'use strict';
// `npm pack` hooks. prepack copies the prebuilt libraries into
// lib/<platform>-<arch>/libmoonlm.so, so the tarball carries them and needs
// no install script and no compiler; postpack (--clean) removes lib/ again,
// so that a source checkout keeps loading the fresh build/libmoonlm.so
// rather than a stale copy.
//
// Where each platform's library comes from (relative to the repository),
// unless MOONLM_LIBRARY_<PLATFORM> names it (MOONLM_LIBRARY_LINUX_ARM64):
//   this machine's platform: MOONLM_LIBRARY, else build/libmoonlm.so (`make lib`);
//   linux-arm64 on another machine: build/linux-arm64/libmoonlm.so (`make lib-arm64`);
//   linux-x64 on another machine: build/linux-x64/libmoonlm.so.
// This machine's library must exist; another platform's is bundled when it
// has been built, and must be with MOONLM_PACK_ALL=1 (`make npm-pack`).
const fs = require('node:fs');
const path = require('node:path');

const PLATFORMS = ['linux-x64', 'linux-arm64']; // what a release tarball carries
const pkg = path.resolve(__dirname, '..');
const repo = path.resolve(pkg, '..', '..');
const libDir = path.join(pkg, 'lib');

if (process.argv.includes('--clean')) {
  fs.rmSync(libDir, { recursive: true, force: true });
  process.exit(0);
}

const host = `${process.platform}-${process.arch}`;
const packAll = process.env.MOONLM_PACK_ALL === '1';

function source(plat) {
  const named = process.env[`MOONLM_LIBRARY_${plat.toUpperCase().replace(/-/g, '_')}`];
  if (named) return path.resolve(named);
  if (plat === host) {
    return process.env.MOONLM_LIBRARY
      ? path.resolve(process.env.MOONLM_LIBRARY)
      : path.join(repo, 'build', 'libmoonlm.so');
  }
  return path.join(repo, 'build', plat, 'libmoonlm.so');
}

fs.rmSync(libDir, { recursive: true, force: true });
const bundled = [];
for (const plat of PLATFORMS.includes(host) ? PLATFORMS : [host, ...PLATFORMS]) {
  const src = source(plat);
  if (!fs.existsSync(src)) {
    if (plat === host || packAll) {
      const how = plat === host ? 'run `make lib` in the repository first (or set MOONLM_LIBRARY)'
        : 'run `make lib-arm64` (or `make npm-pack`) in the repository first';
      console.error(`moonlm: ${src} does not exist: ${how}`);
      process.exit(1);
    }
    console.error(`moonlm: no ${plat} library at ${src}: the tarball will not carry one (\`make npm-pack\` builds all)`);
    continue;
  }
  const dest = path.join(libDir, plat, 'libmoonlm.so');
  fs.mkdirSync(path.dirname(dest), { recursive: true });
  fs.copyFileSync(src, dest);
  bundled.push(plat);
}
console.error(`moonlm: bundled the libraries for ${bundled.join(', ')} into lib/`);
