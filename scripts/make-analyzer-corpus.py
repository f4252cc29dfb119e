#!/usr/bin/env python3
"""Writes fixtures/lucene/analyzers.zip: a BEIR-layout corpus made to split analyzers, for the Lucene port's
tests (scripts/lucene-peer.sh runs Anserini on it; crates/scifact-eval/tests/anserini.rs holds the port to it).
Deterministic: the same bytes on every run (seeded, fixed member times).

Usage: scripts/make-analyzer-corpus.py [OUT.zip] [--docs N]
  --docs N   N generated documents instead of 1,200 (the benchmarks use 200,000); the fixed cases stay.
"""
import json
import random
import sys
import zipfile

FRAGMENTS = [
    # possessives and apostrophes
    "O'Neil's", "the dogs' bones", "James’s book", "ＡＢＣ＇s", "rock’n’roll", "can't won’t l'amour", "'quoted'",
    "x'y'z", "CAT'S", "it's", "’s", "Mary'S",
    # hyphens and dashes
    "TNF-α", "state-of-the-art", "e-mail", "co-operate", "well—known", "x–y", "-leading trailing-", "IL-6",
    # numbers
    "1,000.5", "3.14", "1.2.3", "10,000", ".5", "5.", "1e-5", "3rd", "A.B.C.", "U.S.A.", "0x1F", "1/2", "½", "x²",
    "H₂O", "10^6", "−5", "+7", "12:30", "2024-01-01", "95%", "$100", "v1.2.3-beta",
    # URLs and e-mail
    "https://x.org/a?b=c&d=e#f", "www.example.com", "user@example.com", "first.last+tag@sub.domain.org",
    "ftp://host/path", "x.org", "file_name.txt", "foo_bar_baz", "__init__",
    # CJK and other scripts
    "中文字符", "日本語のテキスト", "カタカナ", "ひらがな", "한국어 텍스트", "ภาษาไทย", "ພາສາລາວ", "ភាសាខ្មែរ", "မြန်မာ",
    "العربية", "עברית ג״ח", "हिन्दी", "Ελληνικά", "Русский", "Ωmega",
    # emoji and symbols
    "😀", "👍🏽", "🇫🇷", "👨‍👩‍👧", "1️⃣", "©", "®", "™", "↔", "★", "♥", "©2024", "™x",
    # case: capital İ, Σ and friends
    "İSTANBUL", "ΣΊΣΥΦΟΣ", "ΟΔΟΣ", "Straße", "STRASSE", "ﬁne", "K", "Ⅻ", "ǅ", "ß", "ı", "𐐀𐐨", "Ꭰ",
    # whitespace and format characters
    "soft\u00adhyphen", "zero\u200bwidth", "join\u200dme", "nb\u00a0sp", "line\u2028sep", "\ufeffbom", "tab\there",
    "cr\r\nlf", "e\u0301", "combining\u0308",
    # Porter's corners
    "generalizations", "oscillators", "sky", "y", "yy", "ies", "sses", "agreed", "feed", "bled", "archaeology",
    "relational", "conditional", "hopefulness", "naïvely", "αβγs", "aed", "ion", "ization", "eed",
    # letters Unicode 13+ added (Lucene 9.9's tables are 12.1): Yezidi, Vithkuqi, Kawi
    "\U00010e80\U00010e81", "\U00010570\U00010597", "\U00011f04\U00011f05",
]
WORDS = ("cell protein gene expression tumor patient study risk effect dose level blood brain virus vaccine "
         "signal pathway receptor mouse human clinical trial treatment response infection immune").split()
STOP = "a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with".split()


RANGES = [
    (0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF), (0x600, 0x6FF),
    (0x900, 0x97F), (0xE00, 0xE7F), (0x1780, 0x17FF), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2070, 0x209F),
    (0x2100, 0x214F), (0x2190, 0x21FF), (0x2460, 0x24FF), (0x2600, 0x27BF), (0x3000, 0x30FF), (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xFB00, 0xFB4F), (0xFE00, 0xFE0F), (0xFF00, 0xFFEF), (0x10400, 0x1044F),
    (0x1D400, 0x1D7FF), (0x1F000, 0x1FAFF), (0x1F1E6, 0x1F1FF), (0x20000, 0x2A6DF), (0xE0000, 0xE007F),
]


def noise(rng, n):
    out = []
    while len(out) < n:
        lo, hi = rng.choice(RANGES)
        c = chr(rng.randint(lo, hi))
        if 0xD800 <= ord(c) < 0xE000:
            continue
        out.extend([c] * (rng.randrange(1, 4) if rng.random() < 0.2 else 1))
        if rng.random() < 0.15:
            out.append(rng.choice(" \n\t'’.,-_@:/0123456789"))
    return "".join(out)


def sentence(rng, n):
    out = []
    for _ in range(n):
        r = rng.random()
        out.append(rng.choice(FRAGMENTS) if r < 0.35 else rng.choice(STOP) if r < 0.55 else rng.choice(WORDS))
    return " ".join(out)


def main():
    args = sys.argv[1:]
    generated = 1200
    if "--docs" in args:
        at = args.index("--docs")
        generated = int(args[at + 1])
        del args[at:at + 2]
    out = args[0] if args else "fixtures/lucene/analyzers.zip"
    rng = random.Random(57)
    docs = []
    for i in range(generated):
        docs.append({"_id": f"d{i}", "title": sentence(rng, rng.randrange(0, 6)), "text": sentence(rng, rng.randrange(0, 60))})
    # Every fragment alone, so each one's terms are compared by themselves.
    for i, fragment in enumerate(FRAGMENTS):
        docs.append({"_id": f"f{i}", "title": "", "text": fragment})
    docs += [
        {"_id": "empty", "title": "", "text": ""},
        {"_id": "title-only", "title": "protein tumor", "text": ""},
        {"_id": "stop-only", "title": "The", "text": "and of the it is a"},
        {"_id": "long-300", "title": "", "text": "a" * 300 + " " + "b" * 600},
        {"_id": "long-pair", "title": "", "text": "a" * 254 + "\U00010400bc"},
        {"_id": "long-digits", "title": "", "text": "1" * 256 + " protein"},
        {"_id": "dup-a", "title": "vaccine trial", "text": "immune response vaccine"},
        {"_id": "dup-b", "title": "vaccine trial", "text": "immune response vaccine"},
        {"_id": "q1", "title": "vaccine", "text": "immune response"},          # the id of a query
        {"_id": "9", "title": "receptor", "text": "signal"},
        {"_id": "10", "title": "receptor", "text": "signal"},                 # "10" < "9" as strings
        {"_id": "Z", "title": "receptor", "text": "signal"},
        {"_id": "é", "title": "receptor", "text": "signal"},
    ]
    # Random text over the ranges analyzers disagree on, each code point alone or in runs: whatever Lucene does
    # with it, the ports must do too.
    for i in range(400):
        docs.append({"_id": f"r{i}", "title": noise(rng, rng.randrange(0, 8)), "text": noise(rng, rng.randrange(0, 300))})
    queries = [{"_id": f"q{i}", "text": sentence(rng, rng.randrange(1, 12))} for i in range(1, 61)]
    queries += [
        {"_id": "q-stop", "text": "the and of"},
        {"_id": "q-repeat", "text": "vaccine vaccine vaccine immune"},
        {"_id": "q-ties", "text": "receptor signal"},
        {"_id": "q-symbols", "text": "© ® ™ 😀 İSTANBUL ΣΊΣΥΦΟΣ"},
        {"_id": "q-long", "text": "a" * 300},
    ]
    qrels = [(q["_id"], docs[(7 * i) % len(docs)]["_id"], 1 + i % 2) for i, q in enumerate(queries)]
    members = {
        "analyzers/corpus.jsonl": "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs),
        "analyzers/queries.jsonl": "".join(json.dumps(q, ensure_ascii=False) + "\n" for q in queries),
        "analyzers/qrels/test.tsv": "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{s}\n" for q, d, s in qrels),
    }
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in members.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, text.encode("utf-8"))


if __name__ == "__main__":
    main()
