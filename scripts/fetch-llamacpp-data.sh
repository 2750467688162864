#!/usr/bin/env bash
# Fetches the test files the tests read from llama.cpp's source tree, which
# are not ours to commit, from the PyPI sdist of llama-cpp-python 0.3.36
# (which bundles llama.cpp commit 0c1e570), once, and prints the folder
# they are in (a llama.cpp tree holding only those files: point
# MOONLM_LLAMACPP_DIR at it, as the Makefile does):
#   models/ggml-vocab-gemma-4.gguf{,.inp,.out}    Gemma 4's tokenizer
#   models/ggml-vocab-qwen35.gguf{,.inp,.out}     Qwen 3.5's tokenizer
#   models/ggml-vocab-nomic-bert-moe.gguf          XLM-RoBERTa's Unigram
#                                                  vocabulary (the synthetic
#                                                  XLM-R's, its tokenizer tests)
#   models/templates/Qwen3.5-4B.jinja              Qwen 3.5's chat template
#   grammars/*.gbnf                                llama.cpp's sample grammars
# The folder is $MOONLM_LLAMACPP_DIR, by default build/llamacpp of this
# checkout; when it already holds those files (a previous fetch, or a whole
# llama.cpp source tree) nothing is fetched and nothing in it is touched.
# Only those members are extracted from the sdist (77 MB, not kept), each
# through a temporary file and a rename. $PYTHON (default python3) runs
# pip; pip's cache is $PIP_CACHE_DIR when set (the Makefile puts it under
# build/).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
dest=${MOONLM_LLAMACPP_DIR:-$repo/build/llamacpp}
py=${PYTHON:-python3}
pkg=llama-cpp-python==0.3.36
need=(models/ggml-vocab-gemma-4.gguf{,.inp,.out} models/ggml-vocab-qwen35.gguf{,.inp,.out}
  models/ggml-vocab-nomic-bert-moe.gguf models/templates/Qwen3.5-4B.jinja grammars/json.gbnf)
have=1
for f in "${need[@]}"; do [ -s "$dest/$f" ] || have=0; done
if [ $have = 1 ]; then
  echo "$dest"
  exit 0
fi
if ! "$py" -m pip --version >/dev/null 2>&1; then
  echo "fetch-llamacpp-data.sh: $py has no pip (install python3-pip, or set PYTHON to a Python with pip)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The sdist: the members are source files, which no wheel carries.
PIP_ROOT_USER_ACTION=ignore "$py" -m pip --quiet --disable-pip-version-check \
  download --no-deps --no-binary :all: "$pkg" -d "$tmp" >&2
"$py" - "$tmp" "$dest" "${need[@]}" <<'PY'
import glob, os, re, shutil, sys, tarfile
tmp, dest, need = sys.argv[1], sys.argv[2], sys.argv[3:]
sdist = glob.glob(os.path.join(tmp, "llama_cpp_python-*.tar.gz"))[0]
root = os.path.basename(sdist)[: -len(".tar.gz")] + "/vendor/llama.cpp/"
wanted = re.compile(
    r"models/ggml-vocab-(gemma-4|qwen35)\.gguf(\.inp|\.out)?"
    r"|models/ggml-vocab-nomic-bert-moe\.gguf"
    r"|models/templates/Qwen3\.5-4B\.jinja"
    r"|grammars/[A-Za-z0-9_-]+\.gbnf")
got = []
with tarfile.open(sdist) as tf:
    for m in tf:
        if not m.name.startswith(root) or not m.isfile():
            continue
        rel = m.name[len(root):]
        if not wanted.fullmatch(rel):
            continue
        out = os.path.join(dest, *rel.split("/"))
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with tf.extractfile(m) as src, open(out + ".part", "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.replace(out + ".part", out)
        got.append(rel)
missing = [n for n in need if n not in got]
if missing:
    sys.exit(f"fetch-llamacpp-data.sh: {os.path.basename(sdist)} lacks {', '.join(missing)}")
PY
echo "$dest"
