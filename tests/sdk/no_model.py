#!/usr/bin/env python3
"""A dense vault whose embedding model went missing, read by agents in a new process (issue 46):
the official MCP Python SDK (`mcp` on PyPI) against `paravault mcp --read-only`.

Usage: no_model.py PARAVAULT_BIN VAULT

VAULT has a dense index, a note written while the model was missing (its vectors owed), and no
model reachable. The script registers VAULT as `dense` in a temporary config folder and serves
it with the power and ctxvault surfaces: every read-only tool it calls must answer. Prints
PASS/FAIL per check and closes with 'N passed, N failed'; exits 1 on any failure.
"""
import asyncio
import json
import os
import subprocess
import sys
import tempfile

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

BIN, VAULT = sys.argv[1], sys.argv[2]
RESULTS = []


def attr(obj, snake, camel):
    """A field under mcp 2.x's snake_case name or 1.x's camelCase one."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel, None)


def rule(name, ok, detail=""):
    RESULTS.append(bool(ok))
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {str(detail)[:600]}"), flush=True)


async def call(session, tool, **args):
    result = await session.call_tool(tool, args)
    data = attr(result, "structured_content", "structuredContent")
    if data is None:
        data = json.loads(result.content[0].text)
    return bool(attr(result, "is_error", "isError")), data


async def main():
    config = tempfile.mkdtemp(prefix="no-model-config-")
    env = dict(os.environ, PARAVAULT_CONFIG_DIR=config, PARAVAULT_LOG="warn")
    for key in ("PARAVAULT_VAULT_DIR", "POWER_VAULT_DIR", "PARAVAULT_MODEL_DIR"):
        env.pop(key, None)
    added = subprocess.run([BIN, "vaults", "add", "dense", VAULT], env=env, capture_output=True, text=True, timeout=60)
    if added.returncode != 0:
        print(f"FAIL setup: vaults add: {added.stderr}")
        sys.exit(1)
    params = StdioServerParameters(command=BIN, args=["--vault", VAULT, "mcp", "--read-only", "--surface", "power,ctxvault"], env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            is_error, found = await call(session, "search_vault_tool", query="sourdough starter")
            paths = [r["source"]["path"] for r in found.get("results", [])] if not is_error else []
            rule("power search answers by keyword, saying why it did not use the model",
                 not is_error and "03_Resources/bread.md" in paths and "model_unavailable" in (found.get("fallback_reason") or ""), found)
            is_error, note = await call(session, "read_note", path="03_Resources/bread.md")
            rule("read_note answers", not is_error, note)
            is_error, history = await call(session, "read_memory_history")
            rule("read_memory_history answers", not is_error, history)
            is_error, lint = await call(session, "lint_vault")
            rule("lint_vault answers", not is_error, lint)
            is_error, docs = await call(session, "list_docs", vault_name="dense")
            rule("ctxvault list_docs answers", not is_error and "documents" in docs, docs)
            is_error, hits = await call(session, "query", vault_name="dense", query="sourdough starter")
            rule("ctxvault query answers", not is_error, hits)
            is_error, warm = await call(session, "warmup_status")
            rule("warmup_status says not_configured, and why", not is_error and warm.get("status") == "not_configured" and warm.get("reason"), warm)
    failed = RESULTS.count(False)
    print(f"{len(RESULTS) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


asyncio.run(main())
