#!/usr/bin/env bash
# Sharded builds and sharded verification through a real Slurm (a single-node cluster, scripts/slurm-cluster.sh),
# submitted with the shipped templates (deploy/slurm): each must give the bits one process gives.
#
#   scripts/slurm-ci.sh SCIFACT_AUDIT_EXECUTABLE SCIFACT_ARCHIVE MODEL_DIR
#
# 1. The tiny corpus built as a 4-task array plus merge: the fixture equal to an unsharded build's.
# 2. SciFact built the same way, one shard cancelled mid-way (the merge is then cancelled too), its cache torn
#    as a kill leaves it, and run again: it resumes, and the fixture's sha256 is the published one (97e76a03…).
# 3. attestations/scifact-fdfc890 verified as 4 shards plus merge: `verified`.
# 4. The tiny bundle as 4 shards plus merge: the report an unsharded verify-bundle's but for the evidence naming
#    the shard results;
#    then merges that must not verify, each naming what is wrong: a missing slice, a slice of another bundle,
#    a slice re-embedded by another executable.
#
# With SLURM_CI_REPORTS=DIR, step 3's JSON report is kept as DIR/scifact-fdfc890.json (CI then takes that
# bundle's verdict from it instead of verifying it a second time in one process), and step 2's work directory
# as DIR/scifact-work (CI's ignored tests then build SciFact by merging its shards).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(realpath "${1:?the scifact-audit executable}")"
archive="$(realpath "${2:?the SciFact archive}")"
model="$(realpath "${3:?the all-MiniLM-L6-v2 directory}")"
published_fixture=97e76a0349f8183bedb29f1593a49479c77c0fba28c8b645217dc595bf291dca

# shellcheck source=scripts/slurm-cluster.sh
source scripts/slurm-cluster.sh
out="$(mktemp -d /tmp/slurm-run.XXXXXX)"
chmod 755 "$out"
trap 'status=$?; [ $status = 0 ] || SLURM_KEEP=1; slurm_down; rm -rf "$out"; exit $status' EXIT
slurm_up
export SCIFACT_AUDIT="$bin"
say() { printf '[slurm-ci %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
fail() { say "FAIL: $*"; for f in "$out"/*.log; do [ -f "$f" ] && { echo "== $f"; tail -n 15 "$f"; }; done >&2; exit 1; }

# Every task of the array and the merge COMPLETED with exit 0:0.
all_completed() {
  local states n
  states="$(scontrol -o show job "$1"; scontrol -o show job "$2")"
  n=$(grep -c 'JobState=COMPLETED .*ExitCode=0:0' <<<"$states" || true)
  [ "$n" = "$3" ] || { slurm_state "$1"; slurm_state "$2"; fail "$4: $n of $3 jobs COMPLETED 0:0"; } >&2
}

# The embedding.values evidence of a JSON report, which must have failed.
embedding_failure() {
  python3 - "$1" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
failed = [c for c in report["checks"] if c["name"] == "embedding.values" and c["status"] == "fail"]
if report["verdict"] == "verified" or not failed:
    sys.exit(f"{sys.argv[1]}: verdict {report['verdict']}, embedding.values not failed")
print(failed[0]["evidence"])
PY
}

submit() {  # submit SCRIPT ARGS...: the two job ids of deploy/slurm/SCRIPT
  (cd "$out" && "$OLDPWD/deploy/slurm/submit-$1" "${@:2}")
}

t=$SECONDS
say "1. tiny corpus: 4 build shards + merge, against one process"
tiny_build=(--profile tiny --archive "$PWD/fixtures/tiny/scifact-tiny.zip" --model-dir "$PWD/fixtures/tiny/model")
"$bin" build "${tiny_build[@]}" --work-dir "$out/tiny-one" --out "$out/tiny-one.json" >/dev/null
read -r array merge < <(WORK_DIR="$out/tiny-work" FIXTURE="$out/tiny-sharded.json" SHARDS=4 submit build.sh \
  "${tiny_build[@]}")
slurm_wait "$array" "$merge"
all_completed "$array" "$merge" 5 "tiny build"
cmp "$out/tiny-one.json" "$out/tiny-sharded.json" || fail "the sharded tiny fixture differs from the unsharded one"
say "   fixture $(sha256sum "$out/tiny-sharded.json" | cut -c1-16)… equal to the unsharded build's [$((SECONDS - t)) s]"

t=$SECONDS
say "2. SciFact: 4 build shards + merge; shard 1 cancelled mid-way, its cache torn, run again"
read -r array merge < <(WORK_DIR="$out/scifact-work" FIXTURE="$out/scifact.json" SHARDS=4 submit build.sh \
  --archive "$archive" --model-dir "$model")
# Cancel task 1 (SIGTERM: it stops at its next durable point) once it has embedded a few hundred texts.
shard1="$out/scifact-work/shards/scifact-test/1-of-4"
for _ in $(seq 1 1200); do
  lines=$({ cat "$shard1"/embedding-cache-*.jsonl 2>/dev/null || true; } | wc -l)
  [ "$lines" -gt 300 ] && break
  sleep 0.25
done
[ "$lines" -gt 300 ] || fail "shard 1 never got going"
scancel "${array}_1"
slurm_wait "$array" "$merge"
states="$(scontrol -o show job "$array"; scontrol -o show job "$merge")"
grep -q "JobId=$merge .*JobState=CANCELLED" <<<"$states" \
  || { slurm_state "$merge"; fail "the merge was not cancelled when shard 1 was"; }
# What a kill during an append leaves: the last line cut short.
cache="$(ls "$shard1"/embedding-cache-*.jsonl)"
truncate -s -100 "$cache"
say "   shard 1 cancelled with $lines lines in its cache, the merge cancelled with it; the cache torn"
again=$(cd "$out" && SHARD=1/4 WORK_DIR="$out/scifact-work" sbatch --parsable --export=ALL --array=1 \
  "$OLDPWD/deploy/slurm/build-shard.sbatch" --archive "$archive" --model-dir "$model")
merge=$(cd "$out" && WORK_DIR="$out/scifact-work" FIXTURE="$out/scifact.json" sbatch --parsable --export=ALL \
  --dependency="afterok:$again" --kill-on-invalid-dep=yes "$OLDPWD/deploy/slurm/build-merge.sbatch" \
  --archive "$archive" --model-dir "$model")
slurm_wait "$again" "$merge"
all_completed "$again" "$merge" 2 "SciFact shard 1 again and the merge"
resumed="$(cat "$out"/scifact-audit-build-shard-"$again"_1.log)"
grep -q "recovered    dropped a torn cache tail" <<<"$resumed" || fail "the torn tail was not reported: $resumed"
grep -qE "embeddings   [1-9][0-9]* from cache, [1-9][0-9]* new" <<<"$resumed" || fail "shard 1 did not resume: $resumed"
digest="$(sha256sum "$out/scifact.json" | cut -d' ' -f1)"
[ "$digest" = "$published_fixture" ] || fail "the sharded SciFact fixture is $digest, not $published_fixture"
say "   shard 1 resumed ($(grep -o 'embeddings.*' <<<"$resumed")); fixture $digest, the unsharded build's [$((SECONDS - t)) s]"
if [ -n "${SLURM_CI_REPORTS:-}" ]; then
  # The shards' caches, for the ignored tests' SciFact build (SCIFACT_SHARDED_WORK_DIR): merged, not embedded again.
  mkdir -p "$SLURM_CI_REPORTS" && mv "$out/scifact-work" "$SLURM_CI_REPORTS/scifact-work"
fi
rm -rf "$out/scifact-work" "$out/scifact.json"

t=$SECONDS
say "3. attestations/scifact-fdfc890: 4 verify shards + merge"
fdfc890=(--bundle-dir "$PWD/attestations/scifact-fdfc890" --public-key "$PWD/attestations/scifact-audit-3.pub"
         --archive "$archive" --model-dir "$model")
# With SLURM_CI_MEMO, every slice records what it re-embeds there (and takes nothing), for CI's later
# verifications of bundles that hold the same vectors.
if [ -n "${SLURM_CI_MEMO:-}" ]; then fdfc890+=(--embedding-memo "$SLURM_CI_MEMO"); fi
read -r array merge < <(RESULTS_DIR="$out/fdfc890-shards" REPORT="$out/fdfc890.json" SHARDS=4 submit verify.sh \
  "${fdfc890[@]}")
slurm_wait "$array" "$merge"
all_completed "$array" "$merge" 5 "fdfc890 verification"
python3 scripts/assert-verdict.py verified attestations/scifact-fdfc890 < "$out/fdfc890.json"
if [ -n "${SLURM_CI_REPORTS:-}" ]; then
  mkdir -p "$SLURM_CI_REPORTS" && cp "$out/fdfc890.json" "$SLURM_CI_REPORTS/scifact-fdfc890.json"
fi
say "   verified from 4 shard results [$((SECONDS - t)) s]"

t=$SECONDS
say "4. the tiny bundle: 4 verify shards + merge against one process, and merges that must fail"
tiny=(--bundle-dir "$PWD/fixtures/tiny/expected" --public-key "$PWD/fixtures/tiny/expected.pub"
      --archive "$PWD/fixtures/tiny/scifact-tiny.zip" --model-dir "$PWD/fixtures/tiny/model")
"$bin" verify-bundle "${tiny[@]}" --json > "$out/tiny-whole.json" || true
read -r array merge < <(RESULTS_DIR="$out/tiny-shards" REPORT="$out/tiny-merged.json" SHARDS=4 submit verify.sh \
  "${tiny[@]}")
slurm_wait "$array" "$merge"
all_completed "$array" "$merge" 5 "tiny verification"
# The merged report is the unsharded one but for embedding.values' evidence, which names the shard results it was
# taken from (and says so); everything else, byte for byte once that is taken out.
python3 - "$out/tiny-whole.json" "$out/tiny-merged.json" <<'PY' || fail "the merged report differs from the unsharded one"
import json, sys
whole, merged = (json.load(open(path)) for path in sys.argv[1:3])
named = 0
for check in merged["checks"]:
    if check["name"] == "embedding.values" and "; taken from 4 shard results" in check["evidence"]:
        check["evidence"] = check["evidence"].split("; taken from ")[0]
        named += 1
merged["notes"] = [n for n in merged.get("notes", []) if not n.startswith("embeddings: taken from shard results")]
sys.exit(0 if named == 1 and merged == whole else 1)
PY

merge_of() {  # merge_of NAME RESULTS_DIR [SCIFACT_AUDIT]: the merge alone, through Slurm, its report's failure
  local job
  job=$(cd "$out" && RESULTS_DIR="$2" REPORT="$out/$1.json" sbatch --parsable --export=ALL \
    "$OLDPWD/deploy/slurm/verify-merge.sbatch" "${tiny[@]}")
  slurm_wait "$job"
  embedding_failure "$out/$1.json"
}
mkdir -p "$out/missing" "$out/foreign" "$out/other"
cp "$out/tiny-shards/shard-0.json" "$out/tiny-shards/shard-1.json" "$out/tiny-shards/shard-3.json" "$out/missing/"
reason="$(merge_of missing "$out/missing")"
grep -q "slice 2/4 is missing" <<<"$reason" || fail "missing slice: $reason"
say "   a missing slice: $reason"
cp "$out"/tiny-shards/shard-{0,1,3}.json "$out/foreign/"
cp "$out/fdfc890-shards/shard-2.json" "$out/foreign/shard-2.json"
reason="$(merge_of foreign "$out/foreign")"
grep -q "made for another bundle" <<<"$reason" || fail "foreign slice: $reason"
say "   a slice of another bundle: $reason"
cp "$bin" "$out/other-scifact-audit"
printf 'another build' >> "$out/other-scifact-audit"
array=$(cd "$out" && SHARD=2/4 SCIFACT_AUDIT="$out/other-scifact-audit" RESULTS_DIR="$out/other" sbatch \
  --parsable --export=ALL --array=2 "$OLDPWD/deploy/slurm/verify-shard.sbatch" "${tiny[@]}")
cp "$out"/tiny-shards/shard-{0,1,3}.json "$out/other/"
slurm_wait "${array%%;*}"
reason="$(merge_of other "$out/other")"
grep -q "made by another verifier executable" <<<"$reason" || fail "another executable: $reason"
say "   a slice of another executable: $reason"
say "   [$((SECONDS - t)) s]"
say "PASS"
