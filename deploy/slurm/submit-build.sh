#!/usr/bin/env bash
# Submits a sharded fixture build: an array of SHARDS `build --shard auto` tasks and the merge that waits for
# all of them (afterok; cancelled at once if a shard fails). Prints "<array job id> <merge job id>".
#
#   SCIFACT_AUDIT=/shared/bin/scifact-audit WORK_DIR=/shared/work FIXTURE=/shared/fixture.json SHARDS=8 \
#     deploy/slurm/submit-build.sh --dataset nfcorpus --archive /shared/nfcorpus.zip --model-dir /shared/model
#
# The flags after the script are the build's (dataset, archive, model, text policy), the same for every task.
# Extra sbatch options (partition, account, time): SBATCH_EXTRA="--partition=cpu --time=2:00:00".
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
: "${SCIFACT_AUDIT:?}" "${WORK_DIR:?}" "${FIXTURE:?}"
shards="${SHARDS:-4}"
export SCIFACT_AUDIT WORK_DIR FIXTURE
# shellcheck disable=SC2086
array=$(sbatch --parsable --export=ALL ${SBATCH_EXTRA:-} --array="0-$((shards - 1))" "$here/build-shard.sbatch" "$@")
# shellcheck disable=SC2086
merge=$(sbatch --parsable --export=ALL ${SBATCH_EXTRA:-} --dependency="afterok:${array%%;*}" --kill-on-invalid-dep=yes \
  "$here/build-merge.sbatch" "$@")
echo "${array%%;*} ${merge%%;*}"
