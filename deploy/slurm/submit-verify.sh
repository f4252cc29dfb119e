#!/usr/bin/env bash
# Submits a sharded verification: an array of SHARDS `verify-bundle --embedding-shard auto` tasks writing
# into RESULTS_DIR, and the merge (afterok, cancelled if a shard fails) writing the JSON report to REPORT.
# Prints "<array job id> <merge job id>".
#
#   SCIFACT_AUDIT=/shared/bin/scifact-audit RESULTS_DIR=/shared/shards REPORT=/shared/report.json SHARDS=8 \
#     deploy/slurm/submit-verify.sh --bundle-dir B --public-key K --archive A --model-dir M
#
# The flags after the script are verify-bundle's, the same for every task (the merge ignores --model-dir).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${SCIFACT_AUDIT:?}" "${RESULTS_DIR:?}" "${REPORT:?}"
shards="${SHARDS:-4}"
mkdir -p "$RESULTS_DIR"
export SCIFACT_AUDIT RESULTS_DIR REPORT
# shellcheck disable=SC2086
array=$(sbatch --parsable --export=ALL ${SBATCH_EXTRA:-} --array="0-$((shards - 1))" "$here/verify-shard.sbatch" "$@")
# shellcheck disable=SC2086
merge=$(sbatch --parsable --export=ALL ${SBATCH_EXTRA:-} --dependency="afterok:${array%%;*}" --kill-on-invalid-dep=yes \
  "$here/verify-merge.sbatch" "$@")
echo "${array%%;*} ${merge%%;*}"
