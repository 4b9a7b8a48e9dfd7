#!/usr/bin/env python3
"""stepstone's MCP contract against `paravault mcp --surface stepstone`, through the official
MCP Python SDK (`mcp` on PyPI): one test per documented rule of the seed
(../shared/seeds/001_*.txt) and of docs/goals.md.

Usage: stepstone_behaviour.py PARAVAULT_BIN

Each test gets a fresh vault (`paravault --vault V init`) and its own server, talks to it with
ClientSession (initialize handshake), and checks results in their wire form (camelCase JSON).
Exit 0 when every test passed, 1 otherwise (each failure is printed with its reason).
"""
import json
import os
import subprocess
import sys
import tempfile
import traceback
import urllib.parse

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

BIN = sys.argv[1] if len(sys.argv) > 1 else "paravault"
WORKLIST = os.path.join("01_Projects", "Project Goals.md")
NINE = ["add", "apply-plan", "update", "move", "set_active", "complete", "reopen", "archive", "delete"]
CONFIRMED = ["complete", "reopen", "archive", "delete"]


def wire(obj):
    return obj.model_dump(by_alias=True, mode="json", exclude_none=True)


class Check(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise Check(message)


class Server:
    """One vault and one session on it."""

    def __init__(self, session, vault):
        self.session = session
        self.vault = vault

    async def call(self, tool, args):
        result = wire(await self.session.call_tool(tool, args))
        structured = result.get("structuredContent")
        text = result["content"][0]["text"]
        expect(json.loads(text) == structured, f"{tool}: the text block is not the JSON of structuredContent")
        envelope = structured
        failed = result.get("isError", False)
        expect(failed == (not envelope["ok"]), f"{tool}: isError {failed} but ok {envelope['ok']}")
        expect(envelope["scope"] == "project" and envelope["action"] == tool, f"{tool}: scope/action {envelope}")
        return envelope

    async def ok(self, tool, args):
        envelope = await self.call(tool, args)
        expect(envelope["ok"], f"{tool} {args} failed: {envelope.get('error')}")
        return envelope

    async def fails(self, tool, args, code):
        envelope = await self.call(tool, args)
        expect(not envelope["ok"], f"{tool} {args} succeeded, expected {code}")
        expect(envelope["error"]["code"] == code, f"{tool} {args}: code {envelope['error']['code']}, expected {code}: {envelope['error']}")
        expect(isinstance(envelope["error"]["retryable"], bool) and envelope["error"]["message"], f"{tool}: error shape {envelope['error']}")
        return envelope

    async def read(self, uri):
        result = wire(await self.session.read_resource(uri))
        contents = result["contents"]
        expect(len(contents) == 1, f"{uri}: {len(contents)} contents")
        expect(contents[0]["mimeType"] == "application/json", f"{uri}: MIME {contents[0].get('mimeType')}")
        envelope = json.loads(contents[0]["text"])
        expect(envelope["scope"] == "project", f"{uri}: scope {envelope}")
        return envelope

    def worklist_bytes(self):
        path = os.path.join(self.vault, WORKLIST)
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            return f.read()

    async def add(self, title, **fields):
        return (await self.ok("add", {"title": title, **fields}))["result"]["goal"]


async def with_server(test, surface="stepstone"):
    with tempfile.TemporaryDirectory() as tmp:
        vault = os.path.join(tmp, "vault")
        subprocess.run([BIN, "--vault", vault, "init"], check=True, stdout=subprocess.DEVNULL)
        # A test may bring the vault policy it runs under (read when the server opens the vault).
        if getattr(test, "policy", None):
            with open(os.path.join(vault, ".paravault", "policy.yaml"), "w", encoding="utf-8") as f:
                f.write(test.policy)
        env = dict(os.environ, PARAVAULT_LOG="warn")
        params = StdioServerParameters(command=BIN, args=["--vault", vault, "mcp", "--surface", surface], env=env)
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                init = wire(await session.initialize())
                server = Server(session, vault)
                server.init = init
                await test(server)


# ---- the tests: one per documented rule ----


async def test_nine_tools_with_the_seed_names_and_camel_case_fields(s):
    tools = {t.name: wire(t) for t in (await s.session.list_tools()).tools}
    expect(sorted(tools) == sorted(NINE), f"tools: {sorted(tools)}")
    props = lambda name: set(tools[name]["inputSchema"]["properties"])
    expect({"title", "description", "group", "dependsOn", "links"} <= props("add"), f"add: {props('add')}")
    expect(tools["add"]["inputSchema"].get("required") == ["title"], "add requires title only")
    expect({"id", "title", "description", "appendDescription", "group", "dependsOn", "links", "expectedUpdatedAt"} <= props("update"), "update fields")
    expect({"id", "direction", "beforeId", "afterId"} <= props("move"), "move fields")
    expect({"plan", "dryRun"} <= props("apply-plan"), "apply-plan fields")
    expect({"id", "expectedUpdatedAt"} <= props("set_active"), "set_active fields")


async def test_confirmation_is_an_optional_boolean_with_confirm_required_meta(s):
    tools = {t.name: wire(t) for t in (await s.session.list_tools()).tools}
    for name in CONFIRMED:
        schema = tools[name]["inputSchema"]
        expect("confirm" not in schema.get("required", []), f"{name}: confirm must not be required by the schema")
        kinds = schema["properties"]["confirm"].get("type")
        expect(kinds == "boolean" or (isinstance(kinds, list) and "boolean" in kinds), f"{name}: confirm type {kinds}")
        expect(tools[name].get("_meta", {}).get("confirmRequired") is True, f"{name}: _meta {tools[name].get('_meta')}")
    for name in set(NINE) - set(CONFIRMED):
        expect(tools[name].get("_meta", {}).get("confirmRequired") is not True, f"{name} must not require confirmation")


async def test_capture_workflow_is_rendered_into_description_meta_and_schema(s):
    tools = {t.name: wire(t) for t in (await s.session.list_tools()).tools}
    plan = tools["apply-plan"]
    workflow = plan["_meta"]["captureWorkflow"]
    expect(len(workflow) > 100, "captureWorkflow is text")
    expect(workflow in plan["description"], "the workflow is in the description")
    schema = plan["inputSchema"]["properties"]
    expect(workflow in schema["plan"]["description"], "the workflow is in plan's description")
    expect(workflow in schema["dryRun"]["description"], "the workflow is in dryRun's description")
    entries = [branch for branch in schema["plan"]["anyOf"] if branch.get("type") == "array"][0]
    expect(workflow in entries["items"]["description"], "the workflow is in the plan entry's description")


async def test_six_resources_with_json_mime_and_the_resources_capability(s):
    expect(s.init["capabilities"].get("resources") is not None, f"capabilities: {s.init['capabilities']}")
    fixed = {r.uri if isinstance(r.uri, str) else str(r.uri): wire(r) for r in (await s.session.list_resources()).resources}
    expect(sorted(fixed) == sorted(f"stepstone://worklist/{n}" for n in ["list", "next", "ready", "waves"]), f"resources {sorted(fixed)}")
    templates = [wire(t) for t in (await s.session.list_resource_templates()).resource_templates]
    uris = sorted(t["uriTemplate"] for t in templates)
    expect(uris == ["stepstone://worklist/find/{query}", "stepstone://worklist/show/{id}"], f"templates {uris}")
    for item in list(fixed.values()) + templates:
        expect(item.get("mimeType") == "application/json", f"MIME of {item}")


async def test_empty_next_and_ready_are_successes_shaped_like_the_seed(s):
    ready = await s.read("stepstone://worklist/ready")
    expect(ready == {"ok": True, "scope": "project", "action": "ready", "result": {"scope": "project", "action": "ready", "goals": []},
                     "meta": {"changed": False, "semanticNoOp": False, "changedFields": [], "revisions": {"project": "0"}}}, f"ready: {ready}")
    nxt = await s.read("stepstone://worklist/next")
    expect(nxt["ok"] and "goal" not in nxt["result"], f"next: {nxt}")


async def test_add_returns_the_envelope_with_sorted_pointers_and_a_receipt(s):
    envelope = await s.ok("add", {"title": "Write the parser", "description": "Parse it.", "group": "engine",
                                  "links": ["https://example.com/spec"], "dependsOn": None})
    goal = envelope["result"]["goal"]
    meta = envelope["meta"]
    expect(meta["changed"] and not meta["semanticNoOp"], f"meta {meta}")
    expect(meta["changedFields"] == [f"/goals/{goal['id']}"], f"changedFields {meta['changedFields']}")
    expect(meta["revisions"]["project"] == "1", f"revisions {meta['revisions']}")
    expect(goal["status"] == "open" and goal["title"] == "Write the parser" and goal["group"] == "engine", f"goal {goal}")
    second = await s.ok("update", {"id": goal["id"], "title": "Write the worklist parser", "group": "core"})
    fields = second["meta"]["changedFields"]
    expect(fields == sorted(fields) == [f"/goals/{goal['id']}/group", f"/goals/{goal['id']}/title"], f"changedFields {fields}")
    with open(os.path.join(s.vault, ".paravault", "receipts.jsonl")) as f:
        operations = [json.loads(line).get("operation") for line in f if line.strip()]
    expect(operations.count("goals.add") == 1 and operations.count("goals.update") == 1, f"receipts {operations}")


async def test_an_id_or_unique_prefix_resolves_and_an_ambiguous_prefix_lists_candidates(s):
    goals = [await s.add(f"Goal {i}") for i in range(7)]
    by_first = {}
    for g in goals:
        by_first.setdefault(g["id"][0], []).append(g["id"])
    shared = next(ids for ids in by_first.values() if len(ids) > 1)
    target = goals[0]["id"]
    shown = await s.read(f"stepstone://worklist/show/{urllib.parse.quote(target[:6])}")
    expect(shown["ok"] and shown["result"]["goal"]["id"] == target, f"show by prefix: {shown}")
    ambiguous = await s.read(f"stepstone://worklist/show/{shared[0][0]}")
    expect(not ambiguous["ok"] and ambiguous["error"]["code"] == "AMBIGUOUS_ID", f"ambiguous: {ambiguous}")
    candidates = sorted(c["id"] for c in ambiguous["error"]["details"]["candidates"])
    expect(candidates == sorted(shared), f"candidates {candidates} vs {shared}")
    await s.fails("update", {"id": shared[0][0], "title": "x"}, "AMBIGUOUS_ID")
    await s.fails("update", {"id": "zzzz", "title": "x"}, "NOT_FOUND")
    updated = await s.ok("update", {"id": target[:5], "title": "Renamed by prefix"})
    expect(updated["result"]["goal"]["id"] == target, "update by prefix")


async def test_lifecycle_tools_refuse_anything_but_literal_true_before_any_write(s):
    goal = await s.add("Ship it")
    before = s.worklist_bytes()
    for tool in CONFIRMED:
        for confirm in [None, False, "true", 1]:
            args = {"id": goal["id"], "expectedUpdatedAt": goal["updatedAt"]}
            if confirm is not None:
                args["confirm"] = confirm
            envelope = await s.call(tool, args)
            expect(not envelope["ok"], f"{tool} confirm={confirm!r} succeeded")
            error = envelope["error"]
            expect(error["code"] == "APPROVAL_REQUIRED", f"{tool} confirm={confirm!r}: {error}")
            expect(error["details"]["confirmation"] == "confirm=true", f"details {error['details']}")
            expect(error["details"]["resolution"] == "request-explicit-user-confirmation", f"details {error['details']}")
            expect(not envelope["meta"]["changed"], "a refused call changes nothing")
    expect(s.worklist_bytes() == before, "a refused lifecycle call wrote the worklist")
    done = await s.ok("complete", {"id": goal["id"], "confirm": True})
    expect(done["result"]["goal"]["status"] == "done", f"complete: {done}")


async def test_a_stale_expected_updated_at_is_a_conflict_and_a_fresh_one_applies(s):
    goal = await s.add("Contested")
    changed = await s.ok("update", {"id": goal["id"], "title": "Changed elsewhere", "expectedUpdatedAt": goal["updatedAt"]})
    before = s.worklist_bytes()
    conflict = await s.fails("update", {"id": goal["id"], "title": "Mine", "expectedUpdatedAt": goal["updatedAt"]}, "CONFLICT")
    expect(conflict["error"]["retryable"] is True, "a conflict is retryable after a re-read")
    expect(conflict["error"]["details"]["actualUpdatedAt"] == changed["result"]["goal"]["updatedAt"], f"details {conflict['error']}")
    await s.fails("set_active", {"id": goal["id"], "expectedUpdatedAt": goal["updatedAt"]}, "CONFLICT")
    await s.fails("complete", {"id": goal["id"], "confirm": True, "expectedUpdatedAt": goal["updatedAt"]}, "CONFLICT")
    expect(s.worklist_bytes() == before, "a conflict wrote the worklist")
    fresh = changed["result"]["goal"]["updatedAt"]
    await s.ok("update", {"id": goal["id"], "title": "Mine", "expectedUpdatedAt": fresh})


async def test_revisions_advance_on_every_change(s):
    goal = await s.add("Tick")
    stamps, revisions = [goal["updatedAt"]], []
    for i in range(4):
        envelope = await s.ok("update", {"id": goal["id"], "title": f"Tick {i}"})
        stamps.append(envelope["result"]["goal"]["updatedAt"])
        revisions.append(int(envelope["meta"]["revisions"]["project"]))
    expect(stamps == sorted(stamps) and len(set(stamps)) == len(stamps), f"updatedAt did not advance: {stamps}")
    expect(revisions == list(range(2, 6)), f"project revisions {revisions}")


async def test_depends_on_and_links_are_replaced_as_whole_sets(s):
    a, b, c = await s.add("A"), await s.add("B"), await s.add("C")
    goal = await s.add("D", dependsOn=[a["id"], b["id"][:6]], links=["https://a.example/x", "http://b.example/y"])
    expect(goal["dependsOn"] == [a["id"], b["id"]], f"dependsOn {goal['dependsOn']}")
    replaced = (await s.ok("update", {"id": goal["id"], "dependsOn": [c["id"]], "links": ["https://c.example/"]}))["result"]["goal"]
    expect(replaced["dependsOn"] == [c["id"]] and replaced["links"] == ["https://c.example/"], f"replaced {replaced}")
    untouched = (await s.ok("update", {"id": goal["id"], "title": "D2"}))["result"]["goal"]
    expect(untouched["dependsOn"] == [c["id"]] and untouched["links"] == ["https://c.example/"], "omitted sets are kept")
    cleared = (await s.ok("update", {"id": goal["id"], "dependsOn": [], "links": []}))["result"]["goal"]
    expect(cleared["dependsOn"] == [] and cleared["links"] == [], f"cleared {cleared}")


async def test_links_must_be_absolute_http_or_https_urls(s):
    goal = await s.add("Linked")
    for bad in ["ftp://example.com/f", "/relative/path", "example.com", "https://", "javascript:alert(1)", "https://exa mple.com"]:
        await s.fails("update", {"id": goal["id"], "links": [bad]}, "INVALID_INPUT")
        await s.fails("add", {"title": "x", "links": [bad]}, "INVALID_INPUT")
    await s.fails("update", {"id": goal["id"], "dependsOn": [goal["id"]]}, "INVALID_INPUT")


async def test_move_by_direction_or_before_after_and_exactly_one(s):
    a, b, c = await s.add("A"), await s.add("B"), await s.add("C")
    order = lambda listing: [g["title"] for g in listing["result"]["goals"]]
    await s.ok("move", {"id": c["id"], "direction": "up"})
    expect(order(await s.read("stepstone://worklist/list")) == ["A", "C", "B"], "up")
    await s.ok("move", {"id": a["id"], "afterId": b["id"]})
    expect(order(await s.read("stepstone://worklist/list")) == ["C", "B", "A"], "afterId")
    await s.ok("move", {"id": a["id"], "beforeId": c["id"]})
    expect(order(await s.read("stepstone://worklist/list")) == ["A", "C", "B"], "beforeId")
    top = await s.ok("move", {"id": a["id"], "direction": "up"})
    expect(not top["meta"]["changed"] and top["meta"]["semanticNoOp"], f"moving the first goal up is a no-op: {top['meta']}")
    await s.fails("move", {"id": a["id"]}, "INVALID_INPUT")
    await s.fails("move", {"id": a["id"], "direction": "down", "beforeId": b["id"]}, "INVALID_INPUT")
    await s.fails("move", {"id": a["id"], "beforeId": a["id"]}, "INVALID_INPUT")


async def test_one_active_goal_is_claimed_and_leaves_the_ready_frontier(s):
    a, b = await s.add("A"), await s.add("B")
    await s.ok("set_active", {"id": a["id"]})
    await s.ok("set_active", {"id": b["id"]})
    listing = (await s.read("stepstone://worklist/list"))["result"]["goals"]
    expect([g["active"] for g in listing] == [False, True], f"active flags {[g['active'] for g in listing]}")
    ready = [g["id"] for g in (await s.read("stepstone://worklist/ready"))["result"]["goals"]]
    expect(ready == [a["id"]], f"ready {ready}")
    nxt = (await s.read("stepstone://worklist/next"))["result"]["goal"]
    expect(nxt["id"] == a["id"], "next skips the claimed goal")
    again = await s.ok("set_active", {"id": b["id"]})
    expect(again["meta"] == {**again["meta"], "changed": False, "semanticNoOp": True, "changedFields": []}, f"no-op meta {again['meta']}")
    await s.ok("complete", {"id": a["id"], "confirm": True})
    await s.fails("set_active", {"id": a["id"]}, "INVALID_STATE")


async def test_ready_next_and_blocking_follow_dependencies(s):
    a = await s.add("A")
    b = await s.add("B", dependsOn=[a["id"]])
    shown = (await s.read(f"stepstone://worklist/show/{b['id']}"))["result"]["goal"]
    expect(shown["blocked"] is True, "B is blocked by A")
    expect((await s.read(f"stepstone://worklist/show/{a['id']}"))["result"]["goal"]["blocks"] == [b["id"]], "A blocks B")
    ready = [g["id"] for g in (await s.read("stepstone://worklist/ready"))["result"]["goals"]]
    expect(ready == [a["id"]], f"ready {ready}")
    await s.ok("complete", {"id": a["id"], "confirm": True})
    expect((await s.read("stepstone://worklist/next"))["result"]["goal"]["id"] == b["id"], "B is next once A is done")
    expect((await s.read(f"stepstone://worklist/show/{a['id']}"))["result"]["goal"]["blocks"] == [], "a done goal blocks nothing")


async def test_waves_group_by_earliest_wave_with_a_cycle_and_a_missing_dependency_unreachable(s):
    a = await s.add("A")
    b = await s.add("B", dependsOn=[a["id"]])
    c = await s.add("C", dependsOn=[a["id"], b["id"]])
    x = await s.add("X")
    y = await s.add("Y", dependsOn=[x["id"]])
    await s.ok("update", {"id": x["id"], "dependsOn": [y["id"]]})
    gone = await s.add("Gone")
    orphan = await s.add("Orphan", dependsOn=[gone["id"]])
    await s.ok("delete", {"id": gone["id"], "confirm": True})
    waves = (await s.read("stepstone://worklist/waves"))["result"]
    layers = [[g["title"] for g in w["goals"]] for w in waves["waves"]]
    expect(layers == [["A"], ["B"], ["C"]], f"waves {layers}")
    expect([w["wave"] for w in waves["waves"]] == [0, 1, 2], "wave numbers")
    unreachable = {g["title"]: [r["reason"] for r in g["unreachableBecause"]] for g in waves["unreachable"]}
    expect(unreachable == {"X": ["cycle"], "Y": ["cycle"], "Orphan": ["missing-dependency"]}, f"unreachable {unreachable}")
    first = waves["waves"][0]["goals"][0]
    expect(first["blocked"] is False and first["blocks"] == [b["id"], c["id"]], f"wave goal {first}")
    expect(orphan["id"] in [g["id"] for g in waves["unreachable"]], "orphan listed")


async def test_apply_plan_dry_run_only_validates_and_apply_adds_atomically(s):
    existing = await s.add("Existing")
    plan = [
        {"ref": "design", "title": "Design"},
        {"ref": "build", "title": "Build", "dependsOn": ["design", existing["id"][:6]], "links": ["https://example.com/b"]},
        {"title": "Ship", "dependsOn": ["build"], "group": "release"},
    ]
    before = s.worklist_bytes()
    dry = await s.ok("apply-plan", {"plan": plan, "dryRun": True})
    expect(dry["result"]["dryRun"] is True and not dry["meta"]["changed"], f"dry run {dry}")
    expect(s.worklist_bytes() == before, "a dry run wrote the worklist")
    bad = plan + [{"title": "Bad link", "links": ["ftp://nope"]}, {"title": ""}, {"title": "Unknown dep", "dependsOn": ["nowhere"]}]
    refused = await s.fails("apply-plan", {"plan": bad}, "INVALID_INPUT")
    indexes = sorted({p["index"] for p in refused["error"]["details"]["problems"]})
    expect(indexes == [3, 4, 5], f"every bad entry is named: {refused['error']['details']}")
    expect(s.worklist_bytes() == before, "a refused plan added something")
    await s.fails("apply-plan", {"plan": bad, "dryRun": True}, "INVALID_INPUT")
    applied = await s.ok("apply-plan", {"plan": plan})
    goals = applied["result"]["goals"]
    expect([g["title"] for g in goals] == ["Design", "Build", "Ship"], f"applied {goals}")
    expect(goals[1]["dependsOn"] == [goals[0]["id"], existing["id"]] and goals[2]["dependsOn"] == [goals[1]["id"]], "refs resolved")
    expect(applied["meta"]["revisions"]["project"] == "2", "one transaction for the whole plan")
    expect(applied["result"]["refs"] == {"design": goals[0]["id"], "build": goals[1]["id"]}, f"refs {applied['result']['refs']}")


async def test_find_and_show_templates_are_uri_decoded(s):
    await s.add("Paint the fence", description="Two coats, white.")
    await s.add("Fix the gate")
    found = await s.read("stepstone://worklist/find/" + urllib.parse.quote("two coats"))
    expect([g["title"] for g in found["result"]["goals"]] == ["Paint the fence"], f"find {found}")
    found = await s.read("stepstone://worklist/find/" + urllib.parse.quote("the "))
    expect(len(found["result"]["goals"]) == 2, "find over titles")


async def test_reads_never_mutate(s):
    goal = await s.add("Read me")
    before = s.worklist_bytes()
    receipts = os.path.getsize(os.path.join(s.vault, ".paravault", "receipts.jsonl"))
    for uri in ["list", "next", "ready", "waves", f"show/{goal['id']}", "find/read", "show/nothing"]:
        await s.read(f"stepstone://worklist/{uri}")
    expect(s.worklist_bytes() == before, "a read changed the worklist")
    expect(os.path.getsize(os.path.join(s.vault, ".paravault", "receipts.jsonl")) == receipts, "a read wrote a receipt")


async def test_lifecycle_complete_reopen_archive_delete(s):
    goal = await s.add("Cycle")
    await s.ok("set_active", {"id": goal["id"]})
    done = (await s.ok("complete", {"id": goal["id"], "confirm": True}))["result"]["goal"]
    expect(done["status"] == "done" and not done["active"], "completing clears active")
    reopened = (await s.ok("reopen", {"id": goal["id"], "confirm": True, "expectedUpdatedAt": done["updatedAt"]}))["result"]["goal"]
    expect(reopened["status"] == "open", "reopened")
    archived = (await s.ok("archive", {"id": goal["id"], "confirm": True}))["result"]["goal"]
    expect(archived["status"] == "archived", "archived")
    await s.fails("complete", {"id": goal["id"], "confirm": True}, "INVALID_STATE")
    deleted = await s.ok("delete", {"id": goal["id"], "confirm": True})
    expect(deleted["result"]["deleted"] is True and deleted["meta"]["changedFields"] == [f"/goals/{goal['id']}"], f"delete {deleted}")
    await s.fails("update", {"id": goal["id"], "title": "x"}, "NOT_FOUND")


async def test_the_worklist_is_a_readable_note_and_a_hand_edit_is_read_never_overwritten(s):
    goal = await s.add("Original title", description="Line one.\nLine two.")
    path = os.path.join(s.vault, WORKLIST)
    text = open(path, encoding="utf-8").read()
    expect("goals_schema: 1" in text and "## Original title" in text and "> Line two." in text, f"format:\n{text}")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace("## Original title", "## Edited by hand"))
    shown = (await s.read(f"stepstone://worklist/show/{goal['id']}"))["result"]["goal"]
    expect(shown["title"] == "Edited by hand", "a hand edit that parses is the new state")
    await s.ok("update", {"id": goal["id"], "group": "kept"})
    after = open(path, encoding="utf-8").read()
    expect("## Edited by hand" in after and "- group: kept" in after, "the mutation kept the hand edit")
    broken = after.replace("- status: open", "- status: someday")
    with open(path, "w", encoding="utf-8") as f:
        f.write(broken)
    failure = await s.fails("update", {"id": goal["id"], "title": "Overwrite?"}, "WORKLIST_INVALID")
    findings = failure["error"]["details"]["findings"]
    expect(findings and findings[0]["line"] > 1 and "someday" in findings[0]["message"], f"findings {findings}")
    expect(open(path, encoding="utf-8").read() == broken, "an unparseable worklist was overwritten")
    listing = await s.read("stepstone://worklist/list")
    expect(not listing["ok"] and listing["error"]["code"] == "WORKLIST_INVALID", "reads report the broken note")


def person(vault, config, args, secret):
    """Runs the CLI as a person, the approver secret on standard input (the non-TTY channel)."""
    env = dict(os.environ, PARAVAULT_CONFIG_DIR=config, PARAVAULT_LOG="warn")
    return subprocess.run([BIN, "--vault", vault, *args], input=secret + "\n", env=env, capture_output=True, text=True)


async def test_under_a_human_rule_confirm_true_waits_for_a_persons_approval(s):
    secret = "correct horse battery staple"
    config = os.path.join(os.path.dirname(s.vault), "config")
    added = person(s.vault, config, ["approver", "add", "alice"], secret)
    expect(added.returncode == 0, f"approver add: {added.stderr}")
    goal = await s.add("Needs a person")
    other = await s.add("Also governed")
    before = s.worklist_bytes()
    # Confirmation still comes first; then the approval policy applies on top of confirm=true.
    await s.fails("complete", {"id": goal["id"]}, "APPROVAL_REQUIRED")
    waiting = await s.fails("complete", {"id": goal["id"], "confirm": True}, "HUMAN_APPROVAL_REQUIRED")
    details = waiting["error"]["details"]
    proposal = details["proposalId"]
    expect(len(proposal) == 64 and details["engineCode"] == "human_approval_required", f"details {details}")
    expect(waiting["error"]["retryable"] is False, "retrying alone never gets past a person")
    expect(s.worklist_bytes() == before, "nothing is written before a person approves")
    again = await s.fails("complete", {"id": goal["id"][:6], "confirm": True}, "HUMAN_APPROVAL_REQUIRED")
    expect(again["error"]["details"]["proposalId"] == proposal, "the identical call names the same proposal")
    elsewhere = await s.fails("complete", {"id": other["id"], "confirm": True}, "HUMAN_APPROVAL_REQUIRED")
    expect(elsewhere["error"]["details"]["proposalId"] != proposal, "another goal is another proposal")
    approved = person(s.vault, config, ["approve", proposal, "--approver", "alice"], secret)
    expect(approved.returncode == 0, f"approve: {approved.stdout} {approved.stderr}")
    expect("+- status: done" in approved.stderr, f"the person saw the diff before deciding: {approved.stderr}")
    done = await s.ok("complete", {"id": goal["id"], "confirm": True})
    expect(done["result"]["goal"]["status"] == "done", f"applied {done}")
    approval = done["meta"]["approval"]
    expect(approval["approver"] == "alice" and approval["channel"] == "cli", f"the approval is named: {approval}")
    # The other goal's proposal was made from an older worklist: the next call proposes anew.
    fresh = await s.fails("complete", {"id": other["id"], "confirm": True}, "HUMAN_APPROVAL_REQUIRED")
    rejected = person(s.vault, config, ["reject", fresh["error"]["details"]["proposalId"], "--approver", "alice", "--comment", "not yet"], secret)
    expect(rejected.returncode == 0, f"reject: {rejected.stderr}")
    refused = await s.fails("complete", {"id": other["id"], "confirm": True}, "PROPOSAL_REJECTED")
    expect(refused["error"]["details"]["approver"] == "alice", f"rejection {refused['error']}")
    # Tools the rule does not name keep the caller's confirmation.
    await s.ok("archive", {"id": other["id"], "confirm": True})


test_under_a_human_rule_confirm_true_waits_for_a_persons_approval.policy = (
    "approvals:\n  rules:\n    - { operations: [goals_complete], paths: [\"01_Projects/**\"], approver: human }\n"
)


async def test_unknown_resources_are_protocol_errors(s):
    for uri in ["stepstone://worklist/nothing", "stepstone://other/list", "stepstone://worklist/show/"]:
        try:
            await s.session.read_resource(uri)
        except Exception:  # noqa: BLE001 - the SDK raises McpError for a JSON-RPC error
            continue
        raise Check(f"{uri} was answered")


async def test_default_surface_does_not_advertise_stepstone(s):
    names = [t.name for t in (await s.session.list_tools()).tools]
    expect("add" not in names and "get_server_info" in names, f"power tools {names[:5]}")
    # Resources are advertised on every surface (P.O.W.E.R.'s SDK server answers `[]`), but
    # without the stepstone surface there are none.
    resources = (await s.session.list_resources()).resources
    expect(resources == [], f"no stepstone resources without the stepstone surface: {resources}")


TESTS = [(f, "stepstone") for name, f in sorted(globals().items()) if name.startswith("test_") and name != "test_default_surface_does_not_advertise_stepstone"]
TESTS.append((test_default_surface_does_not_advertise_stepstone, "power"))


def main():
    failures = 0
    for test, surface in TESTS:
        try:
            anyio.run(with_server, test, surface)
            print(f"PASS {test.__name__}")
        except Check as e:
            failures += 1
            print(f"FAIL {test.__name__}: {e}")
        except Exception:  # noqa: BLE001
            failures += 1
            print(f"FAIL {test.__name__}: {traceback.format_exc()}")
    print(f"{len(TESTS) - failures}/{len(TESTS)} passed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
