'use strict';
// `npm pack` hooks. prepack copies the library built by `make lib` (or the
// file named by MOONLM_LIBRARY) into lib/, so the tarball is self-contained;
// postpack (--clean) removes it again, so that a source checkout keeps
// loading the fresh build/libmoonlm.so rather than a stale copy.
const fs = require('node:fs');
const path = require('node:path');

const pkg = path.resolve(__dirname, '..');
const dest = path.join(pkg, 'lib', 'libmoonlm.so');

if (process.argv.includes('--clean')) {
  fs.rmSync(path.join(pkg, 'lib'), { recursive: true, force: true });
  process.exit(0);
}
const src = process.env.MOONLM_LIBRARY
  ? path.resolve(process.env.MOONLM_LIBRARY)
  : path.resolve(pkg, '..', '..', 'build', 'libmoonlm.so');
if (!fs.existsSync(src)) {
  console.error(`moonlm: ${src} does not exist: run \`make lib\` in the repository first (or set MOONLM_LIBRARY)`);
  process.exit(1);
}
fs.mkdirSync(path.dirname(dest), { recursive: true });
fs.copyFileSync(src, dest);
console.error(`moonlm: bundled ${src} into lib/`);
