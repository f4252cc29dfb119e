#!/usr/bin/env python3
"""Exhaustive MaxSim speed: the store's `search_late_interaction_only_with_context` (semantic-memory's `late`
bench) against PyLate 1.6.0's `colbert_scores` on torch, the same token vectors, the same threads, one run. Prints
one JSON object.

The token vectors have SciFact's shapes: each of the 5,183 documents as many tokens as bert-base-uncased's WordPiece
gives `title + " " + text` with `[CLS]`, the marker and `[SEP]`, cut at 300 (PyLate's BEIR example), and 300
queries of 32 (query expansion), 96 dimensions (answerai-colbert-small-v1's); the values are seeded random unit
vectors (numpy, seed 0: the arithmetic and the speed do not depend on them). PyLate scores each query against
every document at once, the documents padded into one tensor with their mask (as `colbert_scores` takes them);
the project's bench scores each query against every fact of a store holding the same matrices. Both report each
query's top 10, and their agreement is reported (PyLate's mask floors a padded similarity at 0, which changes a
score only where a query token's best match is negative).

Run (2 threads on both sides; keep the machine otherwise quiet):
    ~/.cache/pylate-peer/bin/python scripts/bench-maxsim-peers.py --archive ../shared/datasets/scifact.zip \\
        --tokenizer ../shared/models/all-MiniLM-L6-v2 --queries 300
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from peer_bench import cpu_name, documents

ROOT = Path(__file__).resolve().parent.parent


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archive", required=True)
    parser.add_argument("--tokenizer", required=True, help="a directory with bert-base-uncased's tokenizer.json")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--doc-maxlen", type=int, default=300)
    parser.add_argument("--dims", type=int, default=96)
    args = parser.parse_args()

    import numpy as np
    import pylate
    import torch
    from pylate.scores import colbert_scores
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(args.tokenizer) / "tokenizer.json"))
    texts = documents(args.archive, 10**9)
    rows = [min(len(tokenizer.encode(t).ids) + 1, args.doc_maxlen) for t in texts]
    generator = np.random.default_rng(0)

    def unit(n):
        values = generator.standard_normal((n, args.dims)).astype(np.float32)
        return values / np.linalg.norm(values, axis=1, keepdims=True)

    docs = [unit(n) for n in rows]
    queries = [unit(32) for _ in range(args.queries)]
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch)
        (data / "shapes.json").write_text(json.dumps(
            {"dims": args.dims, "document_rows": rows, "query_rows": [32] * len(queries)}))
        np.concatenate(docs).astype("<f4").tofile(data / "documents.f32")
        np.concatenate(queries).astype("<f4").tofile(data / "queries.f32")

        torch.set_num_threads(args.threads)
        longest = max(rows)
        padded = torch.zeros((len(docs), longest, args.dims))
        mask = torch.zeros((len(docs), longest))
        for i, matrix in enumerate(docs):
            padded[i, : len(matrix)] = torch.from_numpy(matrix)
            mask[i, : len(matrix)] = 1.0
        colbert_scores(torch.from_numpy(queries[0])[None], padded[:64], documents_mask=mask[:64])  # warm-up
        theirs = []
        started = time.perf_counter()
        for query in queries:
            scores = colbert_scores(torch.from_numpy(query)[None], padded, documents_mask=mask)[0]
            top = torch.topk(scores, 10)
            theirs.append(list(zip(top.indices.tolist(), top.values.tolist())))
        pylate_seconds = time.perf_counter() - started
        del padded, mask

        env = dict(os.environ, RAYON_NUM_THREADS=str(args.threads))
        run = subprocess.run(["cargo", "bench", "--quiet", "--workspace", "--bench", "late", "--", "--data", str(data)],
                             cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            sys.exit(run.stderr)
        project = json.loads(run.stdout[run.stdout.index("{"):])
        mine = json.loads((data / "project-top10.json").read_text())
    same_ids = sum(1 for a, b in zip(theirs, mine) if [i for i, _ in a] == [i for i, _ in b])
    worst = max(abs(sa - sb) for a, b in zip(theirs, mine) for (ia, sa), (ib, sb) in zip(a, b) if ia == ib)
    print(json.dumps({
        "benchmark": "maxsim-vs-pylate-v1",
        "cpu": cpu_name(),
        "threads": args.threads,
        "documents": len(docs),
        "document_token_vectors": sum(rows),
        "queries": len(queries),
        "dims": args.dims,
        "pylate_seconds": round(pylate_seconds, 3),
        "project_retrieval_seconds": round(project["retrieval_total_s"], 3),
        "project_retrieval_p50_ms": round(project["retrieval_p50_ms"], 3),
        "ratio_project_over_pylate": round(pylate_seconds / project["retrieval_total_s"], 3),
        "project_index_bytes": project["index_bytes"],
        "f32_token_bytes": project["f32_token_bytes"],
        "queries_with_the_same_top10": same_ids,
        "largest_score_difference_same_fact": worst,
        "versions": {"pylate": pylate.__version__, "torch": torch.__version__},
    }, indent=2))


if __name__ == "__main__":
    main()
