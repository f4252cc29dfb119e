#!/usr/bin/env bash
# Submits a sharded verification: an array of SHARDS `verify-bundle --embedding-shard auto` tasks writing
# into RESULTS_DIR, and the merge (afterok, cancelled if a shard fails) writing the JSON report to REPORT.
# Prints "<array job id> <merge job id>".
#
#   SCIFACT_AUDIT=/shared/bin/scifact-audit RESULTS_DIR=/shared/shards REPORT=/shared/report.json SHARDS=8 \
#     deploy/slurm/submit-verify.sh --bundle-dir B --public-key K --archive A --model-dir M
#
# The flags after the script are verify-bundle's, the same for every task (the merge ignores --model-dir).
# RESULTS_DIR must hold no earlier run's results (CLEAR_RESULTS=1 removes them).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${SCIFACT_AUDIT:?}" "${RESULTS_DIR:?}" "${REPORT:?}"
shards="${SHARDS:-4}"
mkdir -p "$RESULTS_DIR"
# The merge reads every *.json in RESULTS_DIR: results of an earlier run (another N, another bundle) would be
# taken with this run's and fail it as slices given twice or foreign. Start from an empty directory.
earlier=$(find "$RESULTS_DIR" -maxdepth 1 -name '*.json' | head -n 1)
if [ -n "$earlier" ]; then
  if [ "${CLEAR_RESULTS:-}" = 1 ]; then
    find "$RESULTS_DIR" -maxdepth 1 -name '*.json' -delete
  else
    echo "$RESULTS_DIR holds results of an earlier run ($earlier, …): empty it, choose another RESULTS_DIR, or set CLEAR_RESULTS=1 to remove them" >&2
    exit 2
  fi
fi
export SCIFACT_AUDIT RESULTS_DIR REPORT
# shellcheck disable=SC2086
array=$(sbatch --parsable --export=ALL ${SBATCH_EXTRA:-} --array="0-$((shards - 1))" "$here/verify-shard.sbatch" "$@")
# shellcheck disable=SC2086
merge=$(sbatch --parsable --export=ALL ${SBATCH_EXTRA:-} --dependency="afterok:${array%%;*}" --kill-on-invalid-dep=yes \
  "$here/verify-merge.sbatch" "$@")
echo "${array%%;*} ${merge%%;*}"
