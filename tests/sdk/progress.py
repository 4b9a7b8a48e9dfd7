#!/usr/bin/env python3
"""A long job over MCP reports progress (issue 46): `sync_vault` with fts_only=false, called
through the official MCP Python SDK with a progress callback (which sends a progressToken), must
send `notifications/progress` whose progress never decreases and whose messages name the stage;
so must `heal_frontmatter_tool` (its `reading` stage over the notes to repair).

Usage: progress.py PARAVAULT_BIN VAULT   (VAULT: a dense vault with notes to embed)
Prints PASS/FAIL per check and closes with 'N passed, N failed'; exits 1 on any failure.
"""
import asyncio
import json
import os
import sys

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

BIN, VAULT = sys.argv[1], sys.argv[2]
RESULTS = []


def rule(name, ok, detail=""):
    RESULTS.append(bool(ok))
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {str(detail)[:600]}"), flush=True)


async def main():
    env = dict(os.environ, PARAVAULT_LOG="warn")
    for key in ("PARAVAULT_VAULT_DIR", "POWER_VAULT_DIR"):
        env.pop(key, None)
    params = StdioServerParameters(command=BIN, args=["--vault", VAULT, "mcp"], env=env)
    reports = []

    async def on_progress(progress, total, message):
        reports.append((progress, total, message))

    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("sync_vault", {"fts_only": False}, progress_callback=on_progress)
            data = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
            if data is None:
                data = json.loads(result.content[0].text)
            is_error = getattr(result, "is_error", None) or getattr(result, "isError", False)
            rule("sync_vault succeeds", not is_error and data.get("published"), data)
            rule("progress notifications arrive", len(reports) >= 2, reports)
            rule("they name the embedding stage", any(m and m.startswith("embedding ") for _, _, m in reports), reports)
            progress = [p for p, _, _ in reports]
            rule("progress never decreases", all(a <= b for a, b in zip(progress, progress[1:])), reports)
            # A call without a callback gets none (nothing else was asked).
            before = len(reports)
            await session.call_tool("sync_vault", {"fts_only": False})
            rule("a call without a progressToken gets no progress", len(reports) == before, reports[before:])
            # Notes a person jotted without frontmatter: heal reads each of them.
            os.makedirs(os.path.join(VAULT, "00_Inbox"), exist_ok=True)
            for i in range(70):
                with open(os.path.join(VAULT, "00_Inbox", f"jotted-{i:02}.md"), "w") as f:
                    f.write(f"a quick thought {i}\n")
            healing = []

            async def on_heal(progress, total, message):
                healing.append((progress, total, message))

            result = await session.call_tool("heal_frontmatter_tool", {"dry_run": True}, progress_callback=on_heal)
            data = getattr(result, "structured_content", None) or getattr(result, "structuredContent", None)
            if data is None:
                data = json.loads(result.content[0].text)
            rule("heal previews the jotted notes", len(data.get("notes", [])) == 70, data)
            rule("heal reports its reading", [m for _, _, m in healing] == ["reading 0/70", "reading 64/70", "reading 70/70"], healing)
    failed = RESULTS.count(False)
    print(f"{len(RESULTS) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


asyncio.run(main())
