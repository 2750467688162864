#!/usr/bin/env bash
# wheel.sh DIST ARCH=LIBRARY...: the Python package as one wheel per
# library (ARCH is x86_64 or aarch64) and an sdist, into DIST.
#
# Each wheel bundles an already built libmoonlm.so (MOONLM_PREBUILT_LIBRARY)
# and is tagged py3-none-manylinux_2_N_ARCH, with N the glibc level that
# `auditwheel show` finds the library needs; the tag is then checked by
# `auditwheel show` again on the final file. The sdist carries the engine's
# Go source (gosrc/), so `pip install` where no wheel fits builds it with Go.
# $PYTHON is a Python with build, wheel, setuptools and auditwheel.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=$1; shift
: "${PYTHON:?set PYTHON to a Python with build, wheel and auditwheel}"
bin=$(dirname "$PYTHON")
stage=$(mktemp -d "${TMPDIR:-/tmp}/moonlm-wheel.XXXXXX")
trap 'rm -rf "$stage"' EXIT
mkdir -p "$dist"
rm -f "$dist"/moonlm-*.whl "$dist"/moonlm-*.tar.gz

# The package's files as git knows them (no build/ or egg-info leftovers).
copy_package() {
  mkdir -p "$1"
  git ls-files -z bindings/python | grep -zv '^bindings/python/tests/' |
    (cd bindings/python && sed -z 's|^bindings/python/||' | xargs -0 cp --parents -t "$1")
}

# The tag `auditwheel show` says the wheel is consistent with (its text wraps).
auditwheel_tag() {
  "$bin/auditwheel" show "$1" 2>/dev/null | tr -s '\n ' '  ' |
    grep -o "consistent with the following platform tag: \"manylinux_[0-9]*_[0-9]*_$2\"" | grep -o "manylinux_[0-9]*_[0-9]*_$2"
}

for spec in "$@"; do
  arch=${spec%%=*}; lib=$(realpath "${spec#*=}")
  [ -f "$lib" ] || { echo "wheel.sh: $lib does not exist" >&2; exit 1; }
  src=$stage/$arch; out=$stage/out-$arch
  copy_package "$src"
  MOONLM_PREBUILT_LIBRARY=$lib "$PYTHON" -m build --wheel --no-isolation --outdir "$out" "$src" >"$stage/build-$arch.log" 2>&1 ||
    { cat "$stage/build-$arch.log"; exit 1; }
  whl=$(ls "$out"/moonlm-*-py3-none-linux_"$arch".whl)
  tag=$(auditwheel_tag "$whl" "$arch") ||
    { "$bin/auditwheel" show "$whl"; echo "wheel.sh: auditwheel found no manylinux tag for $whl" >&2; exit 1; }
  "$PYTHON" -m wheel tags --platform-tag "$tag" --remove "$whl" >/dev/null
  final=$(ls "$out"/moonlm-*-py3-none-"$tag".whl)
  # The final file must pass auditwheel as tagged: same tag, no outside libraries.
  [ "$(auditwheel_tag "$final" "$arch")" = "$tag" ] ||
    { "$bin/auditwheel" show "$final"; echo "wheel.sh: $final is not consistent with its own tag $tag" >&2; exit 1; }
  cp "$final" "$dist/"
  echo "wheel: $dist/$(basename "$final")"
done

# The sdist: the package plus the Go module's files that ./capi is built from.
src=$stage/sdist
copy_package "$src"
mkdir -p "$src/gosrc"
pkgs=$(go list -deps -f '{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}' ./capi | sed "s|^$PWD/||")
git ls-files -z go.mod go.sum include capi $pkgs | grep -zv '_test\.go$\|/testdata/' | xargs -0 cp --parents -t "$src/gosrc"
printf 'graft gosrc\nglobal-exclude *.py[cod]\n' > "$src/MANIFEST.in"
"$PYTHON" -m build --sdist --no-isolation --outdir "$dist" "$src" >"$stage/sdist.log" 2>&1 || { cat "$stage/sdist.log"; exit 1; }
echo "sdist: $(ls "$dist"/moonlm-*.tar.gz)"
