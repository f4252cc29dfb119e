#!/usr/bin/env python3
"""Encoding speed of the 2024-2026 encoders: the project's `embed` against sentence-transformers on torch, same
texts, same weights, same threads, one run. Prints one JSON object.

`--family` picks the shapes (seeded random weights, `torch.manual_seed(0)` over transformers' own class; the
arithmetic and the speed do not depend on the values, and the real weights cannot be downloaded here):
  nomic        nomic-embed-text-v1.5's: NomicBert, 12 layers of 768, 12 heads, SwiGLU 3,072, rotary θ 1000 over the
               whole head, mean pooling, Normalize, `search_document: ` for documents
  modernbert   ModernBERT-base's: 22 layers of 768, 12 heads, gated MLP 1,152, a global layer every 3 (θ 160,000)
               and local ones between (θ 10,000, a 128-token band), mean pooling (modernbert-embed-base's), Normalize
  qwen3        Qwen3-Embedding-0.6B's: a causal decoder, 28 layers of 1,024, 16 query heads of 128 over 8 key/value
               heads, SwiGLU 3,072, RMSNorms, rotary θ 1,000,000, a vocabulary of 151,669, last-token pooling,
               Normalize, no document prompt (its instruction is for queries)
All read bert-base-uncased's WordPiece tokenizer (all-MiniLM-L6-v2's files, `--tokenizer`): ModernBERT's and Qwen's
own BPE tokenizers cannot be downloaded here, so their token counts are a stand-in (for Qwen3 the appended `[SEP]`
stands in for `<|endoftext|>`); the mean token count is reported. The
window is 512 tokens on both sides (the real checkpoints allow 8,192; SciFact's documents are shorter than 512
but for a few). Texts: the first N SciFact documents, `title + " " + text` as sentence-transformers builds them,
encoded as documents.

Run (2 threads on both sides; keep the machine otherwise quiet):
    ~/.cache/embed-peer/bin/python scripts/bench-modern-peers.py --family nomic --bin target/release/scifact-audit \\
        --archive ../shared/datasets/scifact.zip --tokenizer ../shared/models/all-MiniLM-L6-v2 --docs 1000
"""
import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time

from peer_bench import cpu_name, documents, embed_documents

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

WINDOW = 512
PROMPTS = {"query": "search_query: ", "document": "search_document: "}
QWEN_PROMPTS = {"query": "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"}


def model_of(family):
    """The model of `family`'s shapes, its prompts and its pooling."""
    import torch
    import transformers

    torch.manual_seed(0)
    if family == "qwen3":
        config = transformers.Qwen3Config(
            vocab_size=151669, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
            num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=32768,
            rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
            tie_word_embeddings=False)
        return transformers.Qwen3Model(config), QWEN_PROMPTS, "lasttoken"
    if family == "nomic":
        config = transformers.NomicBertConfig(
            vocab_size=30528, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
            intermediate_size=3072, max_position_embeddings=8192, type_vocab_size=2, layer_norm_eps=1e-12,
            rope_parameters={"rope_theta": 1000.0, "rope_type": "default"})
        return transformers.NomicBertModel(config), PROMPTS, "mean"
    config = transformers.ModernBertConfig(
        vocab_size=50368, hidden_size=768, intermediate_size=1152, num_hidden_layers=22, num_attention_heads=12,
        max_position_embeddings=8192, local_attention=128, global_attn_every_n_layers=3,
        rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 160000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
        pad_token_id=0, bos_token_id=101, cls_token_id=101, eos_token_id=102, sep_token_id=102, norm_eps=1e-5)
    return transformers.ModernBertModel(config), PROMPTS, "mean"


def checkpoint(family, tokenizer_dir, out):
    import transformers
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    base = os.path.join(out, "base")
    os.makedirs(base, exist_ok=True)
    model, prompts, pooling = model_of(family)
    model.save_pretrained(base, safe_serialization=True)
    for name in ["tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"]:
        if os.path.exists(os.path.join(tokenizer_dir, name)):
            shutil.copy(os.path.join(tokenizer_dir, name), base)
    tokenizer = transformers.AutoTokenizer.from_pretrained(base)
    tokenizer.model_max_length = WINDOW
    tokenizer.save_pretrained(base)
    transformer = Transformer(base, max_seq_length=WINDOW)
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), pooling), Normalize()]
    target = os.path.join(out, f"{family}-random")
    SentenceTransformer(modules=modules, prompts=prompts).save_pretrained(target)
    return target, prompts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--family", required=True, choices=["nomic", "modernbert", "qwen3"])
    parser.add_argument("--bin", required=True)
    parser.add_argument("--archive", required=True)
    parser.add_argument("--tokenizer", required=True, help="a directory with bert-base-uncased's tokenizer files")
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    import torch
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    texts = documents(args.archive, args.docs)
    with tempfile.TemporaryDirectory() as scratch:
        model_dir, prompts = checkpoint(args.family, args.tokenizer, scratch)
        model = SentenceTransformer(model_dir, device="cpu")
        model.encode_document(texts[:16], batch_size=args.batch_size)  # warm-up
        started = time.perf_counter()
        theirs = model.encode_document(texts, batch_size=args.batch_size, convert_to_numpy=True)
        torch_seconds = time.perf_counter() - started
        model_seconds, ours_wall, ours = embed_documents(args.bin, model_dir, texts, args.threads,
                                                         args.batch_size)
        tokens = [len(model.tokenizer(prompts.get("document", "") + t, truncation=True, max_length=WINDOW)["input_ids"])
                  for t in texts]
        worst = 0.0
        for row, line in zip(theirs, ours):
            worst = max(worst, max(abs(float(a) - b) for a, b in zip(row, line["vector"])))
    result = {
        "family": args.family,
        "cpu": cpu_name(),
        "threads": args.threads,
        "docs": len(texts),
        "mean_tokens": round(sum(tokens) / len(tokens), 1),
        "max_tokens": max(tokens),
        "sentence_transformers": {"version": sentence_transformers.__version__, "torch": torch.__version__,
                                  "seconds": round(torch_seconds, 2),
                                  "docs_per_second": round(len(texts) / torch_seconds, 2)},
        "scifact_audit": {"model_seconds": model_seconds, "wall_seconds": round(ours_wall, 2),
                          "docs_per_second": round(len(texts) / model_seconds, 2)},
        "ratio": round(torch_seconds / model_seconds, 2),
        "worst_abs_difference": worst if math.isfinite(worst) else str(worst),
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
