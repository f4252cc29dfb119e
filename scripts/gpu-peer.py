#!/usr/bin/env python3
"""The peer side of scripts/gpu-check.py, with PyTorch and sentence-transformers.

  checkpoint --model-files DIR --out DIR
      A checkpoint of DIR's shapes (all-MiniLM-L6-v2's config, tokenizer and sentence-transformers modules) with
      seeded random weights: torch.manual_seed(0), transformers' BertModel(config), saved as safetensors. Prints
      the weights' sha256.
  speed --model DIR --texts FILE
      sentence-transformers on DIR over FILE's texts (one JSON string per line), on the GPU in fp32 (TF32 off,
      batch 256) and fp16, timed after a warm-up; and cuBLAS fp32 (torch.addmm, TF32 off) on all-MiniLM-L6-v2's
      linear shapes. Prints JSON.
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import time


def checkpoint(args):
    import torch
    from transformers import BertConfig, BertModel

    shutil.rmtree(args.out, ignore_errors=True)
    shutil.copytree(args.model_files, args.out, ignore=shutil.ignore_patterns("model.safetensors", "*.bin"))
    config = BertConfig.from_pretrained(args.model_files)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(args.out, safe_serialization=True)
    # save_pretrained writes its own config.json; the checkpoint's own (the one sentence-transformers ships) is
    # what both sides read.
    shutil.copy(os.path.join(args.model_files, "config.json"), os.path.join(args.out, "config.json"))
    with open(os.path.join(args.out, "model.safetensors"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    print(json.dumps({"weights_sha256": digest, "torch": torch.__version__}))


def speed(args):
    import torch
    from sentence_transformers import SentenceTransformer
    import sentence_transformers

    with open(args.texts, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f if line.strip()]
    result = {"texts": len(texts), "torch": torch.__version__, "sentence_transformers": sentence_transformers.__version__}
    if not torch.cuda.is_available():
        result["note"] = "no CUDA device: nothing timed"
        print(json.dumps(result))
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    result["gpu"] = torch.cuda.get_device_name(0)

    def timed(model, batch):
        model.encode(texts[:1024], batch_size=batch)
        torch.cuda.synchronize()
        start = time.perf_counter()
        model.encode(texts, batch_size=batch, convert_to_numpy=True)
        torch.cuda.synchronize()
        return time.perf_counter() - start

    model = SentenceTransformer(args.model, device="cuda")
    seconds = timed(model, 256)
    result["fp32"] = {"seconds": round(seconds, 3), "texts_per_second": round(len(texts) / seconds)}
    model.half()
    seconds = timed(model, 256)
    result["fp16"] = {"seconds": round(seconds, 3), "texts_per_second": round(len(texts) / seconds)}
    del model
    cublas = []
    for m, n, k in [(49152, 1536, 384), (49152, 384, 1536), (49152, 1152, 384)]:
        a = torch.randn(m, k, device="cuda")
        w = torch.randn(n, k, device="cuda") * 0.05
        b = torch.randn(n, device="cuda")
        for _ in range(3):
            torch.addmm(b, a, w.T)
        torch.cuda.synchronize()
        best = float("inf")
        for _ in range(10):
            start = time.perf_counter()
            torch.addmm(b, a, w.T)
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - start)
        cublas.append({"shape": [m, n, k], "tflops": round(2 * m * n * k / best / 1e12, 1)})
    result["cublas_fp32"] = cublas
    print(json.dumps(result))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("checkpoint")
    made.add_argument("--model-files", required=True)
    made.add_argument("--out", required=True)
    timed = commands.add_parser("speed")
    timed.add_argument("--model", required=True)
    timed.add_argument("--texts", required=True)
    args = parser.parse_args()
    {"checkpoint": checkpoint, "speed": speed}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
