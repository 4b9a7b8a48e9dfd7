#!/usr/bin/env python3
"""Concurrent writers (issue 52): total ingest_note writes/s of N `paravault mcp` servers writing
at once to one vault, against one server writing alone, beside the floor measured in the same
run (a durable 4 KiB replace: write, fsync, rename, fsync the folder, in the vault's folder).

Usage: concurrent_writers.py <paravault binary> <writes per server> [servers=4]
Makes a fresh vault (`paravault init`, the ingest rate limit lifted) in a temporary folder.
Each phase (one server alone, all at once, one alone again) writes new notes into new folders
of its own under 03_Resources, as many folders as servers, so that the folders grow alike in
every phase; each call waits for its response (raw JSON-RPC over stdio), so a server has one
write in flight."""
import json, os, subprocess, sys, tempfile, threading, time


class Server:
    def __init__(self, binary, vault):
        self.p = subprocess.Popen([binary, "--vault", vault, "mcp"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "writers", "version": "1"}})
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.p.stdin.flush()
        self.request("tools/call", {"name": "get_server_info", "arguments": {}})

    def request(self, method, params):
        self.id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params})
        self.p.stdin.write((line + "\n").encode())
        self.p.stdin.flush()
        while True:
            message = json.loads(self.p.stdout.readline())
            if message.get("id") == self.id:
                return message

    def ingest(self, name):
        r = self.request("tools/call", {"name": "ingest_note", "arguments": {
            "name": f"03_Resources/{name}", "note_type": "Resource", "title": f"Writer {name}",
            "description": "A concurrent write", "content": f"write {name}\n"}})
        assert r["result"]["structuredContent"]["status"] == "ok", r

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def floor(folder, n):
    samples = []
    for i in range(n):
        start = time.perf_counter()
        tmp = os.path.join(folder, f".floor-{i % 4}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, b"x" * 4096)
        os.fsync(fd)
        os.close(fd)
        os.rename(tmp, os.path.join(folder, f"floor-{i % 4}.bin"))
        dfd = os.open(folder, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
        samples.append(time.perf_counter() - start)
    samples.sort()
    return samples[len(samples) // 2]


def run(vault, servers, writes, tag, folders):
    """Each phase writes into `folders` new folders of its own, note i into folder i % folders
    (alone or together, the folders grow alike: a folder's catalog page grows with its notes)."""
    for f in range(folders):
        os.mkdir(os.path.join(vault, "03_Resources", f"{tag}-{f}"))
    threads = []
    start = time.perf_counter()
    for s, server in enumerate(servers):
        names = [f"{tag}-{(s * writes + i) % folders}/{tag}-{s}-{i}" for i in range(writes)]
        t = threading.Thread(target=lambda server=server, names=names: [server.ingest(n) for n in names])
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    return len(servers) * writes / (time.perf_counter() - start)


def main():
    binary, writes = sys.argv[1], int(sys.argv[2])
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as vault:
        subprocess.run([binary, "--vault", vault, "init"], check=True, stdout=subprocess.DEVNULL)
        os.makedirs(os.path.join(vault, ".paravault"), exist_ok=True)
        with open(os.path.join(vault, ".paravault", "policy.yaml"), "w") as f:
            f.write("rate_limits: {ingest_note: 1000000}\n")
        floor_dir = os.path.join(vault, "floor")
        os.mkdir(floor_dir)
        servers = [Server(binary, vault) for _ in range(count)]
        servers[0].ingest("warm-0")
        floor_before = floor(floor_dir, 50)
        alone = run(vault, servers[:1], writes * count, "alone", count)
        together = run(vault, servers, writes, "together", count)
        alone_again = run(vault, servers[:1], writes * count, "again", count)
        floor_after = floor(floor_dir, 50)
        for s in servers:
            s.close()
    print(f"floor: durable 4 KiB replace p50 {floor_before * 1e3:.2f} ms before, {floor_after * 1e3:.2f} ms after"
          f" (= {1 / floor_before:.0f} / {1 / floor_after:.0f} replaces/s)")
    print(f"1 server alone: {alone:.1f} writes/s ({writes * count} writes); again after: {alone_again:.1f} writes/s")
    print(f"{count} servers at once: {together:.1f} writes/s in total ({writes} writes each)"
          f" = {together / ((alone + alone_again) / 2):.2f}x one writer")


if __name__ == "__main__":
    main()
