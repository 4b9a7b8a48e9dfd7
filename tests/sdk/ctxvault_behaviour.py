#!/usr/bin/env python3
"""The ctxvault surface through MCP with the official Python SDK: one check per documented rule
of ctxvault's MCP contract (../shared/seeds/003_*.txt), plus the restricted-vault battery.

Usage: ctxvault_behaviour.py PATH_OF_THE_PARAVAULT_BINARY

Builds three vaults in a temporary folder, registers them with `paravault vaults add` in a
temporary config folder (PARAVAULT_CONFIG_DIR), serves them with
`paravault mcp --surface ctxvault --agent NAME` and drives every tool. Prints one line per
rule and exits 1 when any rule fails.
"""
import json
import os
import subprocess
import sys
import base64
import io
import tempfile
import time
import zipfile

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

BINARY = sys.argv[1] if len(sys.argv) > 1 else "paravault"
FOLDERS = ["00_Inbox", "01_Projects", "02_Areas", "03_Resources", "04_Archive", "06_Daily_Logs", "PROTOCOLS"]
SEED_TOOLS = {
    "list_vaults": {},
    "warmup_status": {},
    "query": {"vault_name": None, "query": None},
    "list_docs": {"vault_name": None},
    "write_doc": {"vault_name": None, "file_path": None, "content": None, "generated_by": None, "overwrite": False},
    "list_skills": {"vault_name": None},
    "read_skill": {"vault_name": None, "skill_name": None},
    "write_skill": {"vault_name": None, "skill_name": None, "description": None, "instructions": None, "overwrite": False},
    "write_episode": {"vault_name": None, "content": None, "entities": [], "source": "NONE", "salience": 0.5,
                      "confidence": 1.0, "occurred_at": "NONE", "valid_from": "NONE"},
    "query_episodes": {"vault_name": None, "query": "", "entities": [], "valid_at": "NONE", "known_at": "NONE",
                       "include_closed": False, "order_by": "NONE", "limit": 10},
    "confirm_episode": {"vault_name": None, "episode_id": None, "at": "NONE", "source": "NONE"},
    "supersede_episode": {"vault_name": None, "episode_id": None, "content": None, "entities": [], "source": "NONE", "salience": "NONE"},
    "revise_episode": {"vault_name": None, "episode_id": None, "content": None, "entities": [], "source": "NONE", "salience": "NONE"},
    "invalidate_episode": {"vault_name": None, "episode_id": None, "valid_to": "NONE", "reason": ""},
    "dispute_episodes": {"vault_name": None, "episode_id": None, "other_id": None, "note": ""},
    "episode_history": {"vault_name": None, "episode_id": None},
    "list_entities": {"vault_name": None, "include_closed": False, "valid_at": "NONE", "min_episodes": 1},
}

# paravault's documented additions to the seed's parameters (docs/compatibility.md): optional,
# so a ctxvault client that never sends them sees the seed's behaviour.
EXTENSIONS = {"warmup_status": {"vault_name": "NONE"}}

RESULTS = []
# What the propose-authority session proposed, applied afterwards through the CLI.
PROPOSED = {}


def attr(obj, snake, camel):
    """A field under mcp 2.x's snake_case name or 1.x's camelCase one."""
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel, None)


def rule(name, ok, detail=""):
    RESULTS.append((name, bool(ok), detail))
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)


def make_vault(base, name):
    root = os.path.join(base, name)
    for folder in FOLDERS:
        os.makedirs(os.path.join(root, folder), exist_ok=True)
    return root


def cli(env, *args):
    return subprocess.run([BINARY, *args], env=env, capture_output=True, text=True, timeout=60)


class Session:
    def __init__(self, session):
        self.session = session

    async def call(self, tool, **args):
        result = await self.session.call_tool(tool, args)
        data = attr(result, "structured_content", "structuredContent")
        if data is None:
            data = json.loads(result.content[0].text)
        return bool(attr(result, "is_error", "isError")), data

    async def ok(self, tool, **args):
        is_error, data = await self.call(tool, **args)
        if is_error:
            raise AssertionError(f"{tool} failed: {json.dumps(data)[:400]}")
        return data


async def with_server(env, main_root, agent, body):
    args = ["--vault", main_root, "mcp", "--surface", "ctxvault"]
    if agent:
        args += ["--agent", agent]
    params = StdioServerParameters(command=BINARY, args=args, env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            await body(session, Session(session))


def error_code(data):
    return (data.get("error") or {}).get("code")


async def contract(session, s):
    tools = {t.name: t for t in (await session.list_tools()).tools}
    rule("every seed tool is advertised with its exact name", set(SEED_TOOLS) <= set(tools), sorted(set(SEED_TOOLS) - set(tools)))
    rule("no P.O.W.E.R. tool leaks into a ctxvault-only server", set(tools) == set(SEED_TOOLS), sorted(set(tools) - set(SEED_TOOLS)))
    problems = []
    for name, seed_params in SEED_TOOLS.items():
        params = {**seed_params, **EXTENSIONS.get(name, {})}
        if name not in tools:
            continue
        schema = attr(tools[name], "input_schema", "inputSchema")
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        if set(props) != set(params):
            problems.append(f"{name}: parameters {sorted(props)} != {sorted(params)}")
        for param, default in params.items():
            if param not in props:
                continue
            if default is None:
                if param not in required:
                    problems.append(f"{name}.{param} should be required")
            else:
                if param in required:
                    problems.append(f"{name}.{param} should be optional")
                expected = None if default == "NONE" else default
                if props[param].get("default", None) != expected and not (expected is None and "default" not in props[param]):
                    problems.append(f"{name}.{param} default {props[param].get('default')!r} != {expected!r}")
        annotations = tools[name].annotations
        if annotations is None or attr(annotations, "read_only_hint", "readOnlyHint") is None:
            problems.append(f"{name}: no annotations")
    rule("parameters, required-ness and defaults are the seed's (plus documented optional extensions)", not problems, problems)


async def discovery(session, s, agent):
    listed = await s.ok("list_vaults")
    names = sorted(v["name"] for v in listed["vaults"])
    if agent == "alice":
        rule("list_vaults lists every vault the agent may use (restricted ones it is attached to)", names == ["episodes", "notes", "secret"], names)
    else:
        rule("list_vaults hides restricted vaults from an unattached agent", names == ["episodes", "notes"], names)
    warm = await s.ok("warmup_status")
    rule("warmup_status tells the model's state", warm.get("status") in {"not_configured", "loading", "ready", "failed"}, warm)
    started = time.monotonic()
    await s.ok("list_vaults")
    rule("warmup never blocks other tools", time.monotonic() - started < 5, time.monotonic() - started)
    per_vault = await s.ok("warmup_status", vault_name="notes")
    rule("warmup_status with vault_name reports that vault's model", per_vault.get("vault_name") == "notes" and per_vault.get("status") in {"not_configured", "loading", "ready", "failed"}, per_vault)
    is_error, hidden = await s.call("warmup_status", vault_name="secret")
    if agent == "alice":
        rule("warmup_status answers for a restricted vault the agent is attached to", not is_error and hidden.get("vault_name") == "secret", hidden)
    else:
        rule("warmup_status of a forbidden vault is the same access error as every tool", is_error and error_code(hidden) == "vault_access_denied", hidden)


def make_docx(body, extra=None):
    """A minimal .docx (deflated zip) whose document body is `body`."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>')
        z.writestr("word/document.xml", '<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
                   f'wordprocessingml/2006/main"><w:body>{body}</w:body></w:document>')
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return out.getvalue()


async def documents(session, s):
    w = await s.ok("write_doc", vault_name="notes", file_path="meetings/kickoff.md", content="# Kickoff\n\nThe zebra project starts in March.\n", generated_by="agent-test")
    rule("write_doc stores .md and reports provenance", w["generated_by"] == "agent-test" and w["format"] == "md", w)
    await s.ok("write_doc", vault_name="notes", file_path="plain.txt", content="  spaced   text kept verbatim\n", generated_by="agent-test")
    is_error, again = await s.call("write_doc", vault_name="notes", file_path="plain.txt", content="other", generated_by="agent-test")
    rule("write_doc refuses an existing document unless overwrite=true", is_error and error_code(again) == "already_exists", again)
    ok = await s.ok("write_doc", vault_name="notes", file_path="plain.txt", content="  spaced   text kept verbatim\nline two\n", generated_by="agent-test", overwrite=True)
    rule("write_doc overwrite=true replaces it", ok["overwritten"] is True, ok)
    is_error, docx = await s.call("write_doc", vault_name="notes", file_path="report.docx", content="hello", generated_by="agent-test")
    rule("write_doc refuses clearly what it cannot convert", is_error and error_code(docx) == "unsupported_document", docx)
    is_error, pdf = await s.call("write_doc", vault_name="notes", file_path="report.pdf", content="hello", generated_by="agent-test")
    rule("write_doc accepts only .txt, .md and .docx", is_error and error_code(pdf) == "unsupported_document", pdf)
    docs = await s.ok("list_docs", vault_name="notes")
    rule("list_docs lists the documents", sorted(d["file_path"] for d in docs["documents"]) == ["meetings/kickoff.md", "plain.txt"], docs)
    q = await s.ok("query", vault_name="notes", query="zebra project")
    hits = [r for r in q["results"] if "kickoff" in r["path"]]
    rule("query returns chunks with their source files, marked untrusted", hits and q["trust"] == "untrusted", q)
    body = ('<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr><w:r><w:t>Budget</w:t></w:r></w:p>'
            '<w:p><w:r><w:t xml:space="preserve">Spend </w:t></w:r><w:r><w:rPr><w:b/></w:rPr><w:t>less</w:t></w:r></w:p>')
    w = await s.ok("write_doc", vault_name="notes", file_path="budget.docx", content=base64.b64encode(make_docx(body)).decode(), generated_by="agent-test")
    rule("write_doc converts a .docx (base64 content) to Markdown and reports the conversion",
         w["converted"] is True and w["format"] == "docx" and w["conversion"]["headings"] == 1 and w["conversion"]["paragraphs"] == 1, w)
    q = await s.ok("query", vault_name="notes", query="budget spend less")
    rule("a converted .docx is searchable as Markdown", any("budget.docx" in r["path"] for r in q["results"]), q)
    is_error, macro = await s.call("write_doc", vault_name="notes", file_path="macro.docx", content=base64.b64encode(make_docx(body, {"word/vbaProject.bin": b"x"})).decode(), generated_by="agent-test")
    docs = await s.ok("list_docs", vault_name="notes")
    rule("write_doc refuses a .docx with macros and writes nothing",
         is_error and error_code(macro) == "unsupported_document" and all(d["file_path"] != "macro.docx" for d in docs["documents"]), (macro, docs))


async def skills(session, s):
    w = await s.ok("write_skill", vault_name="notes", skill_name="Deploy to prod", description="How to ship a release", instructions="1. Tag\n2. Push\n")
    rule("write_skill stores a skill", w["skill_name"] == "Deploy to prod", w)
    is_error, dup = await s.call("write_skill", vault_name="notes", skill_name="Deploy to prod", description="x", instructions="y")
    rule("write_skill refuses an existing skill with overwrite=false", is_error and error_code(dup) == "already_exists", dup)
    listed = await s.ok("list_skills", vault_name="notes")
    rule("list_skills lists names and descriptions", listed["skills"] == [{"skill_name": "Deploy to prod", "description": "How to ship a release"}], listed)
    read = await s.ok("read_skill", vault_name="notes", skill_name="Deploy to prod")
    rule("read_skill returns name, description and full instructions", read["instructions"] == "1. Tag\n2. Push\n" or read["instructions"] == "1. Tag\n2. Push", read)
    rule("read_skill also answers ctxvault 0.8.1's skill object",
         read.get("skill", {}).get("name") == read["skill_name"] and read["skill"].get("instructions") == read["instructions"], read)
    is_error, missing = await s.call("read_skill", vault_name="notes", skill_name="nope")
    rule("read_skill of an unknown skill is a typed error", is_error and error_code(missing) == "skill_not_found", missing)


async def episodes(session, s):
    v = "episodes"
    a = (await s.ok("write_episode", vault_name=v, content="Anna lives in Padova", entities=["Anna", "Padova"], valid_from="2020-01-01"))["episode"]
    rule("write_episode defaults: salience 0.5, confidence 1.0", a["salience"] == 0.5 and a["confidence"] == 1.0, a)
    b = (await s.ok("write_episode", vault_name=v, content="Anna likes espresso", entities=["Anna"]))["episode"]
    q = await s.ok("query_episodes", vault_name=v)
    rule("query_episodes without query text: newest first", [e["id"] for e in q["episodes"]][:2] == [b["id"], a["id"]], q)
    q = await s.ok("query_episodes", vault_name=v, entities=["Padova"])
    rule("query_episodes filters by entity", [e["id"] for e in q["episodes"]] == [a["id"]], q)
    q = await s.ok("query_episodes", vault_name=v, query="espresso")
    rule("query text ranks results (labelled)", q["episodes"][0]["id"] == b["id"] and q["ranking"]["method"] != "none", q["ranking"])
    for _ in range(11):
        await s.ok("write_episode", vault_name=v, content="filler", entities=["Filler"])
    q = await s.ok("query_episodes", vault_name=v)
    rule("limit defaults to 10", q["count"] == 10, q["count"])
    # confirm
    c = (await s.ok("confirm_episode", vault_name=v, episode_id=b["id"], source="chat"))["episode"]
    total_before = (await s.ok("query_episodes", vault_name=v, limit=100))["total_matching"]
    rule("confirm_episode adds an attestation instead of a duplicate", c["attestations"] == 2 and c["content"] == b["content"], c)
    # supersede
    learned_before = a["known_at"]
    time.sleep(0.01)
    sup = await s.ok("supersede_episode", vault_name=v, episode_id=a["id"], content="Anna lives in Verona")
    new = sup["episode"]
    hist = await s.ok("episode_history", vault_name=v, episode_id=new["id"])
    old = hist["versions"][0]
    rule("supersede closes the old exactly where the new begins", old["valid_to"] == new["valid_from"] and old["state"] == "superseded", (old, new))
    rule("supersede links both", old["superseded_by"] == new["id"] and new["supersedes"] == a["id"], (old, new))
    rule("supersede carries entities and salience unless given", new["entities"] == ["Anna", "Padova"] and new["salience"] == 0.5, new)
    rule("episode_history is oldest first", [x["id"] for x in hist["versions"]] == [a["id"], new["id"]], hist)
    rule("episode_history also answers ctxvault 0.8.1's chain, with recorded_at per version",
         hist.get("chain") == hist["versions"] and all(x.get("recorded_at") == x["known_at"] for x in hist["versions"])
         and hist.get("vault_name") == v, hist)
    rule("note text comes back marked untrusted", hist.get("trust") == "untrusted" and q.get("trust") == "untrusted", hist.get("trust"))
    q = await s.ok("query_episodes", vault_name=v, entities=["Anna"], limit=100)
    rule("by default only statements that still hold", a["id"] not in [e["id"] for e in q["episodes"]], q)
    q = await s.ok("query_episodes", vault_name=v, entities=["Anna"], valid_at="2021-01-01")
    rule("valid_at answers what was true then", [e["id"] for e in q["episodes"]] == [a["id"]], q)
    q = await s.ok("query_episodes", vault_name=v, entities=["Padova"], known_at=learned_before)
    rule("known_at answers what the vault had learned by then", [e["id"] for e in q["episodes"]] == [a["id"]] and q["episodes"][0]["state"] == "open", q)
    q = await s.ok("query_episodes", vault_name=v, entities=["Anna"], include_closed=True, limit=100)
    rule("include_closed returns closed statements too", a["id"] in [e["id"] for e in q["episodes"]], q)
    rule("query_episodes also answers ctxvault 0.8.1's results and order_by",
         q.get("results") == q["episodes"] and q.get("order_by") == q["ranking"]["order_by"] and q.get("vault_name") == v, q)
    # revise
    x = (await s.ok("write_episode", vault_name=v, content="Carla lives in Padova", entities=["Carla"], valid_from="2019-05-01"))["episode"]
    y = (await s.ok("write_episode", vault_name=v, content="Carla lives in Rome", entities=["Carla"]))["episode"]
    await s.ok("confirm_episode", vault_name=v, episode_id=x["id"])
    d = await s.ok("dispute_episodes", vault_name=v, episode_id=x["id"], other_id=y["id"], note="cannot both hold")
    flags = {e["id"]: e["disputed_with"] for e in d["episodes"]}
    rule("dispute flags each with the other in disputed_with", flags == {x["id"]: [y["id"]], y["id"]: [x["id"]]}, flags)
    q = await s.ok("query_episodes", vault_name=v, entities=["Carla"])
    rule("disputed statements both keep coming back", sorted(e["id"] for e in q["episodes"]) == sorted([x["id"], y["id"]]), q)
    r = (await s.ok("revise_episode", vault_name=v, episode_id=x["id"], content="Carla lives in Padova, in the Arcella"))["episode"]
    rule("revise opens where the original did", r["valid_from"] == x["valid_from"], (r, x))
    rule("revise inherits attestations and open disputes", r["attestations"] == 2 and r["disputed_with"] == [y["id"]], r)
    q = await s.ok("query_episodes", vault_name=v, entities=["Carla"])
    ids = [e["id"] for e in q["episodes"]]
    rule("the revised original leaves the current view", x["id"] not in ids and r["id"] in ids, ids)
    hist = await s.ok("episode_history", vault_name=v, episode_id=r["id"])
    rule("the revised original stays in history", [e["id"] for e in hist["versions"]] == [x["id"], r["id"]], hist)
    # invalidate ends the dispute
    inv = (await s.ok("invalidate_episode", vault_name=v, episode_id=y["id"], reason="moved back"))["episode"]
    rule("invalidate closes without deleting", inv["state"] == "invalidated" and inv["valid_to"] is not None, inv)
    q = await s.ok("query_episodes", vault_name=v, entities=["Carla"], include_closed=True)
    rule("an invalidated episode is still in the vault", y["id"] in [e["id"] for e in q["episodes"]], q)
    q = await s.ok("query_episodes", vault_name=v, entities=["Carla"])
    rule("a dispute ends by itself when one side is invalidated", q["episodes"][0]["disputed_with"] == [], q)
    # list_entities
    ents = await s.ok("list_entities", vault_name=v)
    names = [e["entity"] for e in ents["entities"]]
    rule("list_entities enumerates alphabetically with counts", names == sorted(names, key=str.lower) and any(e["entity"] == "Filler" and e["episodes"] == 11 for e in ents["entities"]), ents)
    rule("list_entities also answers with ctxvault 0.8.1's names (total, episode_count, entity_norm)",
         ents.get("total") == ents["count"] and all(e.get("episode_count") == e["episodes"] and e.get("entity_norm") == e["entity"].lower()
                                                    for e in ents["entities"]), ents)
    closed = await s.ok("list_entities", vault_name=v, include_closed=True)
    count = {e["entity"]: e["episodes"] for e in closed["entities"]}
    rule("list_entities include_closed counts every recorded statement", count.get("Carla") == 3, count)
    few = await s.ok("list_entities", vault_name=v, min_episodes=5)
    rule("list_entities min_episodes", [e["entity"] for e in few["entities"]] == ["Filler"], few)
    past = await s.ok("list_entities", vault_name=v, valid_at="2019-06-01")
    rule("list_entities valid_at", [e["entity"] for e in past["entities"]] == ["Carla"], past)
    # typed refusals
    is_error, bad = await s.call("supersede_episode", vault_name=v, episode_id=a["id"], content="again")
    rule("a closed episode cannot be superseded again (typed)", is_error and error_code(bad) == "episode_not_open", bad)
    is_error, bad = await s.call("confirm_episode", vault_name=v, episode_id="../../etc/passwd")
    rule("an unknown episode id is a typed error", is_error and error_code(bad) == "episode_not_found", bad)
    is_error, bad = await s.call("write_episode", vault_name=v, content="x", salience=2)
    rule("salience outside [0, 1] is refused", is_error and error_code(bad) == "invalid_argument", bad)


async def access_battery(session, s, agent, secret_root):
    probes = ["secret", "../secret", "secret/..", secret_root, ".secret", "nothing", "", "SECRET", "a" * 300]
    leaks, codes = [], set()
    for name in probes:
        is_error, data = await s.call("query_episodes", vault_name=name)
        if not is_error:
            leaks.append((name, "answered"))
            continue
        codes.add(error_code(data))
        text = json.dumps(data)
        if secret_root in text or "private fact" in text:
            leaks.append((name, text[:200]))
    rule(f"agent {agent!r}: restricted, unknown and path-like names all refused alike", codes == {"vault_access_denied"} and not leaks, (codes, leaks))
    is_error, a = await s.call("query_episodes", vault_name="nothing")
    is_error2, b = await s.call("query_episodes", vault_name="secret")
    same = a["error"]["message"].replace("nothing", "X") == b["error"]["message"].replace("secret", "X")
    rule(f"agent {agent!r}: the refusal does not reveal that the restricted vault exists", is_error and is_error2 and same, (a, b))


async def main():
    base = tempfile.mkdtemp(prefix="ctxvault-behaviour-")
    config = os.path.join(base, "config")
    env = dict(os.environ, PARAVAULT_CONFIG_DIR=config, PARAVAULT_LOG="warn")
    for key in ("PARAVAULT_VAULT_DIR", "POWER_VAULT_DIR"):
        env.pop(key, None)
    main_root = make_vault(base, "main")
    notes, eps, secret = make_vault(base, "notes"), make_vault(base, "episodes"), make_vault(base, "secret")
    for args in (["vaults", "add", "notes", notes], ["vaults", "add", "episodes", eps, "--type", "episodic"],
                 ["vaults", "add", "secret", secret, "--restricted", "--agent", "alice=apply", "--agent", "bob=read-only", "--agent", "carol=propose"]):
        done = cli(env, *args)
        if done.returncode != 0:
            print(f"FAIL setup: paravault {' '.join(args)}: {done.stderr}")
            sys.exit(1)
    listed = cli(env, "--json", "vaults", "list")
    rule("paravault vaults list shows the registered vaults", all(n in listed.stdout for n in ("notes", "episodes", "secret")), listed.stdout)

    async def as_alice(session, s):
        await contract(session, s)
        await discovery(session, s, "alice")
        await documents(session, s)
        await skills(session, s)
        await episodes(session, s)
        w = await s.ok("write_episode", vault_name="secret", content="a private fact", entities=["Secret"])
        rule("an attached agent with apply authority writes", w["episode"]["content"] == "a private fact", w)
        is_error, wrong = await s.call("write_skill", vault_name="episodes", skill_name="s", description="d", instructions="i")
        rule("typed vaults refuse other kinds of memory", is_error and error_code(wrong) == "wrong_vault_type", wrong)

    async def as_bob(session, s):
        q = await s.ok("query_episodes", vault_name="secret")
        rule("a read-only agent reads its restricted vault", q["count"] == 1, q)
        is_error, data = await s.call("write_episode", vault_name="secret", content="bob's write")
        rule("a read-only agent cannot write", is_error and error_code(data) == "authority_insufficient", data)

    async def as_carol(session, s):
        w = await s.ok("write_episode", vault_name="secret", content="carol's proposed fact", entities=["Secret"])
        rule("a propose-authority agent's write is held as a proposal awaiting approval",
             w.get("status") == "awaiting_approval" and w.get("written") is False and len(w.get("proposal_id") or "") == 64
             and w.get("episode") is None and (w.get("proposal") or {}).get("state") == "pending"
             and (w.get("proposal") or {}).get("operation") == "memory_change", w)
        PROPOSED["write"] = w
        q = await s.ok("query_episodes", vault_name="secret")
        rule("a proposed episode is not in the vault before it is applied",
             [e["content"] for e in q["episodes"]] == ["a private fact"], q)
        held = q["episodes"][0]["id"]
        sup = await s.ok("supersede_episode", vault_name="secret", episode_id=held, content="a corrected private fact")
        after = await s.ok("query_episodes", vault_name="secret")
        rule("a propose-authority agent's supersede changes nothing until it is applied",
             sup.get("status") == "awaiting_approval" and sup.get("replaced") == held
             and [e["id"] for e in after["episodes"]] == [held], [sup, after])
        is_error, data = await s.call("supersede_episode", vault_name="secret", episode_id="0" * 32, content="x")
        rule("a propose-authority agent's change of an unknown episode is a typed refusal, nothing proposed",
             is_error and error_code(data) == "episode_not_found", data)

    async def as_mallory(session, s):
        await discovery(session, s, "mallory")
        await access_battery(session, s, "mallory", secret)

    async def as_nobody(session, s):
        await access_battery(session, s, None, secret)
        is_error, data = await s.call("write_episode", vault_name="secret", content="x")
        rule("no --agent: a restricted vault refuses writes alike", is_error and error_code(data) == "vault_access_denied", data)

    for agent, body in (("alice", as_alice), ("bob", as_bob), ("carol", as_carol), ("mallory", as_mallory), (None, as_nobody)):
        try:
            await with_server(env, main_root, agent, body)
        except Exception as e:  # noqa: BLE001
            inner = e
            while isinstance(inner, BaseExceptionGroup) and inner.exceptions:
                inner = inner.exceptions[0]
            rule(f"session as {agent!r} ran to the end", False, f"{type(inner).__name__}: {inner}")
    secret_files = subprocess.run(["grep", "-rl", "bob's write", secret], capture_output=True, text=True).stdout
    rule("refused writes left nothing in the vault", secret_files == "", secret_files)
    in_notes = lambda text: subprocess.run(["grep", "-rl", "--exclude-dir=.paravault", text, secret],
                                           capture_output=True, text=True).stdout
    rule("a proposal leaves the vault's notes untouched", in_notes("carol's proposed fact") == "", in_notes("carol's proposed fact"))
    proposal_id = (PROPOSED.get("write") or {}).get("proposal_id", "")
    listed = cli(env, "--vault", secret, "--json", "approvals")
    rule("a person sees the proposal in paravault approvals", proposal_id and proposal_id in listed.stdout and "memory_change" in listed.stdout,
         listed.stdout + listed.stderr)
    unapproved = cli(env, "--vault", secret, "--json", "apply", proposal_id)
    rule("applying a memory proposal needs approval", unapproved.returncode != 0 and "approval_required" in unapproved.stdout + unapproved.stderr,
         unapproved.stdout + unapproved.stderr)
    applied = cli(env, "--vault", secret, "--json", "apply", proposal_id, "--approve")
    rule("a person applies it by id: exactly the proposed episode, with its receipt",
         applied.returncode == 0 and '"ctxvault.write_episode"' in applied.stdout and in_notes("carol's proposed fact") != "",
         applied.stdout + applied.stderr)
    failed = [r for r in RESULTS if not r[1]]
    print(f"{len(RESULTS) - len(failed)} passed, {len(failed)} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    anyio.run(main)
