"""The independent reference for both metric implementations (the runner's and the verifier's): generates
judged queries and runs, then scores every query with pytrec_eval (trec_eval's own C code).

Usage: python3 scripts/pytrec_parity.py SEED QUERIES
Prints {"qrels": {q: {d: grade}}, "run": {q: {d: score}}, "reference": {q: {measure: value}}}.

The runs have what trips metric code up: tied scores (trec_eval orders ties by document id, descending),
empty runs (pytrec_eval leaves such queries out), rankings longer than the cut-off, unjudged documents,
judged-irrelevant (0) and negative grades, and queries with no relevant document at all. MRR@10 is
trec_eval's recip_rank on each run cut to its first 10 documents in trec_eval's order; everything else is
computed on the whole run by trec_eval's cut-off measures.
"""
import json
import random
import sys

import pytrec_eval

seed, queries = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)
qrels, run = {}, {}
for q in range(queries):
    query = f"q{q}"
    judged = {}
    relevant = 0 if q % 17 == 0 else rng.randint(1, 6)
    for _ in range(relevant):
        judged[f"d{rng.randrange(40)}"] = rng.randint(1, 3)
    for _ in range(rng.randrange(4)):
        judged.setdefault(f"d{rng.randrange(40)}", rng.choice([0, 0, -1]))
    if not judged:
        judged[f"d{rng.randrange(40)}"] = 0
    qrels[query] = judged
    length = 0 if q % 25 == 0 else rng.randrange(26)
    docs = rng.sample(range(60), length)
    # Few distinct scores, so ties are common.
    run[query] = {f"d{d}": float(rng.choice([1, 2, 3, 4])) for d in docs}

cut = {"ndcg_cut.10", "recall.1,5,10", "map_cut.10", "success.1,5,10"}
reference = pytrec_eval.RelevanceEvaluator(qrels, cut).evaluate(run)


def trec_order(scores):
    return sorted(scores, key=lambda d: (scores[d], d), reverse=True)


top10 = {q: {d: scores[d] for d in trec_order(scores)[:10]} for q, scores in run.items()}
for q, values in pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10).items():
    reference[q]["recip_rank_cut_10"] = values["recip_rank"]
json.dump({"qrels": qrels, "run": run, "reference": reference}, sys.stdout)
