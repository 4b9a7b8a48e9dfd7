#!/usr/bin/env python3
"""vaultspec-core surface behaviour through MCP with the official Python SDK (`mcp`).

Usage: vaultspec_behaviour.py <paravault binary>

One check per documented rule of seed 000 (vaultspec-core's MCP contract). Each check prints
its name; the first failure raises and exits non-zero. Runs `paravault init` on a temporary
vault, then `paravault --vault DIR mcp --surface vaultspec` (and `--read-only`).
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
PLAN = "2026-05-30-search-api-plan"
CHECKS = []


def check(fn):
    CHECKS.append(fn)
    return fn


def attr(obj, snake, camel):
    """A field under its mcp 2.x (snake_case) or 1.x (camelCase) name."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


def is_error(result):
    return bool(attr(result, "is_error", "isError"))


def payload(result):
    """The structured result (find's list is under `result`, as the SDK wraps lists)."""
    data = attr(result, "structured_content", "structuredContent")
    if data is None:
        data = json.loads(result.content[0].text)
    return data


async def call(session, tool, args, expect_error=False):
    result = await session.call_tool(tool, args)
    assert is_error(result) == expect_error, f"{tool}({args}) isError={is_error(result)}: {result.content[0].text[:400]}"
    return payload(result)


def git_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def doc(feature, doc_type, **extra):
    spec = {"feature": feature, "type": doc_type, "date": "2026-05-30"}
    spec.update(extra)
    return spec


@check
async def tools_and_annotations(session, vault):
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == {"find", "create", "edit", "status", "check", "plan_progress", "plan_edit", "log", "discover", "invoke"}, sorted(tools)
    a = lambda t: t.annotations
    hints = {n: (attr(a(t), "read_only_hint", "readOnlyHint"), attr(a(t), "destructive_hint", "destructiveHint"), attr(a(t), "idempotent_hint", "idempotentHint")) for n, t in tools.items()}
    assert hints["find"] == (True, False, True) and hints["status"] == (True, False, True)
    assert hints["create"] == (False, False, False) and hints["edit"] == (False, True, False)
    assert hints["check"] == (False, False, True) and hints["plan_progress"] == (False, False, True)
    assert hints["plan_edit"] == (False, True, False) and hints["log"] == (False, False, True)
    assert hints["discover"] == (True, False, True)
    assert hints["invoke"] == (False, True, False), "invoke is destructive on every call"
    invoke_props = attr(tools["invoke"], "input_schema", "inputSchema")["properties"]
    assert set(invoke_props) == {"verb", "arguments", "positionals", "timeout"}, invoke_props
    find_props = attr(tools["find"], "input_schema", "inputSchema")["properties"]
    assert set(find_props) == {"feature", "type", "date", "text", "body", "json", "limit"}, find_props
    assert "none" in find_props["body"]["enum"] and find_props["limit"]["maximum"] == 100


@check
async def find_on_an_empty_vault_is_an_empty_list(session, vault):
    assert (await call(session, "find", {}))["result"] == []
    assert (await call(session, "find", {"feature": "nothing"}))["result"] == []


@check
async def create_empty_batch_is_a_whole_call_error(session, vault):
    await call(session, "create", {"documents": []}, expect_error=True)


@check
async def create_applies_in_order_with_a_mixed_envelope(session, vault):
    out = await call(session, "create", {"documents": [
        doc("search-api", "exec"),
        doc("search-api", "research", content="Why BM25."),
        doc("#search-api", "adr", related=["2026-05-30-search-api-research"]),
        doc("search-api", "plan", related=["[[2026-05-30-search-api-adr]]"]),
        doc("search-api", "index"),
        doc("search-api", "research", tags=["#research", "#other"], topic="x"),
    ]})
    assert out["status"] == "mixed", out
    assert out["counts"] == {"created": 3, "failed": 3}, out["counts"]
    assert out["submitted"] == 6 and out["items_omitted"] == 0
    items = {i["index"]: i for i in out["items"]}
    assert "requires a plan" in items[0]["error"]["message"] and items[0]["path"] is None
    assert items[1]["target"] == "research:search-api" and items[1]["status"] == "created"
    assert items[3]["path"].endswith("2026-05-30-search-api-plan.md")
    assert "auto-generated" in items[4]["error"]["message"]
    assert "not allowed" in items[5]["error"]["message"]
    data = open(os.path.join(vault, items[2]["path"]), "rb").read()
    assert items[2]["blob_hash"] == git_blob(data), "blob_hash is the git blob OID"
    assert b"[[2026-05-30-search-api-research]]" in data


@check
async def the_feature_index_is_regenerated_after_a_create_batch(session, vault):
    index = open(os.path.join(vault, "01_Projects/search-api/search-api.index.md")).read()
    for stem in ["2026-05-30-search-api-research", "2026-05-30-search-api-adr", PLAN]:
        assert f"[[{stem}]]" in index, index


@check
async def find_lists_features_then_searches(session, vault):
    features = (await call(session, "find", {}))["result"]
    assert features[0]["name"] == "search-api" and features[0]["doc_count"] == 3 and "weight" in features[0]
    rich = (await call(session, "find", {"json": True}))["result"][0]
    assert rich["has_plan"] is True and rich["earliest_date"] == "2026-05-30" and "status" in rich
    rows = (await call(session, "find", {"feature": "search-api"}))["result"]
    assert {r["type"] for r in rows} == {"research", "adr", "plan"}
    row = rows[0]
    assert set(row) >= {"name", "type", "feature", "date", "path", "blob_hash", "resource_uri"}
    assert row["blob_hash"] == git_blob(open(os.path.join(vault, row["path"]), "rb").read())
    assert row["resource_uri"].startswith("file://")
    assert len((await call(session, "find", {"feature": "search-api", "limit": 1}))["result"]) == 1, "limit is a global cap"
    assert (await call(session, "find", {"text": "ADR"}))["result"][0]["type"] == "adr", "text is case-insensitive over stems"
    full = (await call(session, "find", {"type": ["research"], "body": "full"}))["result"][0]
    assert "Why BM25." in full["body"]
    await call(session, "find", {"body": True}, expect_error=True)


@check
async def edit_conflicts_leave_the_file_untouched(session, vault):
    path = os.path.join(vault, "01_Projects/search-api/research/2026-05-30-search-api-research.md")
    before = open(path, "rb").read()
    out = await call(session, "edit", {"operations": [{"target": "2026-05-30-search-api-research", "operation": "set_body", "content": "gone", "expected_blob_hash": "0" * 40}]})
    assert out["status"] == "failed" and out["items"][0]["error"]["conflict"] is True
    assert open(path, "rb").read() == before


@check
async def edit_chains_within_a_batch_and_reports_section_not_found(session, vault):
    path = os.path.join(vault, "01_Projects/search-api/research/2026-05-30-search-api-research.md")
    blob = git_blob(open(path, "rb").read())
    out = await call(session, "edit", {"operations": [
        {"target": "[[2026-05-30-search-api-research]]", "operation": "replace_section", "section": "## Findings", "content": "BM25 wins.", "expected_blob_hash": blob},
        {"target": "2026-05-30-search-api-research.md", "operation": "append_section", "section": "## Findings", "content": "And is fast."},
        {"target": "2026-05-30-search-api-research", "operation": "append_section", "section": "## Missing", "content": "x"},
        {"target": "nope", "operation": "set_body", "content": "x"},
        {"target": "2026-05-30-search-api-research", "operation": "rename", "content": "x"},
    ]})
    assert out["status"] == "mixed" and out["counts"] == {"updated": 2, "failed": 3}, out
    items = {i["index"]: i for i in out["items"]}
    assert items[2]["error"]["section_not_found"] is True
    assert "Cannot resolve document" in items[3]["error"]["message"]
    data = open(path, "rb").read()
    assert items[1]["blob_hash"] == git_blob(data)
    assert b"BM25 wins.\n\nAnd is fast.\n" in data
    await call(session, "edit", {"operations": []}, expect_error=True)


@check
async def plan_edit_allocates_and_retires_ids(session, vault):
    add = lambda action: {"operation": "add", "action": action, "scope": "src/lib.rs"}
    out = await call(session, "plan_edit", {"plan": PLAN, "operations": [add("one"), add("two"), add("three")]})
    assert [i["step_id"] for i in out["items"]] == ["S01", "S02", "S03"] and out["total_steps"] == 3
    out = await call(session, "plan_edit", {"plan": "search-api", "operations": [
        {"operation": "remove", "step_id": "S03"}, add("four"), {"operation": "insert", "action": "zero", "scope": "x", "before": "S01"},
        {"operation": "edit", "step_id": "S04", "action": "four, edited"}, {"operation": "remove", "step_id": "S99"}]})
    assert out["status"] == "mixed", out
    ids = [i.get("step_id") for i in out["items"]]
    assert ids[:4] == ["S03", "S04", "S05", "S04"], ids
    out = await call(session, "plan_edit", {"plan": PLAN, "operations": [add("five")]})
    assert out["items"][0]["step_id"] == "S06", "retired S03 is never reused"
    await call(session, "plan_edit", {"plan": PLAN, "operations": []}, expect_error=True)


@check
async def plan_progress_is_explicit_and_reports_totals(session, vault):
    path = os.path.join(vault, "01_Projects/search-api/plan", PLAN + ".md")
    out = await call(session, "plan_progress", {"plan": PLAN, "steps": [
        {"step_id": "S05", "state": "checked"}, {"step_id": "S01", "state": "checked"}, {"step_id": "S03", "state": "checked"},
        {"step_id": "S02", "state": "toggle"}]})
    assert out["status"] == "mixed" and out["counts"] == {"updated": 2, "failed": 2}, out
    assert out["total_steps"] == 5 and out["steps_completed"] == 2 and out["completion_percent"] == 40.0
    assert out["next_open_step"] == "S02"
    before = open(path, "rb").read()
    out = await call(session, "plan_progress", {"plan": PLAN, "steps": [{"step_id": "S01", "state": "checked"}]})
    assert out["status"] == "ok" and out["items"][0]["status"] == "unchanged"
    assert open(path, "rb").read() == before, "no change, no write"
    await call(session, "plan_progress", {"plan": PLAN, "steps": []}, expect_error=True)
    await call(session, "plan_progress", {"plan": "no-such", "steps": [{"step_id": "S01", "state": "checked"}]}, expect_error=True)


@check
async def an_ambiguous_feature_lists_candidate_plans(session, vault):
    await call(session, "create", {"documents": [doc("search-api", "plan", date="2026-05-31", tier="L2")]})
    result = await session.call_tool("plan_progress", {"plan": "search-api", "steps": [{"step_id": "S01", "state": "checked"}]})
    assert is_error(result)
    text = result.content[0].text
    assert PLAN in text and "2026-05-31-search-api-plan" in text, text
    out = await call(session, "plan_edit", {"plan": "2026-05-31-search-api-plan", "operations": [{"operation": "add", "action": "a", "scope": "s"}]})
    assert out["status"] == "failed" and "phase" in out["items"][0]["error"]["message"], "an L2 plan without phases needs phase_id"


@check
async def the_ledger_is_created_once_and_idempotent(session, vault):
    args = {"feature": "#search-api", "plan": PLAN, "step": "S01", "rows": ["A:src/new.rs", "M:src/lib.rs", "R:old.rs->new.rs"],
            "verify": "cargo test=pass", "by": "coder"}
    first = await call(session, "log", args)
    assert first["created"] is True and first["changed"] is True and first["rows"] == 3 and first["step"] == "S01"
    assert first["path"].endswith("exec/2026-05-30-search-api/2026-05-30-search-api-ledger.md"), first
    ledger = os.path.join(vault, first["path"])
    before = open(ledger, "rb").read()
    again = await call(session, "log", args)
    assert again["changed"] is False and again["created"] is False
    assert open(ledger, "rb").read() == before


@check
async def a_malformed_log_writes_nothing(session, vault):
    ledger = os.path.join(vault, "01_Projects/search-api/exec/2026-05-30-search-api/2026-05-30-search-api-ledger.md")
    before = open(ledger, "rb").read()
    base = {"feature": "search-api", "plan": PLAN, "step": "S02"}
    await call(session, "log", dict(base, rows=["A:fine.rs", "X:bad"]), expect_error=True)
    await call(session, "log", dict(base, verify="cargo test"), expect_error=True)
    await call(session, "log", dict(base, step="S77", rows=["A:x"]), expect_error=True)
    await call(session, "log", dict(base, feature="other", rows=["A:x"]), expect_error=True)
    assert open(ledger, "rb").read() == before


@check
async def status_rolls_up_and_traces(session, vault):
    rollup = await call(session, "status", {})
    assert rollup["kind"] == "rollup" and rollup["tool_schema_version"]
    feature = rollup["features"][0]
    assert feature["name"] == "search-api" and feature["has_plan"] is True
    assert any(p["stem"] == PLAN and p["next_open_step"] == "S02" for p in rollup["plans_in_flight"])
    assert rollup["totals"]["counts_by_type"]["plan"] == 2
    trace = await call(session, "status", {"target": PLAN})
    assert trace["kind"] == "trace" and trace["trace_kind"] == "plan"
    s01 = trace["plans"][0]["steps"][1]
    assert s01["canonical_id"] == "S01" and s01["checked"] is True and s01["row_count"] == 3
    assert s01["record_stem"] == "2026-05-30-search-api-ledger" and s01["last_verify"] == "cargo test=pass"
    assert "blob_hash" not in json.dumps(trace)
    await call(session, "status", {"target": "nothing-at-all"}, expect_error=True)


@check
async def check_reports_and_fixes_only_safe_repairs(session, vault):
    clean = await call(session, "check", {})
    assert clean["status"] == "ok", clean
    assert {c["check"] for c in clean["checks"]} >= {"dangling", "frontmatter", "naming"}
    path = os.path.join(vault, "01_Projects/search-api/adr/2026-05-30-search-api-adr.md")
    text = open(path).read().replace("- '#search-api'\n", "")
    open(path, "w").write(text)
    body = text.split("---\n", 2)[2]
    found = await call(session, "check", {"feature": "search-api"})
    assert found["status"] == "failed" and found["findings"][0]["fixable"] is True, found
    fixed = await call(session, "check", {"feature": "search-api", "fix": True})
    assert fixed["fixed"] is True and fixed["status"] == "ok" and fixed["total_fixed"] >= 1, fixed
    assert open(path).read().split("---\n", 2)[2] == body, "fix never touches prose"
    again = await call(session, "check", {"feature": "search-api", "fix": True})
    assert again["total_fixed"] == 0, "fix is idempotent"


@check
async def discover_ranks_cli_verbs_and_hides_the_denylist(session, vault):
    out = await call(session, "discover", {"query": "search the vault"})
    assert out["query"] == "search the vault" and out["count"] == len(out["verbs"]) > 0
    top = out["verbs"][0]
    assert top["verb"] == "search", [v["verb"] for v in out["verbs"]]
    assert set(top) >= {"verb", "description", "score", "supports_json", "flags", "arguments"}
    assert all(set(f) == {"name", "takes_value", "help"} for f in top["flags"])
    assert [v["score"] for v in out["verbs"]] == sorted((v["score"] for v in out["verbs"]), reverse=True)
    everything = await call(session, "discover", {"query": "vault note mcp init infra serve install broker", "limit": 100})
    verbs = {v["verb"] for v in everything["verbs"]}
    assert not verbs & {"mcp", "init", "infra"}, verbs
    assert len((await call(session, "discover", {"query": "note", "limit": 1}))["verbs"]) <= 1
    await call(session, "discover", {"query": ""}, expect_error=True)


@check
async def invoke_runs_a_verb_with_json_against_the_served_vault(session, vault):
    out = await call(session, "invoke", {"verb": "doctor"})
    assert out["ok"] is True and out["exit_code"] == 0 and out["format"] == "json", out
    assert out["stdout"] is None and out["error"] is None and isinstance(out["data"], dict), out
    assert out["command"][:4] == ["paravault", "--vault", "<root>", "--json"] and out["command"][4] == "doctor", out
    assert vault not in json.dumps(out["command"]), "command never holds the vault's absolute path"
    listed = await call(session, "invoke", {"verb": "history", "arguments": {"limit": 2}})
    assert listed["ok"] is True and "--limit=2" in listed["command"], listed


@check
async def invoke_writes_for_the_agent(session, vault):
    out = await call(session, "invoke", {"verb": "ingest", "positionals": ["03_Resources/through-invoke"],
                                         "arguments": {"title": "Through invoke", "description": "A gateway write.", "content": "Body."}})
    assert out["ok"] is True, out
    with open(os.path.join(vault, "03_Resources/through-invoke.md"), encoding="utf-8") as note:
        text = note.read()
    # The spawned verb runs on the server's clock (PARAVAULT_NOW is inherited).
    assert "timestamp: 2026-06-01T09:30:00Z" in text, text
    history = await call(session, "invoke", {"verb": "history", "arguments": {"limit": 1}})
    assert '"actor": "agent"' in json.dumps(history["data"]), history


@check
async def invoke_refuses_denylisted_verbs_and_reserved_flags_before_spawning(session, vault):
    for verb in ["init", "mcp", "approve", "vaults add", "infra"]:
        err = await call(session, "invoke", {"verb": verb}, expect_error=True)
        assert err["error"]["code"] == "verb_denied", (verb, err)
    for arguments in [{"vault": "/tmp"}, {"json": True}, {"--help": True}, {"content-file": "/etc/hostname"}, {"no-such-flag": 1}]:
        err = await call(session, "invoke", {"verb": "lint", "arguments": arguments}, expect_error=True)
        assert err["error"]["code"] == "invalid_argument", (arguments, err)
    for verb in ["no-such-verb", "goals", ""]:
        err = await call(session, "invoke", {"verb": verb}, expect_error=True)
        assert err["error"]["code"] == "invalid_argument", (verb, err)
    err = await call(session, "invoke", {"verb": "goals apply-plan", "positionals": ["@/etc/hostname"]}, expect_error=True)
    assert err["error"]["code"] == "invalid_argument", err


@check
async def a_verb_that_fails_is_still_a_successful_call(session, vault):
    out = await call(session, "invoke", {"verb": "search"})
    assert out["ok"] is False and out["exit_code"] == 2 and out["data"] is None, out
    assert out["error"]["kind"] == "nonzero_exit" and out["error"]["exit_code"] == 2, out
    assert "required" in out["error"]["stderr"] and out["error"]["message"] == "verb exited with status 2", out
    typed = await call(session, "invoke", {"verb": "read-sub-index", "positionals": ["no-such-category"]})
    assert typed["ok"] is False and typed["format"] == "json" and typed["error"]["kind"] == "nonzero_exit", typed
    assert typed["data"]["error"]["code"] in typed["error"]["message"], typed


async def read_only(vault):
    params = StdioServerParameters(command=BIN, args=["--vault", vault, "mcp", "--surface", "vaultspec", "--read-only"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == {"find", "status", "check", "discover"}, sorted(tools)
            try:
                refused = await session.call_tool("invoke", {"verb": "doctor"})
            except Exception as error:  # the SDK raises the JSON-RPC "tool not found" error
                assert "not found" in str(error), error
            else:
                assert is_error(refused), "invoke is not served read-only"
            assert "fix" not in attr(tools["check"], "input_schema", "inputSchema")["properties"]
            assert attr(tools["check"].annotations, "read_only_hint", "readOnlyHint") is True
            await call(session, "check", {"fix": True}, expect_error=True)
            assert (await call(session, "check", {}))["status"] in ("ok", "failed")
    print("ok read_only_serves_status_find_and_check_without_fix")


async def main():
    with tempfile.TemporaryDirectory() as vault:
        subprocess.run([BIN, "--vault", vault, "init"], check=True, stdout=subprocess.DEVNULL)
        env = dict(os.environ, PARAVAULT_TODAY="2026-06-01", PARAVAULT_NOW="2026-06-01T09:30:00Z")
        params = StdioServerParameters(command=BIN, args=["--vault", vault, "mcp", "--surface", "vaultspec"], env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                for fn in CHECKS:
                    await fn(session, vault)
                    print("ok", fn.__name__)
        await read_only(vault)


if __name__ == "__main__":
    asyncio.run(main())
