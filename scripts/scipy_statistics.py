"""The outside reference for the held-out statistics: scipy's paired percentile bootstrap and paired
permutation test on generated per-query scores shaped like retrieval metrics (many exact 0s and 1s, ties).

Usage: python3 scripts/scipy_statistics.py SEED QUERIES
Prints {"cases": [{"name", "a", "b", "mean_a": [low, high], "difference": [low, high], "p": p}]}: for each
case, two paired series, scipy's 95% percentile interval of mean(a) and of mean(a - b) (10,000 resamples),
and the two-sided p-value of a paired permutation test (sign flips of a - b, 10,000 permutations).
Monte Carlo error separates these from the project's numbers: they agree within it, not to the bit.
"""
import json
import random
import sys

import numpy as np
from scipy import stats

seed, queries = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(seed)


def metric_like():
    draw = rng.random()
    if draw < 0.25:
        return 0.0
    if draw < 0.45:
        return 1.0
    return round(rng.random(), 4)


def case(name, shift, noise):
    a = [metric_like() for _ in range(queries)]
    b = [min(1.0, max(0.0, x - shift + rng.gauss(0.0, noise))) if rng.random() < 0.5 else x for x in a]
    x, y = np.array(a), np.array(b)
    generator = np.random.default_rng(seed)
    mean_a = stats.bootstrap((x,), np.mean, n_resamples=10_000, method="percentile", random_state=generator)
    difference = stats.bootstrap(
        (x, y),
        lambda p, q, axis=-1: np.mean(p - q, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=10_000,
        method="percentile",
        random_state=generator,
    )
    test = stats.permutation_test(
        (x, y),
        lambda p, q, axis=-1: np.mean(p - q, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=10_000,
        alternative="two-sided",
        random_state=generator,
    )
    return {
        "name": name,
        "a": a,
        "b": b,
        "mean_a": [float(mean_a.confidence_interval.low), float(mean_a.confidence_interval.high)],
        "difference": [float(difference.confidence_interval.low), float(difference.confidence_interval.high)],
        "p": float(test.pvalue),
    }


cases = [case("no effect", 0.0, 0.2), case("small effect", 0.05, 0.2), case("clear effect", 0.2, 0.1)]
json.dump({"cases": cases}, sys.stdout)
