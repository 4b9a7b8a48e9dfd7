# Same chunks as benches/embed.rs, embedded by sentence-transformers; prints chunks/s.
# pip install sentence-transformers
#
#   python benches/support/sentence_transformers_embed.py target/models/all-MiniLM-L6-v2
#       sentence-transformers alone: median of 10 encode calls per configuration.
#   python benches/support/sentence_transformers_embed.py target/models/all-MiniLM-L6-v2 --paired BINARY
#       alternates sentence-transformers and BINARY (the embed_iterations bench executable, as
#       `cargo bench --no-run --bench embed_iterations` prints it) at each embedding.precision
#       (f32, int8) in short runs, 7 rounds per configuration, and prints the median of the
#       per-round ratios: this machine's speed drifts too much within minutes for separate runs
#       to compare.
import os, re, statistics, subprocess, sys, time
import torch
from sentence_transformers import SentenceTransformer
WORDS = ("the vault keeps governed notes in folders for projects areas resources and archives while search "
 "generations stay immutable so every write publishes a fresh index that readers pin consistently across crashes "
 "receipts chain each change and the lint gate judges only what a write introduces never the whole vault").split()
def chunks(count, tokens):
    per = int((tokens - 2) * 0.9)
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(per)) for i in range(count)]
model = SentenceTransformer(sys.argv[1], device="cpu")
model.max_seq_length = 256
paired = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--paired" else None
for threads, tokens, iterations in [(2, 40, 12), (2, 200, 3), (1, 40, 8)]:
    torch.set_num_threads(threads)
    texts = chunks(32, tokens)
    model.encode(texts, batch_size=32, normalize_embeddings=True)
    if paired is None:
        times = []
        for _ in range(10):
            t = time.perf_counter(); model.encode(texts, batch_size=32, normalize_embeddings=True); times.append(time.perf_counter() - t)
        m = statistics.median(times)
        print(f"sentence-transformers {tokens} tokens, {threads} threads: {32/m:.1f} chunks/s (median of 10, {m*1000:.0f} ms per 32)")
        continue
    theirs, ours = [], {"f32": [], "int8": []}
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(iterations):
            model.encode(texts, batch_size=32, normalize_embeddings=True)
        theirs.append(32 * iterations / (time.perf_counter() - t))
        for precision, runs in ours.items():
            # candle's quantised products run on a pool of its own (docs/embedding.md, Threads):
            # give it the same thread count, or int8 "with 1 thread" uses every core.
            env = {**os.environ, "CANDLE_NUM_THREADS": str(threads)}
            out = subprocess.run([paired, str(tokens), str(threads), str(iterations), precision], capture_output=True, text=True, check=True, env=env).stdout
            runs.append(float(re.search(r"([\d.]+) chunks/s", out)[1]))
    print(f"{tokens} tokens, {threads} threads: sentence-transformers {statistics.median(theirs):.1f} chunks/s")
    for precision, runs in ours.items():
        ratios = [o / s for o, s in zip(runs, theirs)]
        print(f"  paravault {precision}: {statistics.median(runs):.1f} chunks/s; median ratio {statistics.median(ratios):.3f} "
              f"({', '.join(f'{r:.2f}' for r in ratios)})")
