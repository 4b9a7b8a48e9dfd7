#!/usr/bin/env python3
"""A long-query variant of a BEIR-layout dev set, for tests/it/eval_beir.rs and for
../shared/scripts/baseline_eval.py (the reference recipe scores it the same way): each judged
test query is followed by the first three sentences of a document that is not relevant to it
(seeded by the query id), the way a user pastes context around a question. The corpus and the
judgements are the original's.

usage: long_queries.py COLLECTION_DIR OUT_DIR [CONTEXT_DIR]

CONTEXT_DIR: take the sentences from this collection's documents instead (another domain's
text: the context then names no document of the searched corpus).
"""
import gzip
import json
import os
import random
import re
import shutil
import sys


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(os.path.join(out, "qrels"), exist_ok=True)
    corpus = {}
    with gzip.open(os.path.join(src, "corpus.jsonl.gz"), "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            corpus[str(r["_id"])] = " ".join((r.get("text") or "").split())
    context = corpus
    if len(sys.argv) > 3:
        context = {}
        with gzip.open(os.path.join(sys.argv[3], "corpus.jsonl.gz"), "rt", encoding="utf-8") as fh:
            for line in fh:
                r = json.loads(line)
                context[str(r["_id"])] = " ".join((r.get("text") or "").split())
    ids = sorted(context)
    qrels = {}
    with open(os.path.join(src, "qrels", "test.tsv"), encoding="utf-8") as fh:
        next(fh)
        for line in fh:
            q, d, s = line.rstrip("\n").split("\t")
            qrels.setdefault(q, set()).add(d)
    with open(os.path.join(src, "queries.jsonl"), encoding="utf-8") as fh, open(os.path.join(out, "queries.jsonl"), "w", encoding="utf-8") as w:
        for line in fh:
            r = json.loads(line)
            qid = str(r["_id"])
            if qid not in qrels:
                continue
            rng = random.Random(f"long-{qid}")
            while True:
                other = ids[rng.randrange(len(ids))]
                if (context is not corpus or other not in qrels[qid]) and context[other]:
                    break
            sentences = re.split(r"(?<=[.!?])\s+", context[other])
            text = " ".join(r["text"].split()) + " " + " ".join(sentences[:3])
            w.write(json.dumps({"_id": qid, "text": text}) + "\n")
    shutil.copy(os.path.join(src, "qrels", "test.tsv"), os.path.join(out, "qrels", "test.tsv"))
    shutil.copy(os.path.join(src, "corpus.jsonl.gz"), os.path.join(out, "corpus.jsonl.gz"))


if __name__ == "__main__":
    main()
