#!/usr/bin/env python3
"""paravault's vaultspec surface next to vaultspec-core 0.3.9's own MCP server, call for call.

Usage: vaultspec_peer_compare.py <paravault binary>

Not run by CI (it needs vaultspec-core, which CI does not install): run it by hand with a Python
that has `mcp` and `vaultspec-core==0.3.9`, e.g.

    python -m venv /tmp/vs && /tmp/vs/bin/pip install vaultspec-core==0.3.9 mcp
    /tmp/vs/bin/python tests/sdk/vaultspec_peer_compare.py target/debug/paravault

Without vaultspec-core it prints SKIPPED on stderr and exits 2 (never a silent pass). Both
servers get the same calls on fresh scratch folders under the system temp dir (outside any
repository). Each comparison prints `same` or `differs` with both values; the assertions are
the rules both must share, and each `differs` line is one of the deliberate differences listed
in docs/compatibility.md (vaultspec section) — where vaultspec-core and the seed disagree, the
seed wins.
"""
import asyncio
import hashlib
import json
import os
import subprocess
import sys
import tempfile

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

BIN = sys.argv[1]
DATE = "2026-05-30"


def have_vaultspec():
    try:
        import vaultspec_core  # noqa: F401
    except ImportError:
        return False
    return True


def payload(result):
    data = getattr(result, "structured_content", None)
    if data is None:
        data = getattr(result, "structuredContent", None)
    if data is None and result.content:
        text = result.content[0].text
        try:
            data = json.loads(text)
        except ValueError:
            data = text
    return data


def is_error(result):
    return bool(getattr(result, "is_error", getattr(result, "isError", False)))


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def report(name, ours, theirs):
    verdict = "same" if ours == theirs else "differs"
    print(f"{verdict:8} {name}\n         paravault:     {json.dumps(ours, sort_keys=True)[:300]}\n         vaultspec-core: {json.dumps(theirs, sort_keys=True)[:300]}")
    return ours == theirs


async def scenario(session, root, plan_of, verify_as_list):
    """The calls both servers get; returns what is compared."""
    seen = {}

    async def call(tool, args):
        result = await session.call_tool(tool, args)
        return is_error(result), payload(result)

    # File naming and blob_hash.
    _, out = await call("create", {"documents": [{"feature": "search-api", "type": "research", "date": DATE, "topic": "ranking"},
                                                 {"feature": "search-api", "type": "plan", "date": DATE}]})
    items = out["items"]
    seen["names"] = [os.path.basename(i["path"]) for i in items]
    seen["blob_is_git_oid"] = all(i["blob_hash"] == git_blob(open(os.path.join(root, i["path"]), "rb").read()) for i in items)
    seen["create_keys"] = sorted(out)
    seen["create_item_keys"] = sorted(items[0])
    # Batch sampling: 14 plain successes and one failure.
    docs = [{"feature": "bulk", "type": "research", "date": DATE, "topic": f"t{i}"} for i in range(14)]
    docs.insert(7, {"feature": "bulk", "type": "bogus"})
    _, out = await call("create", {"documents": docs})
    seen["sampling"] = {"counts": out["counts"], "submitted": out["submitted"], "listed": len(out["items"]), "items_omitted": out["items_omitted"]}
    seen["failed_item_keys"] = sorted(next(i for i in out["items"] if i["status"] == "failed"))
    # Plan ID allocation: add three, retire S03, add, insert before S01.
    plan = plan_of(root)
    adds = [{"operation": "add", "action": a, "scope": "src/x.rs"} for a in ["one", "two", "three"]]
    _, first = await call("plan_edit", {"plan": plan, "operations": adds})
    _, second = await call("plan_edit", {"plan": plan, "operations": [
        {"operation": "remove", "step_id": "S03"},
        {"operation": "add", "action": "four", "scope": "src/x.rs"},
        {"operation": "insert", "action": "zero", "scope": "src/x.rs", "before": "S01"}]})
    seen["ids"] = [i.get("step_id") for i in first["items"] + second["items"]]
    seen["next_open_after_edit"] = second["next_open_step"]
    seen["plan_edit_keys"] = sorted(second)
    # plan_progress: updated, unchanged, failed.
    _, out = await call("plan_progress", {"plan": "search-api", "steps": [
        {"step_id": "S01", "state": "checked"}, {"step_id": "S01", "state": "checked"}, {"step_id": "S99", "state": "checked"}]})
    seen["progress"] = {"status": out["status"], "items": [i["status"] for i in out["items"]], "steps_completed": out["steps_completed"],
                        "total_steps": out["total_steps"], "next_open_step": out["next_open_step"]}
    seen["plan_progress_keys"] = sorted(out)
    # Ledger: created once, idempotent, malformed rows write nothing.
    row = {"feature": "search-api", "plan": plan, "step": "S01", "rows": ["A:src/a.rs", "M:src/b.rs", "R:src/old.rs->src/new.rs"],
           "verify": ["cargo test=pass"] if verify_as_list else "cargo test=pass", "by": "agent-1", "notes": ["deviation: none"]}
    _, once = await call("log", row)
    assert isinstance(once, dict) and "created" in once, once
    _, twice = await call("log", row)
    bad, _ = await call("log", dict(row, step="S02", rows=["X:bad"]))
    seen["ledger"] = {"first": {k: once[k] for k in ("created", "changed", "step")}, "again": {k: twice[k] for k in ("created", "changed")},
                      "malformed_is_error": bad, "file": os.path.basename(once["path"])}
    seen["log_keys"] = sorted(once)
    # check / status shapes.
    _, out = await call("check", {})
    seen["check_keys"] = sorted(out)
    seen["check_row_keys"] = sorted(out["checks"][0])
    _, out = await call("status", {})
    seen["status_kind"] = out["kind"]
    # Gateway.
    _, out = await call("discover", {"query": "list documents"})
    seen["discover_keys"] = sorted(out)
    seen["verb_schema_keys"] = sorted(out["verbs"][0]) if out["verbs"] else []
    return seen


async def gateway(session, list_verb, failing_verb, root_flag):
    seen = {}

    async def call(tool, args):
        result = await session.call_tool(tool, args)
        return is_error(result), payload(result)

    error, out = await call("invoke", {"verb": list_verb})
    seen["invoke_ok"] = (error, out.get("ok"), out.get("format"))
    seen["invoke_keys"] = sorted(out)
    error, out = await call("invoke", {"verb": failing_verb})
    seen["nonzero"] = (error, out.get("ok"), out.get("exit_code"), out["error"]["kind"], out["error"]["message"])
    seen["denied_is_error"] = (await call("invoke", {"verb": "install" if root_flag == "target" else "init"}))[0]
    seen["reserved_is_error"] = [(await call("invoke", {"verb": list_verb, "arguments": {flag: "x"}}))[0] for flag in (root_flag, "json")]
    seen["unknown_is_error"] = (await call("invoke", {"verb": "no-such-verb"}))[0]
    return seen


def newest_plan(root):
    for folder, _, files in os.walk(root):
        for name in files:
            if name == f"{DATE}-search-api-plan.md":
                return name[:-3]
    raise AssertionError("no plan was created")


async def drive(params, root, list_verb, failing_verb, root_flag):
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            # The seed's `verify` is one string; vaultspec-core 0.3.9 takes a list of them.
            seen = await scenario(session, root, newest_plan, verify_as_list=root_flag == "target")
            seen.update(await gateway(session, list_verb, failing_verb, root_flag))
            return seen


async def main():
    if not have_vaultspec():
        print("SKIPPED: vaultspec-core is not importable by this Python (pip install vaultspec-core==0.3.9)", file=sys.stderr)
        sys.exit(2)
    with tempfile.TemporaryDirectory() as ours_root, tempfile.TemporaryDirectory() as theirs_root:
        subprocess.run([BIN, "--vault", ours_root, "init"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([sys.executable, "-m", "vaultspec_core", "--target", theirs_root, "install", "core", "--skip", "mcp", "--skip", "hooks",
                        "--skip", "precommit"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ours = await drive(StdioServerParameters(command=BIN, args=["--vault", ours_root, "mcp", "--surface", "vaultspec"],
                                                 env=dict(os.environ, PARAVAULT_TODAY=DATE)), ours_root, "doctor", "search", "vault")
        theirs = await drive(StdioServerParameters(command=sys.executable, args=["-m", "vaultspec_core.mcp_server.app"],
                                                   env=dict(os.environ, VAULTSPEC_TARGET_DIR=theirs_root), cwd=theirs_root),
                             theirs_root, "vault list", "vault plan status", "target")
    for key in ours:
        report(key, ours[key], theirs.get(key))
    # Rules both share (the seed's).
    for seen in (ours, theirs):
        assert seen["names"] == [f"{DATE}-search-api-ranking-research.md", f"{DATE}-search-api-plan.md"], seen["names"]
        assert seen["blob_is_git_oid"]
        assert seen["ids"] == ["S01", "S02", "S03", "S03", "S04", "S05"], seen["ids"]
        assert seen["next_open_after_edit"] == "S05"
        assert seen["progress"]["items"] == ["updated", "unchanged", "failed"] and seen["progress"]["status"] == "mixed"
        assert seen["progress"]["next_open_step"] == "S05" and seen["progress"]["steps_completed"] == 1
        assert seen["ledger"]["first"]["created"] and seen["ledger"]["first"]["changed"]
        assert not seen["ledger"]["again"]["changed"] and not seen["ledger"]["again"]["created"]
        assert seen["ledger"]["malformed_is_error"]
        assert seen["ledger"]["file"] == f"{DATE}-search-api-ledger.md"
        assert seen["sampling"]["counts"] == {"created": 14, "failed": 1} and seen["sampling"]["submitted"] == 15
        assert seen["sampling"]["listed"] + seen["sampling"]["items_omitted"] == 15
        assert {"verb", "description", "score", "supports_json", "flags", "arguments"} <= set(seen["verb_schema_keys"])
        assert seen["invoke_ok"] == (False, True, "json"), seen["invoke_ok"]
        assert seen["nonzero"][:4] == (False, False, 2, "nonzero_exit") and seen["nonzero"][4] == "verb exited with status 2"
        assert seen["denied_is_error"] and all(seen["reserved_is_error"]) and seen["unknown_is_error"]
    # Documented differences (docs/compatibility.md): the seed's envelope keys and null fields.
    assert {"counts", "submitted", "items_omitted"} <= set(ours["plan_edit_keys"]), "the seed's envelope on plan_edit"
    assert set(ours["invoke_keys"]) == {"verb", "ok", "exit_code", "format", "data", "stdout", "error", "command"}
    assert ours["sampling"]["listed"] == 11 and ours["sampling"]["items_omitted"] == 4
    print("ok vaultspec_peer_compare")


if __name__ == "__main__":
    asyncio.run(main())
