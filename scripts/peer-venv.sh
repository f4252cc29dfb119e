#!/usr/bin/env bash
# Makes (or keeps) ~/.cache/embed-peer: a Python venv with torch and sentence-transformers 6.3, the live peer the
# sparse encoder and the parity checkpoints are held to (scripts/st-sparse.py, scripts/st-reference.py,
# scripts/st-saved-parity.py). PyPI's torch brings CUDA's libraries (about 3 GB on a new machine); nothing here
# uses a GPU. Prints the venv's python.
set -euo pipefail
venv="${EMBED_PEER_VENV:-$HOME/.cache/embed-peer}"
wanted="6.3"
if [ -x "$venv/bin/python" ] \
  && "$venv/bin/python" -c "import sentence_transformers as s, torch, transformers; assert s.__version__.startswith('$wanted')" \
    >/dev/null 2>&1; then
  echo "$venv/bin/python"
  exit 0
fi
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip >&2
"$venv/bin/python" -m pip install --quiet "sentence-transformers==$wanted.*" torch transformers safetensors >&2
"$venv/bin/python" -c "import sentence_transformers as s; assert s.__version__.startswith('$wanted'), s.__version__"
echo "$venv/bin/python"
