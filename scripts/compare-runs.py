#!/usr/bin/env python3
"""Compares two run directories file by file (the rows `<dataset>-<mode>-<split>.jsonl` of `scifact-audit run`):
per query, the ranked doc ids, ranks and the bits of every score, fused and per component. A performance
change to the search must leave every one identical; this is how #17's changes were checked against a run made
before them.

Run: python3 scripts/compare-runs.py <before>/out <after>/out [--receipts]
     --receipts also requires identical receipts (same schema on both sides) and receipt digests.
Exit 0 when everything compared is identical, 1 otherwise.
"""
import argparse
import json
import struct
import sys
from pathlib import Path


def bits(x):
    return None if x is None else struct.pack("<d", x).hex()


def component(c):
    return None if not c else (c["rank"], bits(c["score"]))


def key(hit):
    return (hit["doc_id"], hit["rank"], bits(hit["score"]), component(hit.get("lexical")), component(hit.get("vector")))


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            rows[row["query_id"]] = row
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--receipts", action="store_true")
    args = ap.parse_args()
    files = sorted(p.name for p in args.before.glob("scifact-*.jsonl"))
    if not files:
        sys.exit(f"no rows (scifact-*.jsonl) in {args.before}")
    total = same = 0
    for name in files:
        other = args.after / name
        if not other.exists():
            print(f"{name}: missing from {args.after}")
            total += 1
            continue
        a, b = load(args.before / name), load(other)
        if a.keys() != b.keys():
            print(f"{name}: different query ids")
            total += 1
            continue
        n = 0
        for q in a:
            equal = [key(h) for h in a[q]["results"]] == [key(h) for h in b[q]["results"]]
            if args.receipts:
                equal = equal and a[q]["receipt"] == b[q]["receipt"]
            n += equal
        print(f"{name}: {n}/{len(a)} queries identical")
        total += len(a)
        same += n
    print(f"total {same}/{total}")
    sys.exit(0 if same == total else 1)


if __name__ == "__main__":
    main()
