#!/usr/bin/env python3
"""ranx's paired randomization test (Fisher's, as ranx implements it), fed the same TREC runs and qrels as a
comparison's two bundles, against the comparison's two-sided p-values: every matched run's p-value must agree
within Monte Carlo error (the two tests draw different permutations: four standard errors of the larger
p-value at 10,000 permutations, plus three permutations' worth). ranx also gives every run's mean nDCG@10 on
each side, which must equal the statement's.

Usage: scripts/check-compare-ranx.py BASELINE_BUNDLE CANDIDATE_BUNDLE comparison.json
"""
import glob
import json
import math
import os
import sys

import numpy as np
from ranx import Qrels, Run, evaluate
from ranx.statistical_tests import fisher_randomization_test


def per_query(bundle, aggregate, metric):
    """ranx's per-query metric of one run, in the run's row order (so that two runs pair by query)."""
    stem = aggregate[: -len(".aggregate.json")]
    rows = [json.loads(line) for line in open(os.path.join(bundle, f"{stem}.jsonl"))]
    ids = [row["query_id"] for row in rows]
    (qrels_file,) = glob.glob(os.path.join(bundle, "*.qrels"))
    judged = Qrels.from_file(qrels_file, kind="trec").to_dict()
    ranked = Run.from_file(os.path.join(bundle, f"{stem}.trec"), kind="trec").to_dict()
    qrels = Qrels.from_dict({q: judged[q] for q in ids})
    run = Run.from_dict({q: ranked[q] for q in ids if q in ranked})
    scores = dict(zip(run.keys(), evaluate(qrels, run, metric, return_mean=False)))
    # A query the run left empty (a failed search) scores 0, as in the comparison.
    return np.array([float(scores.get(q, 0.0)) for q in ids])


def main():
    baseline, candidate, statement_path = sys.argv[1:4]
    statement = json.load(open(statement_path))
    predicate = statement["predicate"]
    permutations = predicate["plan"]["permutations"]
    metric = predicate["plan"]["metric"]
    worst = 0.0
    checked = 0
    for run in predicate["runs"]:
        b = per_query(baseline, run["baseline"]["aggregate"], metric)
        c = per_query(candidate, run["candidate"]["aggregate"], metric)
        for side, values in (("baseline", b), ("candidate", c)):
            stated = run["metrics"][metric][side]
            if abs(values.mean() - stated) > 1e-6:
                sys.exit(f"{run['split']} {run['mode']} {run['role']}: ranx's {side} {metric} {values.mean()}, stated {stated}")
        p_ranx, _ = fisher_randomization_test(b, c, n_permutations=permutations, max_p=0.05, random_seed=7)
        p_ours = run["tests"]["p"]
        p = max(p_ranx, p_ours)
        tolerance = 4 * math.sqrt(max(p * (1 - p), 1e-12) / permutations) + 3 / permutations
        difference = abs(p_ranx - p_ours)
        if difference > tolerance:
            sys.exit(f"{run['split']} {run['mode']} {run['role']}: ranx p {p_ranx}, the comparison's {p_ours} (tolerance {tolerance:.4f})")
        worst = max(worst, difference)
        checked += 1
    print(f"{checked} runs: ranx's Fisher randomization p-values and means agree within Monte Carlo error (largest p difference {worst:.4f})")
    print("agree within Monte Carlo error")


if __name__ == "__main__":
    main()
