#!/usr/bin/env python3
"""P.O.W.E.R.-contract conformance of `paravault mcp`, driven by the official MCP Python SDK.

Usage: mcp_conformance.py PARAVAULT_BIN

Creates a fresh vault, starts `paravault --vault <vault> mcp` through the SDK's stdio client
(ClientSession, initialize handshake) and calls every advertised tool the way an agent written
for P.O.W.E.R. would: the contract's parameter names, explicit nulls for the optional
parameters it does not use, integers sometimes sent as digit strings, plus calls that must fail.
Arguments of calls that must succeed validate against the tool's inputSchema (so nulls are
declared, not just tolerated). For every result it checks:
  - content[0].text parses as JSON equal to structuredContent;
  - structuredContent validates against the tool's declared outputSchema (`jsonschema`);
  - an isError result carries error.code documented in docs/errors.md;
and for every tool that _meta["power.risk"] is exactly {local_only, egress, approval}.
Exit 0 when every check passed, 1 otherwise (each failure is printed).
"""
import json
import os
import re
import subprocess
import sys
import tempfile

import anyio
import jsonschema
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (tool, arguments, expect): expect is "ok", "error" or "any". Nulls are deliberate: LLM
# clients send them for optional parameters they leave out.
CALLS = [
    ("get_server_info", {"vault_path": None, "probe_provider": None}, "ok"),
    ("lint_vault", {"vault_path": None}, "ok"),
    ("generate_index", {"vault_path": None}, "ok"),
    ("ingest_note", {"name": "03_Resources/conformance", "note_type": "Resource", "title": "Conformance",
                     "description": "A note written by the conformance run", "content": "# Conformance\n\nWritten over MCP.\n",
                     "resource": None, "tags": None, "vault_path": None}, "ok"),
    ("ingest_note", {"name": "01_Projects/plan", "note_type": "Project", "title": "Plan",
                     "description": "A project plan", "content": "# Plan\n\nSee [[conformance]].\n", "tags": ["plan"]}, "ok"),
    ("ingest_note", {"name": "03_Resources/conformance", "note_type": "Resource", "title": "Again", "description": "x",
                     "content": "y"}, "error"),
    ("ingest_note", {"name": "../outside", "note_type": "Resource", "title": "x", "description": "x", "content": "y"}, "error"),
    ("read_sub_index", {"category": "03_Resources", "vault_path": None, "page": None}, "ok"),
    ("read_sub_index", {"category": "03_Resources", "page": "9"}, "error"),
    ("ensure_sub_index", {"category": "01_Projects", "vault_path": None, "page": 1}, "ok"),
    ("get_memory_context", {"query": "conformance", "vault_path": None}, "ok"),
    ("propose_memory_change", {"path": "03_Resources/conformance.md", "content": "not a note", "vault_path": None}, "error"),
    ("validate_memory_state", {"vault_path": None}, "ok"),
    ("read_memory_history", {"vault_path": None}, "ok"),
    ("synthesize_session", {"name": "06_Daily_Logs/2026-01-01_conformance", "title": "Session", "description": "A session",
                            "content": "Did the conformance run.", "note_type": None, "tags": None,
                            "related": ["03_Resources/conformance.md"], "owner": None, "vault_path": None}, "ok"),
    ("search_vault_tool", {"query": "conformance", "max_results": 20, "search_mode": "auto", "temporal_view": "current",
                           "as_of": None, "domain": None, "vault_path": None}, "ok"),
    ("search_vault_tool", {"query": "conformance", "max_results": "5", "search_mode": "vector"}, "ok"),
    ("search_vault_tool", {"query": "conformance", "search_mode": "hybrid"}, "ok"),
    ("search_vault_tool", {"query": "conformance", "search_mode": "graph_assisted"}, "ok"),
    ("search_vault_tool", {"query": "conformance", "search_mode": "hybrid_reranked"}, "error"),
    ("search_vault_tool", {"query": "conformance", "search_mode": "semantic"}, "error"),
    ("search_vault_tool", {"query": "conformance", "domain": "nowhere"}, "error"),
    ("search_vault_tool", {"query": "conformance", "max_results": 21}, "error"),
    ("search_vault_tool", {"query": ""}, "error"),
    ("sync_vault", {"fts_only": True, "accept_dense_loss": False, "force_rebuild": False, "allow_partial": False,
                    "vault_path": None}, "ok"),
    ("suggest_related_tool", {"target_path": None, "max_results": 5, "method": "semantic", "vault_path": None}, "ok"),
    ("suggest_related_tool", {"target_path": "03_Resources/conformance.md", "method": "keyword"}, "ok"),
    ("rot_audit", {"vault_path": None, "extended": False, "allow_link_rot": False, "allow_remote_llm": True, "approved": False}, "ok"),
    ("archive_notes", {"dry_run": True, "vault_path": None, "approved": False}, "ok"),
    ("archive_notes", {"dry_run": False, "vault_path": None, "approved": False}, "error"),
    ("heal_frontmatter_tool", {"dry_run": True, "vault_path": None}, "ok"),
    ("check_markdown_tool", {"vault_path": None}, "ok"),
    ("read_note", {"path": "03_Resources/conformance.md", "offset": None, "max_bytes": None, "vault_path": None}, "ok"),
    ("handoff_work", {"action": "create", "task_id": "conf-1", "objective": "Check the contract", "owner": "ci",
                      "actor": None, "scope": None, "authority": None, "source_revision": None, "next_action": None,
                      "profile": None, "required_approval": None, "idempotency_key": None, "approved": None,
                      "blocker": None, "receipt_id": None, "changed_artifacts": None, "open_gates": None, "phase": None,
                      "vault_path": None}, "ok"),
    ("handoff_work", {"action": "resume", "task_id": "conf-1", "idempotency_key": None}, "ok"),
    ("handoff_work", {"action": "checkpoint", "task_id": "conf-1", "expected_revision": "1"}, "error"),
    ("handoff_work", {"action": "list"}, "ok"),
    ("infra_action", {"operation": "status", "target": None, "profile": None, "dry_run": None, "idempotency_key": None,
                      "run_id": None, "approval_ref": None, "task_id": None, "expected_revision": None, "vault_path": None}, "ok"),
    ("infra_action", {"operation": "replicate"}, "error"),
    ("lint_vault", {"vault_path": "/"}, "error"),
    ("lint_vault", {"surprise": 1}, "error"),
]


def field(obj, snake, camel):
    """A model field under the SDK's 2.x (snake_case) or 1.x (camelCase) name."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel)


# Tools whose contract result is not an object (P.O.W.E.R.'s boolean and list).
BARE_RESULT_TOOLS = {"validate_memory_state", "get_memory_context"}


def documented_codes():
    text = open(os.path.join(REPO, "docs", "errors.md"), encoding="utf-8").read()
    return set(re.findall(r"^\| `([a-z_]+)` \|", text, flags=re.M))


async def run(binary, vault):
    failures = []
    codes = documented_codes()
    params = StdioServerParameters(command=binary, args=["--vault", vault, "mcp"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            for name, tool in tools.items():
                meta = (tool.meta or {}) if hasattr(tool, "meta") else {}
                risk = meta.get("power.risk")
                if not isinstance(risk, dict) or sorted(risk) != ["approval", "egress", "local_only"]:
                    failures.append(f"{name}: _meta['power.risk'] is {risk!r}")
                elif risk["local_only"] is not True or risk["egress"] not in ("none", "model_download") \
                        or risk["approval"] not in ("none", "caller", "explicit"):
                    failures.append(f"{name}: power.risk values {risk!r}")
                jsonschema.Draft202012Validator.check_schema(field(tool, "output_schema", "outputSchema"))
            called = set()
            # Replays the proposal flow with the engine's own outputs (P.O.W.E.R.'s sequence).
            calls = list(CALLS)
            for index, (name, args, expect) in enumerate(calls):
                if name not in tools:
                    failures.append(f"{name}: not advertised")
                    continue
                called.add(name)
                if expect == "ok":
                    # The nulls an LLM sends are declared: a client that validates arguments
                    # against inputSchema before calling accepts them (digit strings for
                    # integers are an extra leniency of the server, converted here first).
                    schema = field(tools[name], "input_schema", "inputSchema")
                    props = schema.get("properties", {})
                    declared = {k: int(v) if isinstance(v, str) and v.isdigit() and "integer" in str(props.get(k, {}).get("type"))
                                else v for k, v in args.items()}
                    try:
                        jsonschema.validate(declared, schema)
                    except jsonschema.ValidationError as e:
                        failures.append(f"{name}#{index}: arguments do not validate against inputSchema: {e.message}")
                try:
                    result = await session.call_tool(name, args)
                except Exception as e:  # noqa: BLE001 - the SDK's own output validation raises
                    failures.append(f"{name}#{index}: the SDK refused the result: {type(e).__name__}: {e}")
                    continue
                is_error = bool(field(result, "is_error", "isError"))
                structured = field(result, "structured_content", "structuredContent")
                label = f"{name}#{index}"
                texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
                if name in BARE_RESULT_TOOLS and not is_error:
                    # A contract result that is not an object renders as the SDK renders it: a
                    # list is one text block per item, a boolean its JSON (issue 50 item 11).
                    bare = structured.get("result")
                    want = bare if isinstance(bare, list) else [json.dumps(bare)]
                    if texts != want:
                        failures.append(f"{label}: text content {texts!r} is not the SDK's rendering of {bare!r}")
                    texts = [json.dumps(structured)]
                elif len(texts) != 1:
                    failures.append(f"{label}: {len(texts)} text blocks")
                    continue
                else:
                    try:
                        parsed = json.loads(texts[0])
                    except ValueError as e:
                        failures.append(f"{label}: text block is not JSON ({e}): {texts[0][:120]}")
                        continue
                    if parsed != structured:
                        failures.append(f"{label}: text block differs from structuredContent")
                try:
                    jsonschema.validate(structured, field(tools[name], "output_schema", "outputSchema"))
                except jsonschema.ValidationError as e:
                    failures.append(f"{label}: structuredContent does not validate: {e.message}")
                if is_error:
                    code = (structured or {}).get("error", {}).get("code")
                    if code not in codes:
                        failures.append(f"{label}: error code {code!r} is not documented in docs/errors.md")
                if expect == "ok" and is_error:
                    failures.append(f"{label}: expected success, got {texts[0][:300]}")
                if expect == "error" and not is_error:
                    failures.append(f"{label}: expected an error, got success")
                if name == "read_note" and not is_error:
                    note = structured
                    edited = note["content"].replace("Written over MCP.", "Edited over MCP.")
                    proposal = await session.call_tool("propose_memory_change", {
                        "path": note["path"], "content": edited, "vault_path": None})
                    applied = await session.call_tool("apply_memory_change", {
                        "proposal": field(proposal, "structured_content", "structuredContent"), "approved": True, "vault_path": None})
                    for step, res in (("propose_memory_change", proposal), ("apply_memory_change", applied)):
                        called.add(step)
                        content = field(res, "structured_content", "structuredContent")
                        if field(res, "is_error", "isError") or json.loads(res.content[0].text) != content:
                            failures.append(f"{step}: {res.content[0].text[:300]}")
                        jsonschema.validate(content, field(tools[step], "output_schema", "outputSchema"))
                    # The proposal's approval state, read back by the agent (null vault_path = absent).
                    proposal_id = field(proposal, "structured_content", "structuredContent").get("proposal_id")
                    status = await session.call_tool("get_proposal_status", {"proposal_id": proposal_id, "vault_path": None})
                    called.add("get_proposal_status")
                    content = field(status, "structured_content", "structuredContent")
                    if field(status, "is_error", "isError") or json.loads(status.content[0].text) != content:
                        failures.append(f"get_proposal_status: {status.content[0].text[:300]}")
                    elif content.get("state") != "applied":
                        failures.append(f"get_proposal_status: state {content.get('state')!r} after the apply, not 'applied'")
                    jsonschema.validate(content, field(tools["get_proposal_status"], "output_schema", "outputSchema"))
            for name in sorted(set(tools) - called):
                failures.append(f"{name}: advertised but never called")
            print(f"conformance: {len(tools)} tools, {len(calls) + 3} calls")
    return failures


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    binary = os.path.realpath(sys.argv[1])
    with tempfile.TemporaryDirectory() as work:
        vault = os.path.join(work, "vault")
        subprocess.run([binary, "--vault", vault, "init"], check=True, stdout=subprocess.DEVNULL)
        failures = anyio.run(run, binary, vault)
    for failure in failures:
        print("FAIL", failure)
    if failures:
        sys.exit(1)
    print("mcp conformance: ok")


if __name__ == "__main__":
    main()
