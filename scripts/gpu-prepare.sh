#!/usr/bin/env bash
# Prepares the GPU check (docs/performance.md, "On a GPU") for the device tool, whose working tree travels only up
# to 64 MiB in all (tracked files, untracked files git does not ignore, and the carried paths):
#   1. .device/ (ignored through .git/info/exclude): the release binary, stripped and executable; SciFact's
#      archive; all-MiniLM-L6-v2's configuration, tokenizer and modules without its weights (the check makes
#      random weights of the same shapes there). SHARED names the directory holding datasets/scifact.zip and
#      models/all-MiniLM-L6-v2 (default ../shared).
#   2. A slim working tree: attestations/ (the published bundles, which the check never reads) left out of it by
#      git's sparse checkout. Nothing is deleted from git: `scripts/gpu-prepare.sh --restore` brings them back,
#      and a commit made meanwhile keeps them.
#   3. What would travel, counted and printed by top-level directory; it refuses (exit 1) when that is over
#      64 MiB, so the call is never made to fail.
# Then, with the device tool: `run` with carry [".device"] and the command `bash scripts/gpu-check.sh`, then
# `scripts/gpu-prepare.sh --restore` here.
#
# `--count` changes nothing: it prints what would travel from the slim tree (attestations/ left out) with .device/
# as it is now, against GPU_PREPARE_LIMIT_MIB (default 64); CI runs it with room left for .device/.
set -euo pipefail
cd "$(dirname "$0")/.."
limit=$(( ${GPU_PREPARE_LIMIT_MIB:-64} * 1024 * 1024 ))

if [ "${1:-}" = "--restore" ]; then
  git sparse-checkout disable
  echo "attestations/ is back in the working tree"
  exit 0
fi

# What the device tool would send: tracked files present in the working tree (not left out by a sparse checkout,
# nor under attestations/, which the slim tree leaves out), untracked files git does not ignore, and the carried
# .device/. Prints a line per top-level entry, then the total; exits 1 when over the limit.
travels() {
  {
    git ls-files -t --cached | awk '$1 != "S" { sub(/^[^ ]+ /, ""); print }'
    git ls-files --others --exclude-standard
    if [ -d .device ]; then find .device -type f; fi
  } | awk '!/^attestations\//' | sort -u | while IFS= read -r file; do
    [ -f "$file" ] && printf '%s\t%s\n' "$(stat -c %s "$file")" "$file"
  done | awk -F'\t' -v limit="$limit" '
    { split($2, part, "/"); top = (part[2] == "" ? $2 : part[1] "/"); size[top] += $1; total += $1 }
    END {
      for (t in size) printf "%10.1f MiB  %s\n", size[t] / 1048576, t | "sort -rn"
      close("sort -rn")
      printf "%10.1f MiB  in all (the limit: %.0f MiB)\n", total / 1048576, limit / 1048576
      over = (total + 0 > limit + 0)
      exit over
    }'
}

if [ "${1:-}" = "--count" ]; then
  echo "what would travel from the slim tree (attestations/ left out), .device/ as it is now:"
  status=0
  travels || status=$?
  exit "$status"
fi

shared="${SHARED:-../shared}"
target="${CARGO_TARGET_DIR:-target}"
for needed in "$shared/datasets/scifact.zip" "$shared/models/all-MiniLM-L6-v2/config.json"; do
  [ -f "$needed" ] || { echo "missing $needed (set SHARED to the directory holding it)" >&2; exit 2; }
done
cargo build --release -p scifact-audit
mkdir -p .device/minilm/1_Pooling
cp "$target/release/scifact-audit" .device/scifact-audit
strip .device/scifact-audit
chmod +x .device/scifact-audit
cp "$shared/datasets/scifact.zip" .device/scifact.zip
for file in config.json tokenizer.json vocab.txt modules.json sentence_bert_config.json \
  config_sentence_transformers.json special_tokens_map.json tokenizer_config.json 1_Pooling/config.json; do
  cp "$shared/models/all-MiniLM-L6-v2/$file" ".device/minilm/$file"
done
exclude="$(git rev-parse --git-path info/exclude)"
grep -qx '/.device/' "$exclude" 2>/dev/null || echo '/.device/' >> "$exclude"

git sparse-checkout set --no-cone '/*' '!/attestations/'
echo "what would travel (attestations/ left out of the working tree; scripts/gpu-prepare.sh --restore brings it back):"
if ! travels; then
  echo "over the device tool's 64 MiB: nothing would run there. Leave more out, or carry less." >&2
  exit 1
fi
echo "ready: run 'bash scripts/gpu-check.sh' with carry [\".device\"], then 'scripts/gpu-prepare.sh --restore'"
