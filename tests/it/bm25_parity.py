#!/usr/bin/env python3
"""The reference BM25 for tests/it/bm25_parity.rs: bm25s, Lucene BM25, with the recipe of
../shared/scripts/baseline_eval.py (English stop words, PyStemmer's Snowball English), over the
documents and queries the Rust test wrote.

usage: bm25_parity.py IN.json OUT.json K1 B DEPTH
IN: {"docs": [[id, text], ...], "queries": [text, ...]}
OUT: {"hits": [[[id, score], ...] per query, best first, at most DEPTH, score > 0]}
Needs: pip install bm25s PyStemmer
"""
import json
import sys

try:
    import bm25s
    import numpy as np
    import Stemmer
except ImportError as e:  # the Rust test turns this into its failure message
    sys.stderr.write(f"missing Python package ({e}); install the reference with: python3 -m pip install bm25s PyStemmer\n")
    sys.exit(3)


def main():
    src, dst, k1, b, depth = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    data = json.load(open(src, encoding="utf-8"))
    ids = [d[0] for d in data["docs"]]
    stem = Stemmer.Stemmer("english")
    retr = bm25s.BM25(k1=k1, b=b, method="lucene")
    retr.index(bm25s.tokenize([d[1] for d in data["docs"]], stopwords="en", stemmer=stem, show_progress=False), show_progress=False)
    hits = []
    for q in data["queries"]:
        tokens = bm25s.tokenize([q], stopwords="en", stemmer=stem, return_ids=False, show_progress=False)[0]
        tokens = [t for t in tokens if t in retr.vocab_dict]
        if not tokens:
            hits.append([])
            continue
        scores = retr.get_scores(tokens)
        top = np.argsort(-scores, kind="stable")[:depth]
        hits.append([[ids[j], float(scores[j])] for j in top if scores[j] > 0])
    json.dump({"hits": hits, "bm25s": bm25s.__version__}, open(dst, "w", encoding="utf-8"))


if __name__ == "__main__":
    main()
