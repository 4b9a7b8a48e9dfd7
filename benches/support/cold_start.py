"""Cold start of `paravault mcp` on an existing vault: spawn → `initialize` answered, over raw
JSON-RPC (no SDK), next to a floor measured in the same run (spawning `/bin/true` and reading
its end of output through the same pipes).

Usage: python3 benches/support/cold_start.py <paravault binary> <vault> [spawns=15] [other binary]
Prints the p50 (and every sample) of each binary and of the floor, interleaved spawn by spawn.
"""
import json
import subprocess
import sys
import time

INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                   "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "cold-start", "version": "1"}}}) + "\n"


def server(binary, vault):
    started = time.perf_counter()
    child = subprocess.Popen([binary, "--vault", vault, "mcp"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    child.stdin.write(INIT.encode())
    child.stdin.flush()
    line = child.stdout.readline()
    elapsed = (time.perf_counter() - started) * 1000
    child.kill()
    child.wait()
    assert b'"result"' in line, line
    return elapsed


def floor():
    started = time.perf_counter()
    child = subprocess.Popen(["/bin/true"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    child.stdout.readline()
    elapsed = (time.perf_counter() - started) * 1000
    child.wait()
    return elapsed


def main():
    binary, vault = sys.argv[1], sys.argv[2]
    spawns = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    others = sys.argv[4:]
    samples = {"floor (/bin/true)": [], binary: []}
    for other in others:
        samples[other] = []
    for _ in range(spawns):
        samples["floor (/bin/true)"].append(floor())
        for name in [binary, *others]:
            samples[name].append(server(name, vault))
    for name, values in samples.items():
        values.sort()
        print(f"{name}: p50 {values[len(values) // 2]:.1f} ms  {[round(v, 1) for v in values]}")


if __name__ == "__main__":
    main()
