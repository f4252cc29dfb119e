#!/usr/bin/env python3
"""ColBERT encoding speed: the project's `embed --role document` against PyLate 1.6.0's `encode(is_query=False)` on
torch, same texts, same weights, same threads, one run. Prints one JSON object.

The checkpoint has answerai-colbert-small-v1's shapes in colbert-ai's layout (`HF_ColBERT`: a BERT of 12 layers of
384, 12 heads, intermediate 1,536, 512 positions, `linear.weight` to 96 dimensions, `[unused0]` / `[unused1]`
markers), seeded random weights (`torch.manual_seed(0)`; the arithmetic and the speed do not depend on the values,
and the real weights cannot be downloaded here), bert-base-uncased's WordPiece tokenizer (all-MiniLM-L6-v2's files,
`--tokenizer`), and documents of 300 tokens (PyLate's BEIR example; `--doc-maxlen`). Texts: the first N SciFact
documents, `title + " " + text`. Each side runs `--rounds` times, alternating, and its fastest is kept. The largest difference between the two sides' token vectors is reported, and
their counts must agree.

Run (2 threads on both sides; keep the machine otherwise quiet):
    ~/.cache/pylate-peer/bin/python scripts/bench-colbert-peers.py --bin target/release/scifact-audit \\
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

TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"]


def checkpoint(directory, tokenizer, doc_maxlen):
    import torch
    import transformers
    from safetensors.torch import save_file

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=12, num_attention_heads=12,
                                     intermediate_size=1536, max_position_embeddings=512, hidden_act="gelu")
    model = transformers.BertModel(config, add_pooling_layer=False)
    tensors = {f"bert.{k}": v.contiguous() for k, v in model.state_dict().items()}
    tensors["linear.weight"] = torch.randn(96, 384) * 0.05
    directory.mkdir(parents=True)
    save_file(tensors, str(directory / "model.safetensors"), metadata={"format": "pt"})
    raw = config.to_dict()
    raw["architectures"] = ["HF_ColBERT"]
    (directory / "config.json").write_text(json.dumps(raw, indent=2) + "\n")
    (directory / "artifact.metadata").write_text(json.dumps({
        "query_token_id": "[unused0]", "doc_token_id": "[unused1]", "query_maxlen": 32, "doc_maxlen": doc_maxlen,
        "attend_to_mask_tokens": False, "dim": 96}) + "\n")
    for name in TOKENIZER_FILES:
        if (tokenizer / name).exists():
            shutil.copy(tokenizer / name, directory / name)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--archive", required=True)
    parser.add_argument("--tokenizer", required=True, help="a directory with bert-base-uncased's tokenizer files")
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--doc-maxlen", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    import pylate
    import torch
    from pylate import models

    texts = documents(args.archive, args.docs)
    with tempfile.TemporaryDirectory() as scratch:
        directory = os.path.join(scratch, "colbert-small-shapes")
        from pathlib import Path

        checkpoint(Path(directory), Path(args.tokenizer), args.doc_maxlen)
        torch.set_num_threads(args.threads)
        model = models.ColBERT(directory, device="cpu")
        model.encode(texts[:8], is_query=False, batch_size=args.batch_size)  # warm-up
        # Each side `--rounds` times, alternating (the project first), the fastest of each kept.
        torch_seconds, model_seconds = float("inf"), float("inf")
        for _ in range(args.rounds):
            seconds, wall, lines = embed_documents(args.bin, directory, texts, args.threads, args.batch_size)
            model_seconds = min(model_seconds, seconds)
            started = time.perf_counter()
            theirs = model.encode(texts, is_query=False, batch_size=args.batch_size, convert_to_numpy=True)
            torch_seconds = min(torch_seconds, time.perf_counter() - started)
    worst, tokens = 0.0, 0
    for index, (line, matrix) in enumerate(zip(lines, theirs, strict=True)):
        mine = line["vectors"]
        if len(mine) != matrix.shape[0]:
            sys.exit(f"document {index}: {len(mine)} token vectors, PyLate's {matrix.shape[0]}")
        tokens += len(mine)
        for row, want in zip(mine, matrix.tolist()):
            worst = max(worst, max(abs(a - b) for a, b in zip(row, want)))
    print(json.dumps({
        "benchmark": "colbert-encode-vs-pylate-v1",
        "cpu": cpu_name(),
        "threads": args.threads,
        "documents": len(texts),
        "doc_maxlen": args.doc_maxlen,
        "rounds": args.rounds,
        "timing": "each side's fastest of the rounds, alternating, the project first",
        "token_vectors": tokens,
        "project_seconds_in_model": round(model_seconds, 3),
        "pylate_seconds": round(torch_seconds, 3),
        "project_docs_per_s": round(len(texts) / model_seconds, 2),
        "pylate_docs_per_s": round(len(texts) / torch_seconds, 2),
        "ratio_project_over_pylate": round(torch_seconds / model_seconds, 3),
        "largest_difference": worst,
        "versions": {"pylate": pylate.__version__, "torch": torch.__version__},
    }, indent=2))


if __name__ == "__main__":
    main()
