#!/usr/bin/env bash
# Makes (or keeps) ~/.cache/pylate-peer: a Python venv with PyLate 1.6.0, the live peer the ColBERT encoder is held to
# (scripts/pylate-peer.py). PyLate pins sentence-transformers 5.3 and transformers 5.3, so it cannot share the
# sentence-transformers 6.3 venv (scripts/peer-venv.sh); its pandas is imported but not declared. PyPI's torch brings
# CUDA's libraries (about 3 GB on a new machine, from pip's cache on a warm one); nothing here uses a GPU. Prints
# the venv's python.
set -euo pipefail
venv="${PYLATE_PEER_VENV:-$HOME/.cache/pylate-peer}"
wanted="1.6.0"
if [ -x "$venv/bin/python" ] \
  && "$venv/bin/python" -c "import pylate, pandas; assert pylate.__version__ == '$wanted'" >/dev/null 2>&1; then
  echo "$venv/bin/python"
  exit 0
fi
if ! python3 -c "import ensurepip, venv" >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
fi
rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip >&2
"$venv/bin/python" -m pip install --quiet "pylate==$wanted" pandas >&2
"$venv/bin/python" -c "import pylate; assert pylate.__version__ == '$wanted', pylate.__version__"
echo "$venv/bin/python"
