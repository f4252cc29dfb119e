"""What the encoding benchmarks against sentence-transformers share (scripts/bench-sparse-peers.py,
scripts/bench-modern-peers.py): the texts, the project's side of the run, and the CPU's name."""
import json
import os
import platform
import subprocess
import time
import zipfile


def documents(archive, n):
    """The first `n` documents of the archive's corpus, `title + " " + text` stripped, as sentence-transformers
    builds a document's text."""
    out = []
    with zipfile.ZipFile(archive) as z:
        name = next(m for m in z.namelist() if m.endswith("corpus.jsonl"))
        for line in z.read(name).decode("utf-8").splitlines():
            if line.strip():
                d = json.loads(line)
                out.append((d.get("title", "") + " " + d.get("text", "")).strip())
                if len(out) == n:
                    break
    return out


def embed_documents(binary, model_dir, texts, threads, batch_size):
    """`embed --role document` of `texts` at `threads` threads: the seconds it spent in the model (as it reports
    them), the wall seconds of the whole process, and its output lines, parsed."""
    stdin = "".join(json.dumps(t) + "\n" for t in texts).encode()
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    started = time.perf_counter()
    run = subprocess.run([binary, "embed", "--model-dir", model_dir, "--role", "document",
                          "--batch-size", str(batch_size)], input=stdin, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, check=True)
    wall = time.perf_counter() - started
    model_seconds = float(run.stderr.decode().split(" s in the model")[0].rsplit(" ", 1)[-1])
    return model_seconds, wall, [json.loads(line) for line in run.stdout.decode().splitlines()]


def cpu_name():
    """The CPU, as the platform or /proc/cpuinfo names it."""
    return platform.processor() or open("/proc/cpuinfo").read().split("model name")[1].split("\n")[0].strip("\t: ")
