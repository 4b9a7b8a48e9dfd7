#!/usr/bin/env python3
"""A wide vault (40 notes per folder under 03_Resources/topicN/, as benches/mcp_server.rs's wide
layout) whose words follow Zipf's law (s = 1) over 30,000 words, instead of support::WORDS' 64 drawn
uniformly; the bench's query words sit at plausible ranks (docs/benchmarks.md, issue 52, session 70).

    python3 benches/support/zipf_vault.py ROOT 100000
    target/debug/paravault --vault ROOT sync --allow-partial && target/debug/paravault --vault ROOT index
"""
import os, sys, random, bisect, itertools
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(52)
V = 30000
def word(k):
    s = ""
    k += 26 * 26
    while k:
        k, r = divmod(k, 26); s = chr(97 + r) + s
    return s
vocab = [word(k) for k in range(V)]
placed = {"note": 40, "vault": 50, "search": 80, "index": 120, "project": 150, "memory": 200, "plan": 250,
          "policy": 300, "review": 350, "log": 400, "graph": 500, "base": 600, "archive": 700, "knowledge": 800,
          "agent": 900, "daily": 1200, "catalog": 1500, "semantic": 2500, "receipt": 3000, "retrieval": 4000, "lint": 5000}
for w, r in placed.items(): vocab[r] = w
weights = [1.0 / (k + 1) for k in range(V)]
cum = list(itertools.accumulate(weights)); total = cum[-1]
def draw(): return vocab[bisect.bisect_left(cum, rng.random() * total)]
for i in range(n):
    d = os.path.join(root, "03_Resources", f"topic{i // 40}")
    os.makedirs(d, exist_ok=True)
    title = f"{draw().capitalize()} {draw()} {draw()} {i}"
    words = 150 + rng.randrange(251); paras = 3 + rng.randrange(3); per = words // paras
    body = []
    for p in range(paras):
        if p == 1: body.append("## Details\n")
        body.append(" ".join(draw() for _ in range(per)) + ".\n")
    text = (f"---\ntype: Resource\ntitle: \"{title}\"\ndescription: \"Notes on {draw()} and {draw()} for topic {i // 40}.\"\n"
            f"timestamp: 2026-01-01T00:00:00Z\ntags: [topic-{i // 40}, {draw()}]\n---\n\n# {title}\n\n" + "\n".join(body))
    with open(os.path.join(d, f"n{i:06d}.md"), "w") as f: f.write(text)
