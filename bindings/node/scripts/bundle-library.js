'use strict';
// `npm pack` hook: copies the library built by `make lib` (or the file named
// by MOONLM_LIBRARY) into lib/, so the packed tarball is self-contained.
const fs = require('node:fs');
const path = require('node:path');

const pkg = path.resolve(__dirname, '..');
const src = process.env.MOONLM_LIBRARY
  ? path.resolve(process.env.MOONLM_LIBRARY)
  : path.resolve(pkg, '..', '..', 'build', 'libmoonlm.so');
if (!fs.existsSync(src)) {
  console.error(`moonlm: ${src} does not exist: run \`make lib\` in the repository first (or set MOONLM_LIBRARY)`);
  process.exit(1);
}
fs.mkdirSync(path.join(pkg, 'lib'), { recursive: true });
fs.copyFileSync(src, path.join(pkg, 'lib', 'libmoonlm.so'));
console.error(`moonlm: bundled ${src} into lib/`);
