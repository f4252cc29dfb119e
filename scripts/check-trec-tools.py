#!/usr/bin/env python3
"""Reads a bundle's (or output directory's) TREC run files and qrels with pytrec_eval, ranx and ir-measures,
and requires each tool to give every aggregate metric to 1e-9.

Usage: scripts/check-trec-tools.py DIR

For each `*.aggregate.json` in DIR, the run file is `<stem>.trec` and the qrels DIR's one `*.qrels` file
(`<dataset>-<split>.qrels`; `scifact-test.qrels` in bundles of claim v5 and earlier, whatever the dataset). An
aggregate's metric is the mean over its selected queries (a query with no line in the run scores 0), so each
tool's per-query values are averaged over `split_binding.selected_ids` the same way.
"""
import glob
import json
import os
import sys

import ir_measures
import pytrec_eval
import ranx

TOLERANCE = 1e-9

# aggregate name -> (pytrec_eval measure, ranx metric, ir_measures measure)
METRICS = {
    "ndcg@10": ("ndcg_cut_10", "ndcg@10", ir_measures.nDCG @ 10),
    "recall@1": ("recall_1", "recall@1", ir_measures.R @ 1),
    "recall@5": ("recall_5", "recall@5", ir_measures.R @ 5),
    "recall@10": ("recall_10", "recall@10", ir_measures.R @ 10),
    "mrr@10": ("recip_rank", "mrr@10", ir_measures.RR @ 10),
    "map@10": ("map_cut_10", "map@10", ir_measures.AP @ 10),
    "success@1": ("success_1", "hit_rate@1", ir_measures.Success @ 1),
    "success@5": ("success_5", "hit_rate@5", ir_measures.Success @ 5),
    "success@10": ("success_10", "hit_rate@10", ir_measures.Success @ 10),
}


def read_run(path):
    run = {}
    with open(path) as f:
        for line in f:
            qid, _q0, doc, _rank, score, _tag = line.split()
            run.setdefault(qid, {})[doc] = float(score)
    return run


def read_qrels(path):
    qrels = {}
    with open(path) as f:
        for line in f:
            qid, _it, doc, grade = line.split()
            qrels.setdefault(qid, {})[doc] = int(grade)
    return qrels


def the_qrels(directory):
    """DIR's one qrels file."""
    found = glob.glob(os.path.join(directory, "*.qrels"))
    if len(found) != 1:
        sys.exit(f"{directory}: {len(found)} qrels files, not one")
    return found[0]


def mean_over(selected, per_query):
    return sum(per_query.get(q, 0.0) for q in selected) / len(selected)


def main():
    directory = sys.argv[1]
    qrels_path = the_qrels(directory)
    qrels = read_qrels(qrels_path)
    aggregates = sorted(glob.glob(os.path.join(directory, "*.aggregate.json")))
    if not aggregates:
        sys.exit(f"no aggregates in {directory}")
    worst = 0.0
    failures = []
    for aggregate_path in aggregates:
        aggregate = json.load(open(aggregate_path))
        stem = os.path.basename(aggregate_path)[: -len(".aggregate.json")]
        run_path = os.path.join(directory, stem + ".trec")
        run = read_run(run_path)
        selected = aggregate["split_binding"]["selected_ids"]
        split_qrels = {q: qrels[q] for q in selected if q in qrels}
        expected = aggregate["metrics"]

        evaluator = pytrec_eval.RelevanceEvaluator(split_qrels, {m[0] for m in METRICS.values()})
        by_pytrec = evaluator.evaluate(run)
        ranx_run = ranx.Run({q: run.get(q, {}) for q in selected}, name=stem)
        ranx_qrels = ranx.Qrels(split_qrels)
        ranx_scores = ranx.evaluate(
            ranx_qrels, ranx_run, [m[1] for m in METRICS.values()], return_mean=False, make_comparable=True
        )
        by_ir_measures = {}
        for measure_result in ir_measures.iter_calc(
            [m[2] for m in METRICS.values()], split_qrels, run
        ):
            by_ir_measures.setdefault(str(measure_result.measure), {})[measure_result.query_id] = measure_result.value

        ranx_queries = list(ranx_run.keys())
        for name, (trec_name, ranx_name, ir_measure) in METRICS.items():
            values = {
                "pytrec_eval": mean_over(selected, {q: v[trec_name] for q, v in by_pytrec.items()}),
                "ranx": mean_over(selected, dict(zip(ranx_queries, map(float, ranx_scores[ranx_name])))),
                "ir_measures": mean_over(selected, by_ir_measures.get(str(ir_measure), {})),
            }
            for tool, value in values.items():
                difference = abs(value - expected[name])
                worst = max(worst, difference)
                if difference > TOLERANCE:
                    failures.append(f"{stem} {name}: {tool} {value!r}, aggregate {expected[name]!r}")
    for failure in failures:
        print("MISMATCH", failure)
    print(
        f"{len(aggregates)} runs x {len(METRICS)} metrics x 3 tools (pytrec_eval, ranx, "
        f"ir_measures {ir_measures.__version__}): largest difference {worst:.3g}"
    )
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
