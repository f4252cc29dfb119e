#!/usr/bin/env python3
"""Exact top-10 search, side by side in one run: the project (semantic-memory's exact-by-bound vector backend and
in-memory BM25, through `cargo bench -p semantic-memory --bench search -- --fixture`), NumPy (matmul +
argpartition, 1 and 2 BLAS threads) and FAISS IndexFlatIP (1 and 2 threads) on the same fixture vectors, and
bm25s (tokenize + score + top 10) on the same texts, with the same queries, one query at a time. Prints one JSON
object with every p50 and the ratios (peer p50 / project p50: above 1 means the project is faster).

Setup once: python3 -m pip install numpy faiss-cpu bm25s   (any Python with all three)
Run:        python3 scripts/bench-vector-peers.py --fixture <work>/fixture.json [--queries 3000]

Only the retrieval is compared (the peers return ids and scores, nothing more); the project's figures for
the whole call, with its receipt hashed and stored durably, are printed beside them. The project's searches
come back to back, as the peers' do. The output names the CPU: a figure is this machine's only.
CI runs it on the tiny fixture with `--queries 50 --cargo-profile test`, so that it keeps reading the bench's
output; the figures come from full runs.
"""
import argparse, json, os, subprocess, sys, time

PEER = r"""
import json, os, sys, time
import numpy as np
which, threads, path, queries = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
fixture = json.load(open(path))
docs = np.array([d["vector"] for d in fixture["documents"]], dtype=np.float32)
qs = np.array([q["vector"] for q in fixture["queries"]], dtype=np.float32)
order = [i % len(qs) for i in range(queries)]
times = []
if which.startswith("bm25s"):
    # bm25s's own API (tokenize, then retrieve; its default single-process path, the fastest), or its
    # lowest-level path (its token pattern, get_scores, a partial sort).
    import re
    import bm25s
    def joined(d):
        title, text = d.get("title") or "", d.get("text") or ""
        return f"{title}\n{text}" if title and text else (title or text)
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([joined(d) for d in fixture["documents"]], stopwords=None, show_progress=False),
                    show_progress=False)
    texts = [q["text"] for q in fixture["queries"]]
    pattern = re.compile(r"(?u)\b\w\w+\b")
    for i in order:
        t = time.perf_counter()
        if which == "bm25s":
            tokens = bm25s.tokenize([texts[i]], stopwords=None, return_ids=False, show_progress=False)
            retriever.retrieve(tokens, k=10, show_progress=False)
        else:
            scores = retriever.get_scores(pattern.findall(texts[i].lower()))
            top = np.argpartition(-scores, 10)[:10]
            top = top[np.argsort(-scores[top], kind="stable")]
        times.append(time.perf_counter() - t)
elif which == "numpy":
    for i in order:
        t = time.perf_counter()
        scores = docs @ qs[i]
        top = np.argpartition(-scores, 10)[:10]
        top = top[np.argsort(-scores[top], kind="stable")]
        times.append(time.perf_counter() - t)
else:
    import faiss
    faiss.omp_set_num_threads(threads)
    index = faiss.IndexFlatIP(docs.shape[1])
    index.add(docs)
    for i in order:
        q = qs[i:i + 1]
        t = time.perf_counter()
        index.search(q, 10)
        times.append(time.perf_counter() - t)
times.sort()
print(json.dumps({"p50_ms": times[len(times) // 2] * 1e3, "p95_ms": times[int(len(times) * 0.95)] * 1e3}))
"""


def peer(which, threads, fixture, queries):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", PEER, which, str(threads), fixture, str(queries)],
                         capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"{which} failed: {out.stderr[-800:]}")
    return json.loads(out.stdout)


def cpu_name():
    """The CPU's model name as lscpu prints it (what the README's columns are named by)."""
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")),
                "unknown")


def cpu_features():
    """The vector features that tell this project's machine kinds apart."""
    try:
        flags = next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split()
    except (OSError, StopIteration):
        return []
    return [f for f in ("avx2", "avx512f", "avx512_vnni", "amx_tile") if f in flags]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--queries", type=int, default=3000)
    ap.add_argument("--cargo-profile", help="build the bench with this cargo profile; `test` runs it through "
                    "`cargo test --workspace --bench`, reusing the test build (CI); default: bench")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if a.cargo_profile == "test":
        command = ["cargo", "test", "-q", "--workspace", "--bench", "search", "--"]
    else:
        profile = ["--profile", a.cargo_profile] if a.cargo_profile else []
        command = ["cargo", "bench", "-q", *profile, "-p", "semantic-memory", "--bench", "search", "--"]
    bench = subprocess.run([*command,
                            "--fixture", os.path.abspath(a.fixture), "--queries", str(a.queries),
                            "--cadence", "back_to_back"],
                           cwd=root, capture_output=True, text=True)
    if bench.returncode != 0:
        sys.exit(f"cargo bench failed: {bench.stderr[-800:]}")
    report = json.load(open(os.path.join(root, "target", "bench", "semantic-memory-search.json")))
    try:
        project = report["results"]["back_to_back"]
        ours = project["vector_only"]["retrieval"]["p50_ms"]
    except (KeyError, TypeError) as missing:
        sys.exit(f"target/bench/semantic-memory-search.json ({report.get('benchmark')}) has no back-to-back "
                 f"vector_only retrieval p50: {missing!r}; this script reads semantic-memory-search-v4")
    peers = {f"{w}_{t}_thread{'s' if t > 1 else ''}": peer(w, t, a.fixture, a.queries)
             for w in ("numpy", "faiss") for t in (1, 2)}
    lexical = {name: peer(name, 1, a.fixture, a.queries) for name in ("bm25s", "bm25s_get_scores")}
    ours_lexical = project["fts_only"]["retrieval"]["p50_ms"]
    modes = [m for m in project if not m.endswith("_sequential")]
    print(json.dumps({
        "cpu": cpu_name(),
        "cpu_features": cpu_features(),
        "vector_first_pass": report.get("first_pass"),
        "queries": a.queries,
        "project_vector_only_retrieval_p50_ms": ours,
        "project_vector_only_sequential_retrieval_p50_ms": project["vector_only_sequential"]["retrieval"]["p50_ms"],
        "project_hybrid_retrieval_p50_ms": project["hybrid"]["retrieval"]["p50_ms"],
        "project_hybrid_sequential_retrieval_p50_ms": project["hybrid_sequential"]["retrieval"]["p50_ms"],
        "project_fts_only_retrieval_p50_ms": project["fts_only"]["retrieval"]["p50_ms"],
        "project_whole_call_p50_ms": {m: project[m]["call_with_receipt"]["p50_ms"] for m in modes},
        "project_persistence_p50_ms": {m: project[m]["persistence"]["p50_ms"] for m in modes},
        "peers_p50_ms": {name: r["p50_ms"] for name, r in peers.items()},
        "ratio_peer_over_project": {name: round(r["p50_ms"] / ours, 2) for name, r in peers.items()},
        "lexical_peers_p50_ms": {name: r["p50_ms"] for name, r in lexical.items()},
        "ratio_lexical_peer_over_project_fts_only": {
            name: round(r["p50_ms"] / ours_lexical, 2) for name, r in lexical.items()},
    }, indent=1))


if __name__ == "__main__":
    main()
