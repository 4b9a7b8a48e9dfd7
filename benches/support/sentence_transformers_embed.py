# Same chunks as benches/embed.rs, embedded by sentence-transformers; prints chunks/s.
# pip install sentence-transformers; python benches/support/sentence_transformers_embed.py target/models/all-MiniLM-L6-v2
import sys, time, statistics, torch
from sentence_transformers import SentenceTransformer
WORDS = ("the vault keeps governed notes in folders for projects areas resources and archives while search "
 "generations stay immutable so every write publishes a fresh index that readers pin consistently across crashes "
 "receipts chain each change and the lint gate judges only what a write introduces never the whole vault").split()
def chunks(count, tokens):
    per = int((tokens - 2) * 0.9)
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(per)) for i in range(count)]
model = SentenceTransformer(sys.argv[1], device="cpu")
model.max_seq_length = 256
for threads, tokens in [(2, 40), (2, 200), (1, 40)]:
    torch.set_num_threads(threads)
    texts = chunks(32, tokens)
    model.encode(texts, batch_size=32, normalize_embeddings=True)
    times = []
    for _ in range(10):
        t = time.perf_counter(); model.encode(texts, batch_size=32, normalize_embeddings=True); times.append(time.perf_counter() - t)
    m = statistics.median(times)
    print(f"sentence-transformers {tokens} tokens, {threads} threads: {32/m:.1f} chunks/s (median of 10, {m*1000:.0f} ms per 32)")
