"""Reads {"qrels": {q: {d: grade}}, "run": {q: {d: score}}} on stdin and prints pytrec_eval's per-query
ndcg_cut_10, recall_1/5/10 and map_cut_10 as JSON: the independent reference for the Rust metrics."""
import json
import sys

import pytrec_eval

data = json.load(sys.stdin)
measures = {"ndcg_cut_10", "recall_1", "recall_5", "recall_10", "map_cut_10"}
evaluator = pytrec_eval.RelevanceEvaluator(data["qrels"], measures)
json.dump(evaluator.evaluate(data["run"]), sys.stdout)
