#!/usr/bin/env python3
"""Feeds repro_eval (Breuer et al.) the original and the reproduced TREC runs of a reproduction and requires
the numbers `reproduction.json` states: per run, Kendall's tau union (KTU), rank-biased overlap (RBO) and the
RMSE of nDCG@10; per pre-registered comparison, the effect ratio (ER) and delta relative improvement (DeltaRI).

Usage: scripts/check-repro-eval.py STATEMENT ORIGINAL_RUNS_DIR REPRODUCED_RUNS_DIR QRELS

The original runs are `<stem>.trec` in ORIGINAL_RUNS_DIR (a bundle of claim v3, or `scifact-audit export`
over a copy of an older bundle's rows); the reproduced ones in REPRODUCED_RUNS_DIR (reproduce's results).
"""
import json
import os
import sys

from repro_eval.Evaluator import RpdEvaluator

TOLERANCE = 1e-9
NDCG = "nDCG@10"


def stem(aggregate):
    return aggregate[: -len(".aggregate.json")]


def close(theirs, ours):
    # JSON has no NaN: an undefined ratio (no improvement in the original) is stated as null.
    ours = float("nan") if ours is None else ours
    return abs(theirs - ours) <= TOLERANCE or (theirs != theirs and ours != ours)


def main():
    statement_path, original_dir, reproduced_dir, qrels = sys.argv[1:5]
    predicate = json.load(open(statement_path))["predicate"]
    failures = []
    checked = 0
    for run in predicate["runs"]:
        name = stem(run["aggregate"])
        evaluator = RpdEvaluator(
            qrels_orig_path=qrels,
            run_b_orig_path=os.path.join(original_dir, name + ".trec"),
            run_b_rep_path=os.path.join(reproduced_dir, name + ".trec"),
        )
        evaluator.trim()
        evaluator.evaluate()
        ktu = evaluator.ktu()["baseline"]
        rbo = evaluator.rbo()["baseline"]
        rmse = evaluator.rmse()["baseline"][NDCG]
        for what, theirs, ours in [
            ("KTU", ktu, run["kendall_tau_union"]),
            ("RBO", rbo, run["rbo"]),
            ("RMSE nDCG@10", rmse, run["rmse"]["ndcg@10"]),
        ]:
            checked += 1
            if not close(theirs, ours):
                failures.append(f"{name} {what}: repro_eval {theirs!r}, reproduction.json {ours!r}")
    for effect in predicate["comparisons"]:
        evaluator = RpdEvaluator(
            qrels_orig_path=qrels,
            run_b_orig_path=os.path.join(original_dir, stem(effect["baseline"]) + ".trec"),
            run_a_orig_path=os.path.join(original_dir, stem(effect["advanced"]) + ".trec"),
            run_b_rep_path=os.path.join(reproduced_dir, stem(effect["baseline"]) + ".trec"),
            run_a_rep_path=os.path.join(reproduced_dir, stem(effect["advanced"]) + ".trec"),
        )
        evaluator.trim()
        evaluator.evaluate()
        er = evaluator.er()[NDCG]
        dri = evaluator.dri()[NDCG]
        for what, theirs, ours in [
            ("ER", er, effect["effect_ratio"]),
            ("DeltaRI", dri, effect["delta_relative_improvement"]),
        ]:
            checked += 1
            if not close(theirs, ours):
                failures.append(f"{effect['name']} {what}: repro_eval {theirs!r}, reproduction.json {ours!r}")
    for failure in failures:
        print("MISMATCH", failure)
    print(f"{checked} repro_eval measures over {len(predicate['runs'])} runs and "
          f"{len(predicate['comparisons'])} comparisons: {len(failures)} differ by more than {TOLERANCE}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
