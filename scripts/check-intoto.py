#!/usr/bin/env python3
"""Parses and validates a bundle's in-toto statements with the `in-toto-attestation` package (the reference
Python bindings of the in-toto attestation framework): the manifest, every run's SLSA Provenance v1 and the
verification's Test Result v0.1. Each statement must parse into the framework's Statement protobuf (unknown
fields refused) and pass its `validate()`; each predicate must parse into its predicate type's protobuf.

Usage: scripts/check-intoto.py BUNDLE_DIR
"""
import glob
import json
import os
import sys

from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.predicates.test_result.v0 import test_result_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement

PREDICATES = {
    "https://slsa.dev/provenance/v1": provenance_pb2.Provenance,
    "https://in-toto.io/attestation/test-result/v0.1": test_result_pb2.TestResult,
}


def check(path, expected_type=None):
    text = open(path).read()
    proto = json_format.Parse(text, statement_pb2.Statement())
    Statement.copy_from_pb(proto).validate()
    value = json.loads(text)
    predicate_type = value["predicateType"]
    if expected_type and predicate_type != expected_type:
        raise ValueError(f"{path}: predicateType {predicate_type}, expected {expected_type}")
    if predicate_type in PREDICATES:
        json_format.Parse(json.dumps(value["predicate"]), PREDICATES[predicate_type]())
    return predicate_type, len(proto.subject)


def main():
    bundle = sys.argv[1]
    checked = []
    checked.append(check(os.path.join(bundle, "manifest.json")))
    provenances = sorted(glob.glob(os.path.join(bundle, "*.provenance.json")))
    aggregates = glob.glob(os.path.join(bundle, "*.aggregate.json"))
    if len(provenances) != len(aggregates):
        sys.exit(f"{len(provenances)} provenance statements for {len(aggregates)} aggregates")
    for path in provenances:
        checked.append(check(path, "https://slsa.dev/provenance/v1"))
    checked.append(check(os.path.join(bundle, "verification.intoto.json"), "https://in-toto.io/attestation/test-result/v0.1"))
    kinds = {}
    for predicate_type, _ in checked:
        kinds[predicate_type] = kinds.get(predicate_type, 0) + 1
    print(f"{len(checked)} in-toto statements parse and validate: " + ", ".join(f"{n} {t}" for t, n in sorted(kinds.items())))


if __name__ == "__main__":
    main()
