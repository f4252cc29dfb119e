#!/usr/bin/env python3
"""Sparse (SPLADE) encoding speed: the project's `embed` against sentence-transformers' `SparseEncoder` on torch,
same texts, same weights, same threads, one run. Prints one JSON object.

The checkpoint has naver/splade-cocondenser-ensembledistil's shapes (BERT-base: 12 layers of 768, 12 heads,
3,072, the 30,522-token bert-base-uncased vocabulary, tied decoder) with seeded random weights
(`torch.manual_seed(0)`, `BertForMaskedLM(config)`), saved by sentence-transformers 6.3 as a fill-mask Transformer and
SpladePooling(max): the arithmetic and the speed do not depend on the values, and naver's weights cannot be
downloaded here. The tokenizer is all-MiniLM-L6-v2's (bert-base-uncased's vocabulary), so the window is 512.
Texts: the first N SciFact documents, `title + " " + text` as sentence-transformers builds them, encoded as
documents.

Run (2 threads on both sides; keep the machine otherwise quiet):
    ~/.cache/embed-peer/bin/python scripts/bench-sparse-peers.py --bin target/release/scifact-audit \\
        --archive ../shared/datasets/scifact.zip --tokenizer ../shared/models/all-MiniLM-L6-v2 --docs 1000
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

from peer_bench import cpu_name, documents, embed_documents

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def checkpoint(tokenizer_dir, out):
    import torch
    import transformers
    from sentence_transformers import SparseEncoder
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sparse_encoder.modules import SpladePooling

    base = os.path.join(out, "base")
    os.makedirs(base, exist_ok=True)
    for name in ["tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"]:
        if os.path.exists(os.path.join(tokenizer_dir, name)):
            shutil.copy(os.path.join(tokenizer_dir, name), base)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                     intermediate_size=3072, max_position_embeddings=512, hidden_act="gelu")
    torch.manual_seed(0)
    transformers.BertForMaskedLM(config).save_pretrained(base, safe_serialization=True)
    tokenizer = transformers.AutoTokenizer.from_pretrained(base)
    tokenizer.model_max_length = 512
    tokenizer.save_pretrained(base)
    model = SparseEncoder(modules=[Transformer(base, transformer_task="fill-mask"), SpladePooling("max")])
    target = os.path.join(out, "splade-base-random")
    model.save_pretrained(target)
    return target


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--archive", required=True)
    parser.add_argument("--tokenizer", required=True, help="a directory with bert-base-uncased's tokenizer files")
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    import torch
    from sentence_transformers import SparseEncoder
    import sentence_transformers

    torch.set_num_threads(args.threads)
    texts = documents(args.archive, args.docs)
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = checkpoint(args.tokenizer, scratch)
        model = SparseEncoder(model_dir, device="cpu")
        model.encode_document(texts[:16], batch_size=args.batch_size)  # warm-up
        started = time.perf_counter()
        theirs = model.encode_document(texts, batch_size=args.batch_size, convert_to_tensor=True,
                                       convert_to_sparse_tensor=False)
        torch_seconds = time.perf_counter() - started
        model_seconds, ours_wall, ours = embed_documents(args.bin, model_dir, texts, args.threads,
                                                         args.batch_size)
        worst, same_indices, one_sided = 0.0, 0, 0.0
        token_counts = [o["tokens"] for o in ours]
        for row, line in zip(theirs, ours):
            nonzero = torch.nonzero(row, as_tuple=True)[0].tolist()
            same_indices += nonzero == line["sparse"]["indices"]
            ours_of = dict(zip(line["sparse"]["indices"], line["sparse"]["values"]))
            for i in set(nonzero) | set(ours_of):
                difference = abs(float(row[i]) - ours_of.get(i, 0.0))
                worst = max(worst, difference)
                if (i in ours_of) != (i in nonzero):
                    one_sided = max(one_sided, difference)
    result = {
        "cpu": cpu_name(),
        "threads": args.threads,
        "docs": len(texts),
        "mean_tokens": round(sum(token_counts) / len(token_counts), 1),
        "sentence_transformers": {"version": sentence_transformers.__version__, "torch": torch.__version__,
                                  "seconds": round(torch_seconds, 2),
                                  "docs_per_second": round(len(texts) / torch_seconds, 2)},
        "scifact_audit": {"model_seconds": model_seconds, "wall_seconds": round(ours_wall, 2),
                          "docs_per_second": round(len(texts) / model_seconds, 2)},
        "ratio": round(torch_seconds / model_seconds, 2),
        "same_indices": f"{same_indices} of {len(texts)}",
        "worst_abs_difference": worst,
        "largest_value_one_side_lacks": one_sided,
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
