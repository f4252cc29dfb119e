#!/usr/bin/env bash
# Prepares the GPU check's carried files in .device/ (ignored through .git/info/exclude): the release binary,
# stripped; SciFact's archive; all-MiniLM-L6-v2's configuration, tokenizer and modules without its weights (the
# check makes random weights of the same shapes on the GPU machine). SHARED names the directory holding
# datasets/scifact.zip and models/all-MiniLM-L6-v2 (default ../shared). Then, on the device machine:
# `scripts/gpu-check.sh` with `.device` carried.
set -euo pipefail
cd "$(dirname "$0")/.."
shared="${SHARED:-../shared}"
target="${CARGO_TARGET_DIR:-target}"
cargo build --release -p scifact-audit
mkdir -p .device/minilm/1_Pooling
cp "$target/release/scifact-audit" .device/scifact-audit
strip .device/scifact-audit
cp "$shared/datasets/scifact.zip" .device/scifact.zip
for file in config.json tokenizer.json vocab.txt modules.json sentence_bert_config.json \
  config_sentence_transformers.json special_tokens_map.json tokenizer_config.json 1_Pooling/config.json; do
  cp "$shared/models/all-MiniLM-L6-v2/$file" ".device/minilm/$file"
done
exclude="$(git rev-parse --git-path info/exclude)"
grep -qx '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >> "$exclude"
du -sh .device
