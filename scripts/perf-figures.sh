#!/usr/bin/env bash
# Measures every figure of docs/performance.md's tables on this machine, in one go, and
# names the CPU with each: the real run's held-out p50s (quiet and beside one CPU-bound process), the search bench
# (both cadences, quiet and beside one neighbour), a warm eval and its verify stage, verify-bundle, a cold fixture
# build (and its sha256, which must be the published one), verify-bundle with every vector re-embedded, exact search beside NumPy, FAISS and bm25s and
# embedding beside PyTorch when the peers are installed (scripts/bench-vector-peers.py's and
# bench/embed-vs-torch.py's headers say how). Keep the machine otherwise quiet. Takes about fifteen minutes;
# SKIP_COLD=1 reuses the fixture an earlier run left in WORK_DIR; SCIFACT_AUDIT_SIMD=avx2 measures the AVX2-only kind's
# code on an AVX-512 machine (the figures then belong to neither kind: label them).
#
# Usage: SCIFACT_ARCHIVE=../shared/datasets/scifact.zip SCIFACT_MODEL_DIR=../shared/models/all-MiniLM-L6-v2 \
#        scripts/perf-figures.sh [WORK_DIR]        (default: a new directory under /tmp)
set -euo pipefail
cd "$(dirname "$0")/.."
: "${SCIFACT_ARCHIVE:?set SCIFACT_ARCHIVE to the BEIR SciFact zip}"
: "${SCIFACT_MODEL_DIR:?set SCIFACT_MODEL_DIR to the all-MiniLM-L6-v2 directory}"
export SCIFACT_ARCHIVE SCIFACT_MODEL_DIR
work="${1:-$(mktemp -d /tmp/perf-figures.XXXXXX)}"
mkdir -p "$work"
target="${CARGO_TARGET_DIR:-target}"
bin="$target/release/scifact-audit"
published_fixture=97e76a0349f8183bedb29f1593a49479c77c0fba28c8b645217dc595bf291dca

cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1)"
features="$(grep -o -w -E 'avx512f|avx512_vnni|amx_tile|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "== CPU: $cpu ($(nproc) cores; $features)"
if [ -n "${SCIFACT_AUDIT_SIMD:-}" ]; then
    echo "== kernels capped: SCIFACT_AUDIT_SIMD=$SCIFACT_AUDIT_SIMD (this CPU runs a lesser kind's code; label the figures so)"
fi
cargo build --release -p scifact-audit --quiet

held_out_p50s() {
    python3 - "$1" <<'EOF'
import glob, json, sys
for mode in ("fts_only", "vector_only", "hybrid"):
    a = json.load(open(glob.glob(f"{sys.argv[1]}/runs/*/results/scifact-{mode}-heldout.aggregate.json")[0]))
    m = a["metrics"]
    print(f"   {mode:12} retrieval p50 {m['retrieval_ms']['p50']:.3f} ms, whole call p50 {m['latency_ms']['p50']:.3f} ms")
EOF
}

if [ -n "${SKIP_COLD:-}" ] && [ -f "$work/cold/fixture.json" ]; then
    echo "== cold fixture build: skipped (SKIP_COLD), the fixture of an earlier run reused"
else
    echo "== cold fixture build ($cpu)"
    rm -rf "$work/cold" && mkdir -p "$work/cold"
    start=$(date +%s.%N)
    "$bin" build --out "$work/cold/fixture.json" --work-dir "$work/cold" >"$work/cold/build.log" 2>&1
    echo "   $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s"
fi
digest="$(sha256sum "$work/cold/fixture.json" | cut -d' ' -f1)"
if [ "$digest" = "$published_fixture" ]; then echo "   fixture sha256 $digest: the published one"; else
    echo "   fixture sha256 $digest DIFFERS from the published $published_fixture" >&2; exit 1; fi

for load in quiet loaded; do
    dir="$work/eval-$load"
    # The cold build's embedding cache, where eval looks for it: eval's fixture stage then reuses the vectors
    # instead of embedding the corpus again.
    rm -rf "$dir" && mkdir -p "$dir/build" && cp "$work"/cold/embedding-cache-*.jsonl "$dir/build/"
    pid=""
    if [ "$load" = loaded ]; then
        sh -c 'while :; do :; done' >/dev/null 2>&1 &
        pid=$!
    fi
    "$bin" eval --work-dir "$dir" >"$dir/fresh.log" 2>&1
    "$bin" eval --work-dir "$dir" >"$dir/warm.log" 2>&1
    if [ -n "$pid" ]; then kill "$pid"; fi
    echo "== real eval, $load ($cpu): held-out aggregates of the fresh run"
    held_out_p50s "$dir"
    echo "   warm rerun: $(grep '^time' "$dir/warm.log" | grep -o 'verify.*')"
done

for n in 0 1; do
    echo "== search bench, $n CPU-bound neighbour(s) ($cpu)"
    cargo bench -q -p semantic-memory --bench search -- --fixture "$work/cold/fixture.json" --queries 3000 \
        --neighbours "$n" 2>/dev/null | grep -E '^(cadence|search|hybrid|vector_only|fts_only)' || true
done

if [ -z "${SCIFACT_AUDIT_SIMD:-}" ]; then
    # The first pass's kernels side by side: if AVX2 (several times the instructions) is as fast as VNNI, the
    # first pass waits on memory, not arithmetic, on this CPU.
    for cap in avx2 avx512; do
        echo "== vector first pass capped at $cap, quiet, back to back ($cpu)"
        SCIFACT_AUDIT_SIMD=$cap cargo bench -q -p semantic-memory --bench search -- --fixture "$work/cold/fixture.json" \
            --queries 3000 --cadence back_to_back 2>/dev/null | grep -E '^(cadence|vector_only)' || true
    done
fi

search_peer=""
for python in "$HOME/.cache/embed-peer/bin/python" python3; do
    if "$python" -c 'import numpy, faiss, bm25s' >/dev/null 2>&1; then search_peer="$python"; break; fi
done
if [ -n "$search_peer" ]; then
    echo "== exact top 10 beside NumPy, FAISS flat and bm25s, same fixture, same queries, one run ($cpu)"
    "$search_peer" scripts/bench-vector-peers.py --fixture "$work/cold/fixture.json" |
        python3 -c 'import json,sys; d=json.load(sys.stdin); p=d["peers_p50_ms"]; l=d["lexical_peers_p50_ms"]
print("   vector_only %.3f ms (without the helper %.3f); NumPy 1T %.3f, 2T %.3f; FAISS flat 1T %.3f, 2T %.3f ms" % (d["project_vector_only_retrieval_p50_ms"], d["project_vector_only_sequential_retrieval_p50_ms"], p["numpy_1_thread"], p["numpy_2_threads"], p["faiss_1_thread"], p["faiss_2_threads"]))
print("   fts_only %.3f ms; bm25s %.3f, bm25s get_scores %.3f ms" % (d["project_fts_only_retrieval_p50_ms"], l["bm25s"], l["bm25s_get_scores"]))'
else
    echo "== search beside NumPy, FAISS and bm25s: skipped, no Python here has all three (see scripts/bench-vector-peers.py)"
fi

echo "== verify-bundle bench ($cpu)"
cargo bench -q -p receipt-verify --bench verify -- --bundle "$PWD/attestations/scifact-fdfc890" \
    --public-key "$PWD/attestations/scifact-audit-3.pub" --archive "$(realpath "$SCIFACT_ARCHIVE")" \
    --model-dir "$(realpath "$SCIFACT_MODEL_DIR")" --rounds 3 --full-rounds 1 2>/dev/null | grep -E 'median|verify-bundle'

peer="$HOME/.cache/embed-peer/bin/python"
shared="${SCIFACT_SHARED:-$(dirname "$(dirname "$(realpath "$SCIFACT_ARCHIVE")")")}"
if [ -x "$peer" ]; then
    for bs in 32 16 8 64; do
        echo "== embedding beside PyTorch, bs$bs ($cpu)"
        "$peer" "$shared/bench/embed-vs-torch.py" --bin "$bin" --archive "$SCIFACT_ARCHIVE" \
            --model-dir "$SCIFACT_MODEL_DIR" --docs 1000 --batch-size "$bs" 2>/dev/null |
            python3 -c 'import json,sys; d=json.load(sys.stdin); print("   project %s docs/s, torch %s: %sx" % (d["project_docs_per_s"], d["torch_docs_per_s"], d["ratio_project_over_torch"]))'
    done
else
    echo "== embedding beside PyTorch: skipped, the peer is not installed (see ../shared/bench/embed-vs-torch.py)"
fi
echo "== done; logs under $work"
