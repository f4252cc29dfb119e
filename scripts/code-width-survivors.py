#!/usr/bin/env python3
"""How many rows the exact vector search's bound lets through to be rescored, per width of its first-pass codes.

The first pass of `Bounded` (crates/semantic-memory/src/vector/bounded.rs) reads every row's int8 codes: 2 MB per
query on SciFact, and it is bound by memory, not arithmetic. Narrower codes would read less, but the rigorous bound
(Cauchy-Schwarz on each side's quantization residual) loosens, and every row whose upper bound reaches the k-th
lower bound must be rescored from its f32 vector. This computes, on a fixture's real vectors and test queries, the
survivors for 8-, 6-, 5- and 4-bit row codes (the query always int8), top 10 and top 100, in float64.

Usage: python3 scripts/code-width-survivors.py FIXTURE.json     (needs numpy)
"""
import json
import sys

import numpy as np


def quantize(matrix, levels):
    scale = np.abs(matrix).max(axis=1, keepdims=True) / levels
    codes = np.clip(np.round(matrix / scale), -levels, levels)
    residual = np.linalg.norm(matrix - scale * codes, axis=1)
    coded_norm = np.linalg.norm(scale * codes, axis=1)
    return scale[:, 0], codes, residual, coded_norm


def main():
    fixture = json.load(open(sys.argv[1]))
    rows = np.array([d["vector"] for d in fixture["documents"]], dtype=np.float64)
    queries = np.array([q["vector"] for q in fixture["queries"]], dtype=np.float64)
    q_scale, q_codes, q_residual, _ = quantize(queries, 127)
    print(f"{len(rows)} rows x {rows.shape[1]} dims, {len(queries)} queries")
    for k in (10, 100):
        for bits in (8, 6, 5, 4):
            scale, codes, residual, coded_norm = quantize(rows, 2 ** (bits - 1) - 1)
            survivors = []
            for i in range(len(queries)):
                approximate = scale * q_scale[i] * (codes @ q_codes[i])
                error = residual * np.linalg.norm(queries[i]) + coded_norm * q_residual[i] + 1e-5
                floor = np.sort(approximate - error)[-k]
                survivors.append(int((approximate + error >= floor).sum()))
            survivors = np.array(survivors)
            megabytes = len(rows) * rows.shape[1] * bits / 8 / 1e6
            print(f"top {k:3}, {bits}-bit codes ({megabytes:.2f} MB): rescored mean {survivors.mean():.1f}, "
                  f"p50 {np.median(survivors):.0f}, p95 {np.percentile(survivors, 95):.0f}")


if __name__ == "__main__":
    main()
