#!/usr/bin/env bash
# One published bundle, checked as CI checks every bundle under attestations/: it reaches the verdict
# attestations/keys.tsv states (from a report made earlier when one is given, else verified here with the
# embedding memo), its manifest's signature verifies with minisign, its report renders in Chromium, its
# reproduction statement (if any) verifies, and its TREC runs and in-toto statements read in the ecosystem's
# tools. Exits non-zero at the first check that fails. .ci/run runs two of these at a time, each into a log of
# its own, and prints the logs in the order of attestations/.
#
# Usage: scripts/ci-attestation.sh BIN BUNDLE_DIR EXPECTED_VERDICT PUBLIC_KEY MEMO_DIR [REPORT_JSON]
# (the archive and model from $SCIFACT_ARCHIVE and $SCIFACT_MODEL_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."

bin="$1" bundle="${2%/}" expected="$3" key="$4" memo="$5" report="${6:-}"
name="$(basename "$bundle")"

if [ -n "$report" ]; then
  # Verified earlier (as Slurm shards plus merge, or in the background): the report that run gave.
  python3 scripts/assert-verdict.py "$expected" "$bundle" < "$report"
else
  "$bin" verify-bundle --bundle-dir "$bundle" --public-key "$key" --archive "$SCIFACT_ARCHIVE" \
    --model-dir "$SCIFACT_MODEL_DIR" --embedding-memo "$memo" --json \
    | python3 scripts/assert-verdict.py "$expected" "$bundle"
fi
minisign -V -p "$key" -m "$bundle/manifest.json"
if [ -f "$bundle/report.html" ]; then
  python3 scripts/check-report.py "$bundle/report.html"
fi
statement="attestations/reproductions/$name.reproduction.json"
if [ -f "$statement" ]; then
  "$bin" verify-reproduction --bundle-dir "$bundle" --statement "$statement" --public-key "$key"
  minisign -V -p "$key" -m "$statement"
fi
if compgen -G "$bundle/*.qrels" > /dev/null; then
  python3 scripts/check-trec-tools.py "$bundle"
  python3 scripts/check-intoto.py "$bundle"
fi
