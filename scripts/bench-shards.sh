#!/usr/bin/env bash
# What sharding costs on one machine: SciFact's fixture build and attestations/scifact-fdfc890's verification,
# each as one process and as N shards run one after another plus the merge, every command under
# /usr/bin/time. Prints a Markdown table: wall and CPU seconds (user + system), peak memory, and the shards' CPU
# against the one process's.
#
#   scripts/bench-shards.sh SCIFACT_AUDIT_EXECUTABLE SCIFACT_ARCHIVE MODEL_DIR [N]
#
# The shards run one after another, so each has the whole machine, as one task of an array would on its node.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:?the scifact-audit executable}")"
archive="$(realpath "${2:?the SciFact archive}")"
model="$(realpath "${3:?the all-MiniLM-L6-v2 directory}")"
n="${4:-4}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# timed LABEL COMMAND...: one row "LABEL wall cpu rss_kib".
timed() {
  local label=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$out/time" "$@" > "$out/stdout" 2> "$out/stderr" \
    || { echo "$label failed:" >&2; tail -5 "$out/stderr" >&2; exit 1; }
  read -r wall user sys rss < "$out/time"
  echo "$label $wall $(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.1f", u + s }') $rss" >> "$out/rows"
}

timed "build, one process" "$bin" build --work-dir "$out/one" --out "$out/one.json" --archive "$archive" --model-dir "$model"
for ((i = 0; i < n; i++)); do
  timed "build shard $i/$n" "$bin" build --shard "$i/$n" --work-dir "$out/sharded" --archive "$archive" --model-dir "$model"
done
timed "build merge" "$bin" build --work-dir "$out/sharded" --out "$out/merged.json" --archive "$archive" --model-dir "$model"
cmp "$out/one.json" "$out/merged.json"
rm -rf "$out/one" "$out/sharded"

bundle=(--bundle-dir attestations/scifact-fdfc890 --public-key attestations/scifact-audit-3.pub --archive "$archive")
timed "verify-bundle, one process" "$bin" verify-bundle "${bundle[@]}" --model-dir "$model" --json
cp "$out/stdout" "$out/whole.json"
for ((i = 0; i < n; i++)); do
  timed "verify shard $i/$n" "$bin" verify-bundle "${bundle[@]}" --model-dir "$model" --embedding-shard "$i/$n" \
    --shard-out "$out/results/$i.json"
done
timed "verify merge" "$bin" verify-bundle "${bundle[@]}" --embedding-shards "$out/results" --json
cmp "$out/whole.json" "$out/stdout"

echo "| step | wall s | CPU s | peak RSS MiB |"
echo "|---|---|---|---|"
awk '{ label = $1; for (i = 2; i <= NF - 3; i++) label = label " " $i
       printf "| %s | %.1f | %.1f | %.0f |\n", label, $(NF-2), $(NF-1), $NF / 1024 }' "$out/rows"
awk -v n="$n" '
  { k = $1; sub(/[,-].*/, "", k) }
  / one process / { one[k] = $(NF-1) }
  / shard / { shards[k] += $(NF-1) }
  / merge / { merge[k] = $(NF-1) }
  END {
    for (k in one) printf "%s: %d shards %.1f CPU s + merge %.1f against one process %.1f: %+.1f%% (shards alone %+.1f%%)\n",
      k, n, shards[k], merge[k], one[k], 100 * (shards[k] + merge[k] - one[k]) / one[k], 100 * (shards[k] - one[k]) / one[k]
  }' "$out/rows"
echo "fixtures and reports equal to the one process's: yes (cmp)"
