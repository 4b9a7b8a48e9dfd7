#!/usr/bin/env python3
"""What an agent written for a peer does through the official MCP Python SDK (`mcp` on PyPI)
and expects to keep working against `paravault mcp` (issue 50): one scenario per item, chosen by
name on the command line.

Usage: agent_habits.py PARAVAULT_BIN SCENARIO

Scenarios:
  lists      prompts/list, resources/list and resources/templates/list answer (prompts `[]`) on
             every surface, as P.O.W.E.R.'s SDK server does, never -32601 (item 14)
  no_vault   a client config without a vault starts no server on a hidden vault; `args: []`
             (P.O.W.E.R.'s config with the command swapped) says what to pass (items 15, 17)
  non_object P.O.W.E.R. tools whose contract result is not an object render as the SDK renders
             them: the text is the bare value, a list is one text block per item, and
             structuredContent is {"result": X} (item 11)
  power_handover  a vault P.O.W.E.R. served, handed over: its receipts in the history, its
             empty folder's catalog page kept by generate_index, its pending proposals applied
             or decided under paravault's governance, its tasks (a Task v2 snapshot and a v1
             work packet) shown, listed and advanced at P.O.W.E.R.'s revision, not a byte
             under .power/ changed (item 16)
  ctxvault_dense MODEL_DIR  a semantic vault whose policy names the model: warmup_status becomes
             ready with the mode it serves, write_doc embeds its document, and a paraphrase
             finds it by the dense path without `sync --dense`; a vault without the model is
             ready (lexical) and says how to enable it (item 6)

Each scenario gets fresh vaults (`paravault --vault V init`) and its own servers. Prints PASS/FAIL
per check and closes with 'N passed, N failed'; exits 1 on any failure.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

BIN, SCENARIO = sys.argv[1], sys.argv[2]
RESULTS = []
SURFACES = ["power", "ctxvault", "stepstone", "vaultspec"]


def rule(name, ok, detail=""):
    RESULTS.append(bool(ok))
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {str(detail)[:800]}"), flush=True)


def wire(obj):
    return obj.model_dump(by_alias=True, mode="json", exclude_none=True)


def clean_env(tmp):
    """The environment of a client that names no vault, with its own config folder."""
    env = dict(os.environ, PARAVAULT_LOG="warn", PARAVAULT_CONFIG_DIR=os.path.join(tmp, "config"), HOME=tmp, XDG_DATA_HOME=os.path.join(tmp, "data"))
    for key in ("PARAVAULT_VAULT_DIR", "POWER_VAULT_DIR"):
        env.pop(key, None)
    return env


def new_vault(tmp, name="vault"):
    vault = os.path.join(tmp, name)
    subprocess.run([BIN, "--vault", vault, "init"], check=True, stdout=subprocess.DEVNULL)
    return vault


async def session_on(params, body):
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = wire(await session.initialize())
            await body(session, init)


# ---- item 14 ----


async def lists():
    with tempfile.TemporaryDirectory() as tmp:
        vault = new_vault(tmp)
        env = clean_env(tmp)
        for surface in SURFACES:
            params = StdioServerParameters(command=BIN, args=["--vault", vault, "mcp", "--surface", surface], env=env)

            async def body(session, init, surface=surface):
                caps = init["capabilities"]
                rule(f"{surface}: prompts and resources are advertised", caps.get("prompts") is not None and caps.get("resources") is not None, caps)
                try:
                    prompts = wire(await session.list_prompts())["prompts"]
                    rule(f"{surface}: prompts/list is []", prompts == [], prompts)
                except Exception as e:  # noqa: BLE001 - the SDK raises McpError for a JSON-RPC error
                    rule(f"{surface}: prompts/list is []", False, repr(e))
                try:
                    resources = [str(r["uri"]) for r in wire(await session.list_resources())["resources"]]
                    want = sorted(f"stepstone://worklist/{n}" for n in ["list", "next", "ready", "waves"]) if surface == "stepstone" else []
                    rule(f"{surface}: resources/list answers its resources", sorted(resources) == want, resources)
                except Exception as e:  # noqa: BLE001
                    rule(f"{surface}: resources/list answers", False, repr(e))
                try:
                    templates = wire(await session.list_resource_templates())["resourceTemplates"]
                    rule(f"{surface}: resources/templates/list answers", (templates == []) == (surface != "stepstone"), templates)
                except Exception as e:  # noqa: BLE001
                    rule(f"{surface}: resources/templates/list answers", False, repr(e))
                try:
                    await session.get_prompt("no-such-prompt")
                    rule(f"{surface}: an unknown prompt is refused", False, "answered")
                except Exception as e:  # noqa: BLE001
                    code = getattr(getattr(e, "error", None), "code", None)
                    rule(f"{surface}: an unknown prompt is invalid params, not method-not-found", code == -32602, repr(e))

            await session_on(params, body)


# ---- items 15 and 17 (the client config) ----


async def starts(params, errlog_path):
    """Whether the SDK's handshake with `params` succeeds (within 15 s), and the server's stderr."""
    ok = False
    with open(errlog_path, "w", encoding="utf-8") as errlog:
        try:
            with anyio.fail_after(15):
                async with stdio_client(params, errlog=errlog) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        ok = True
        except Exception:  # noqa: BLE001 - a server that exits is an error or a timeout here
            pass
    with open(errlog_path, encoding="utf-8") as f:
        return ok, f.read()


async def no_vault():
    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env(tmp)
        default = os.path.join(tmp, "data", "paravault", "vault")
        errlog = os.path.join(tmp, "stderr.txt")
        # A client that names no vault: no server, a message naming the three ways.
        ok, stderr = await starts(StdioServerParameters(command=BIN, args=["mcp"], env=env), errlog)
        rule("mcp without a vault does not start", not ok, stderr)
        rule("the refusal names --vault, PARAVAULT_VAULT_DIR and POWER_VAULT_DIR",
             all(way in stderr for way in ["--vault", "PARAVAULT_VAULT_DIR", "POWER_VAULT_DIR", "--default-vault"]), stderr)
        rule("no default vault was created behind the client's back", not os.path.exists(default), os.listdir(tmp))
        # Started from inside a vault folder it still refuses: a client chooses the folder.
        vault = new_vault(tmp)
        ok, stderr = await starts(StdioServerParameters(command=BIN, args=["mcp"], env=env, cwd=vault), errlog)
        rule("mcp in a vault folder without a named vault does not start", not ok, stderr)
        # The default vault, asked for explicitly.
        params = StdioServerParameters(command=BIN, args=["mcp", "--default-vault"], env=env)

        async def default_info(session, init):
            info = (await session.call_tool("get_server_info", {})).structured_content
            rule("--default-vault serves the default vault", os.path.isdir(default) and info["status"] in ("ok", "degraded"), info.get("status"))

        await session_on(params, default_info)
        # P.O.W.E.R.'s config shape: the vault in the environment, args ["mcp"].
        for var in ("POWER_VAULT_DIR", "PARAVAULT_VAULT_DIR"):
            ok, stderr = await starts(StdioServerParameters(command=BIN, args=["mcp"], env=dict(env, **{var: vault})), errlog)
            rule(f"{var} with args [\"mcp\"] starts the server", ok, stderr)
        # P.O.W.E.R.'s config with only the command swapped (args []): no server, and stderr says
        # what args must be.
        ok, stderr = await starts(StdioServerParameters(command=BIN, args=[], env=dict(env, POWER_VAULT_DIR=vault)), errlog)
        rule("args [] starts no MCP server", not ok, stderr)
        rule("and stderr says args must name mcp", '"mcp"]' in stderr and "args" in stderr, stderr)


# ---- item 11 ----


async def non_object():
    with tempfile.TemporaryDirectory() as tmp:
        vault = new_vault(tmp)
        params = StdioServerParameters(command=BIN, args=["--vault", vault, "mcp"], env=clean_env(tmp))

        async def body(session, init):
            # The SDK validates structuredContent against the outputSchema it listed.
            await session.list_tools()
            texts = lambda result: [c.text for c in result.content if c.type == "text"]
            valid = await session.call_tool("validate_memory_state", {})
            rule("validate_memory_state: the text is the bare boolean", texts(valid) == ["true"], wire(valid))
            rule("validate_memory_state: structuredContent is {result: true, ...}", (valid.structured_content or {}).get("result") is True, wire(valid))
            for name, title in [("03_Resources/alpha", "Alpha habits"), ("03_Resources/beta", "Beta habits")]:
                ingested = await session.call_tool("ingest_note", {"name": name, "note_type": "Resource", "title": title,
                                                                   "description": "habits", "content": f"# {title}\n\nZebrafish habits.\n"})
                rule(f"ingest {name}", not ingested.is_error, wire(ingested))
            context = await session.call_tool("get_memory_context", {"query": "zebrafish habits"})
            paths = (context.structured_content or {}).get("result")
            rule("get_memory_context: structuredContent.result is the list of paths",
                 isinstance(paths, list) and sorted(paths) == ["03_Resources/alpha.md", "03_Resources/beta.md"], wire(context))
            rule("get_memory_context: one text block per path, the path itself", texts(context) == paths, wire(context))
            empty = await session.call_tool("get_memory_context", {"query": "nothingmatchesthisword"})
            rule("get_memory_context with no match: no text block, result []",
                 texts(empty) == [] and (empty.structured_content or {}).get("result") == [], wire(empty))
            with open(os.path.join(vault, "03_Resources", "half.md"), "w", encoding="utf-8") as f:
                f.write("---\ntype: resource\ntitle: Half\n---\nA body.\n")
            invalid = await session.call_tool("validate_memory_state", {})
            rule("validate_memory_state on a blocking finding: the text is false", texts(invalid) == ["false"], wire(invalid))
            rule("and structuredContent keeps the findings", (invalid.structured_content or {}).get("result") is False
                 and (invalid.structured_content or {}).get("blocking"), wire(invalid))
            # Tools whose result is an object keep one text block, the JSON of structuredContent.
            info = await session.call_tool("lint_vault", {})
            rule("an object result stays one JSON text block", len(texts(info)) == 1 and json.loads(texts(info)[0]) == info.structured_content, wire(info))

        await session_on(params, body)


# ---- item 12 ----


async def handoff_postcondition():
    import hashlib
    with tempfile.TemporaryDirectory() as tmp:
        vault = new_vault(tmp)
        params = StdioServerParameters(command=BIN, args=["--vault", vault, "mcp"], env=clean_env(tmp))

        async def body(session, init):
            await session.list_tools()
            ingested = await session.call_tool("ingest_note", {"name": "03_Resources/runbook", "note_type": "Resource", "title": "Runbook",
                                                               "description": "ops", "content": "# Runbook\n\nPromote the replica.\n"})
            rule("ingest the artifact", not ingested.is_error, wire(ingested))

            async def step(action, **args):
                result = await session.call_tool("handoff_work", {"action": action, "task_id": "ops-1", **args})
                return result.is_error, result.structured_content

            failed, task = await step("create", objective="Update the runbook", owner="ops")
            rule("create", not failed, task)
            failed, task = await step("resume")
            rule("resume to working", not failed and task["state"] == "working", task)
            failed, refused = await step("complete", completion_postcondition="the runbook names the replica",
                                         changed_artifacts=["03_Resources/missing.md"])
            rule("a missing artifact is refused, naming changed_artifacts", failed and refused["error"]["code"] == "invalid_argument"
                 and "changed_artifacts" in refused["error"]["message"], refused)
            failed, refused = await step("complete", completion_postcondition="the runbook names the replica")
            rule("a postcondition without artifacts is refused, naming changed_artifacts",
                 failed and "changed_artifacts" in refused["error"]["message"], refused)
            failed, task = await step("complete", completion_postcondition="the runbook names the replica",
                                      changed_artifacts=["03_Resources/runbook.md"])
            rule("complete takes completion_postcondition without a receipt_id", not failed and task["state"] == "completed", task)
            with open(os.path.join(vault, "03_Resources", "runbook.md"), "rb") as f:
                sha = hashlib.sha256(f.read()).hexdigest()
            completion = (task or {}).get("completion") or {}
            rule("a content-free task-completion receipt records each artifact's sha256",
                 completion.get("schema") == "power.task-completion.v1" and completion.get("artifacts") == [{"path": "03_Resources/runbook.md", "sha256": sha}]
                 and completion.get("receipt_id", "").startswith("tcr_") and task["receipt_ids"] == [completion.get("receipt_id")], task)
            failed, shown = await step("show")
            rule("show returns the same completion", not failed and shown.get("completion") == completion, shown)

        await session_on(params, body)


# ---- item 13 ----


async def server_info():
    with tempfile.TemporaryDirectory() as tmp:
        vault = new_vault(tmp)
        env = dict(clean_env(tmp), HF_HUB_CACHE=os.path.join(tmp, "hf"), HF_ENDPOINT="http://127.0.0.1:9")
        env.pop("PARAVAULT_MODEL_DIR", None)
        params = StdioServerParameters(command=BIN, args=["--vault", vault, "mcp"], env=env)

        async def body(session, init):
            await session.list_tools()
            info = (await session.call_tool("get_server_info", {})).structured_content
            codes = [i["code"] for i in info["issues"]]
            # What P.O.W.E.R.'s own MCP test asserts of the default call.
            rule("vault.path is the resolved vault root", info["vault"].get("path") == os.path.realpath(vault), info["vault"])
            rule("runtime.power_framework names the contract's release", bool(info["runtime"].get("power_framework")), info["runtime"])
            rule("embedding.binding is not_requested", info["embedding"]["binding"] == "not_requested", info["embedding"])
            rule("the embedding_binding_not_requested issue is there", "embedding_binding_not_requested" in codes, codes)
            rule("paravault's own fields stay (path_hint, vault_id)", info["vault"].get("path_hint") == "vault" and info["vault"].get("vault_id"), info["vault"])
            rule("the vault_path a P.O.W.E.R. agent derives from it is accepted",
                 not (await session.call_tool("lint_vault", {"vault_path": info["vault"]["path"]})).is_error)
            probed = (await session.call_tool("get_server_info", {"probe_provider": True})).structured_content
            rule("a probe without the model files says not_verified", probed["embedding"]["binding"] == "not_verified", probed["embedding"])
            rule("and drops embedding_binding_not_requested",
                 "embedding_binding_not_requested" not in [i["code"] for i in probed["issues"]], probed["issues"])

        await session_on(params, body)


# ---- ctxvault items 1, 2, 3 ----

HANDBOOK = """# Incident handbook

## Database outage

When the primary database stops answering, the on-call engineer checks the replication lag on the dashboard first and writes it down in the incident channel.
If the lag is under ten seconds, promote the replica with the failover runbook, then repoint the application pool at the new primary and announce the switch.

## Paging

Page the database owner after fifteen minutes without recovery.
"""


async def ctxvault_query():
    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env(tmp)
        main, notes = new_vault(tmp, "main"), new_vault(tmp, "notes")
        added = subprocess.run([BIN, "vaults", "add", "notes", notes], env=env, capture_output=True, text=True)
        rule("register the documents vault", added.returncode == 0, added.stderr)
        params = StdioServerParameters(command=BIN, args=["--vault", main, "mcp", "--surface", "ctxvault"], env=env)

        async def body(session, init):
            await session.list_tools()

            async def ok(tool, **args):
                result = await session.call_tool(tool, args)
                rule(f"{tool} succeeds", not result.is_error, wire(result))
                return result.structured_content or {}

            await ok("write_doc", vault_name="notes", file_path="ops/incidents/handbook.md", content=HANDBOOK, generated_by="agent")
            await ok("write_doc", vault_name="notes", file_path="ops/paging.md", content="# Paging\n\nPage the database owner when the replica lags.\n", generated_by="agent")
            listed = {d["file_path"] for d in (await ok("list_docs", vault_name="notes"))["documents"]}
            hits = (await ok("query", vault_name="notes", query="promote the replica failover"))["results"]
            top = hits[0] if hits else {}
            rule("item 2: a hit's source is the list_docs name", top.get("source") == "ops/incidents/handbook.md" and top.get("source") in listed, (top, listed))
            answer = "If the lag is under ten seconds, promote the replica with the failover runbook, then repoint the application pool at the new primary and announce the switch."
            rule("item 1: a hit's text is the matching chunk, with the answering sentence whole", answer in top.get("text", ""), top.get("text"))
            chunk = top.get("text", "").strip()
            whole_lines = chunk in HANDBOOK and (HANDBOOK.startswith(chunk) or "\n" + chunk in HANDBOOK) and chunk + "\n" in HANDBOOK
            rule("item 1: whole lines of the document, not a window cut mid-word", whole_lines and top.get("text_truncated") is False, chunk)
            scores = [h["score"] for h in hits]
            rule("item 3: score is ctxvault's distance: lower is closer, best first",
                 len(hits) >= 2 and scores == sorted(scores) and all(0 < x <= 1 for x in scores), hits)
            relevance = [h["relevance"] for h in hits]
            rule("item 3: relevance (higher is better) orders the same hits", relevance == sorted(relevance, reverse=True), hits)
            # The agent's habit: write back to the source it was given.
            await ok("write_doc", vault_name="notes", file_path=top.get("source"), content=HANDBOOK + "\nReviewed.\n", generated_by="agent", overwrite=True)
            after = [d["file_path"] for d in (await ok("list_docs", vault_name="notes"))["documents"]]
            rule("write_doc(file_path=source, overwrite=true) updates the document, no second one", sorted(after) == sorted(listed), after)

        await session_on(params, body)


# ---- ctxvault item 6 ----

RUNBOOK = "# Failover\n\nPromote the standby replica if the primary database stops responding, then repoint the application pool.\n"
GARDEN = "# Tomatoes\n\nWater tomato seedlings every morning and stake them once they flower.\n"
# No word of it is in either document: only the dense path can find the runbook.
PARAPHRASE = "what should I do after our main DB server crashed"


async def poll_ready(session, vault_name):
    """warmup_status until `ready` (a load takes seconds; 90 s at most), the answers seen."""
    seen = []
    with anyio.fail_after(90):
        while True:
            warm = (await session.call_tool("warmup_status", {"vault_name": vault_name})).structured_content or {}
            seen.append(warm)
            if warm.get("ready") is True:
                return seen
            await anyio.sleep(0.5)


async def ctxvault_dense():
    model_dir = sys.argv[3]
    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env(tmp)
        main, notes, bare = new_vault(tmp, "main"), new_vault(tmp, "notes"), new_vault(tmp, "bare")
        for name, vault in (("notes", notes), ("bare", bare)):
            added = subprocess.run([BIN, "vaults", "add", name, vault], env=env, capture_output=True, text=True)
            rule(f"register {name}", added.returncode == 0, added.stderr)
        # The notes vault's policy names the model's folder; nobody runs `sync --dense`.
        with open(os.path.join(notes, ".paravault", "policy.yaml"), "a", encoding="utf-8") as f:
            f.write(f"\nembedding:\n  local_dir: {model_dir}\n")
        no_model = dict(env, HF_HUB_CACHE=os.path.join(tmp, "hf"), HF_ENDPOINT="http://127.0.0.1:9")
        no_model.pop("PARAVAULT_MODEL_DIR", None)
        params = StdioServerParameters(command=BIN, args=["--vault", main, "mcp", "--surface", "ctxvault"], env=no_model)

        async def body(session, init):
            await session.list_tools()
            # ctxvault's advice: wait for ready. It comes, with the mode queries are answered in.
            seen = await poll_ready(session, "notes")
            warm = seen[-1]
            rule("warmup_status becomes ready: true with the model bound", warm.get("status") == "ready", seen)
            rule("before anything is embedded it says queries are lexical", warm.get("mode") == "lexical" and warm.get("message"), warm)
            for doc, content in (("ops/failover.md", RUNBOOK), ("garden/tomatoes.md", GARDEN)):
                written = await session.call_tool("write_doc", {"vault_name": "notes", "file_path": doc, "content": content, "generated_by": "agent"})
                rule(f"write_doc {doc} succeeds", not written.is_error, wire(written))
                receipt = (written.structured_content or {}).get("receipt") or {}
                rule(f"the write of {doc} embedded it (its receipt's search_mode is semantic)", receipt.get("search_mode") == "semantic", receipt)
            found = (await session.call_tool("query", {"vault_name": "notes", "query": PARAPHRASE})).structured_content or {}
            hits = found.get("results") or []
            rule("query runs the dense path without `sync --dense` (actual_mode hybrid)", found.get("actual_mode") == "hybrid", found)
            rule("a paraphrase sharing no word with the document finds it first", hits and hits[0].get("source") == "ops/failover.md", hits)
            warm = (await session.call_tool("warmup_status", {"vault_name": "notes"})).structured_content or {}
            rule("warmup_status now says ready with the mode it serves (hybrid)", warm.get("ready") is True and warm.get("mode") == "hybrid", warm)
            # A vault whose model cannot be loaded: ready (lexical), never "wait", and how to enable it.
            warm = (await session.call_tool("warmup_status", {"vault_name": "bare"})).structured_content or {}
            rule("without the model warmup_status is ready: true in lexical mode", warm.get("status") == "not_configured" and warm.get("ready") is True and warm.get("mode") == "lexical", warm)
            enable = warm.get("enable") or ""
            rule("and says how a person enables it", all(w in enable for w in ["PARAVAULT_MODEL_DIR", "embedding.local_dir", "HF_HUB_CACHE", "allow-public", "sync --dense"]), warm)
            written = await session.call_tool("write_doc", {"vault_name": "bare", "file_path": "ops/failover.md", "content": RUNBOOK, "generated_by": "agent"})
            receipt = (written.structured_content or {}).get("receipt") or {}
            rule("a write there still lands, by keyword (search_mode fts)", not written.is_error and receipt.get("search_mode") == "fts", wire(written))

        await session_on(params, body)


# ---- ctxvault items 4, 5 ----


async def ctxvault_memory():
    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env(tmp)
        main, eps = new_vault(tmp, "main"), new_vault(tmp, "episodes")
        added = subprocess.run([BIN, "vaults", "add", "eps", eps, "--type", "episodic"], env=env, capture_output=True, text=True)
        rule("register the episodic vault", added.returncode == 0, added.stderr)
        params = StdioServerParameters(command=BIN, args=["--vault", main, "mcp", "--surface", "ctxvault", "--agent", "alice"], env=env)

        async def body(session, init):
            await session.list_tools()

            async def ok(tool, **args):
                result = await session.call_tool(tool, args)
                rule(f"{tool} succeeds", not result.is_error, wire(result))
                return result.structured_content or {}

            first = await ok("write_episode", vault_name="eps", content="Marco moved to Turin", entities=["Marco", "Turin"])
            await ok("write_episode", vault_name="eps", content="Marco likes espresso", entities=["Marco"])
            await ok("write_episode", vault_name="eps", content="marco plays chess on Sundays", entities=["marco"])
            await ok("write_episode", vault_name="eps", content="Turin has a new bakery", entities=["turin"])
            listed = (await ok("list_entities", vault_name="eps", min_episodes=2))["entities"]
            marco = [e for e in listed if e["entity_norm"] == "marco"]
            rule("item 4: one row per normalised entity, counted across spellings",
                 len(marco) == 1 and marco[0]["episodes"] == 3 and marco[0]["episode_count"] == 3 and marco[0]["entity"] == "Marco", listed)
            rule("item 4: with the spellings seen", marco and marco[0]["spellings"] == ["Marco", "marco"], listed)
            rule("item 4: min_episodes counts across spellings (Turin twice in two spellings)",
                 [e["entity_norm"] for e in listed] == ["marco", "turin"], listed)
            queried = await ok("query_episodes", vault_name="eps", entities=["MARCO"])
            rule("item 4: the same count query_episodes matches", len(queried["episodes"]) == 3, queried)
            # Item 5: the agent is the default source, and the receipt records it.
            episode = (first.get("episode") or {})
            rule("item 5: write_episode under --agent alice defaults source to alice", episode.get("source") == "alice", first)
            rule("item 5: the receipt records the agent", (first.get("receipt") or {}).get("agent") == "alice", first)
            named = await ok("write_episode", vault_name="eps", content="Marco met Bea", entities=["Marco"], source="a phone call")
            rule("item 5: a given source is kept", (named.get("episode") or {}).get("source") == "a phone call", named)
            with open(os.path.join(eps, ".paravault", "receipts.jsonl"), encoding="utf-8") as f:
                receipts = [json.loads(line) for line in f if line.strip()]
            rule("item 5: every receipt of the agent's writes names it",
                 receipts and all(r.get("agent") == "alice" and r.get("actor") == "agent" for r in receipts), receipts[-1:])

        await session_on(params, body)


# ---- vaultspec items 7, 8 and argument errors on every surface ----


async def vaultspec_habits():
    with tempfile.TemporaryDirectory() as tmp:
        vault = new_vault(tmp)
        env = clean_env(tmp)
        params = StdioServerParameters(command=BIN, args=["--vault", vault, "mcp", "--surface", "power,stepstone,vaultspec"], env=env)

        async def body(session, init):
            await session.list_tools()

            async def call(tool, args):
                result = await session.call_tool(tool, args)
                return result.is_error, result.structured_content or {}

            def message(data):
                error = data.get("error") or {}
                return error.get("message", "") if isinstance(error, dict) else str(error)

            docs = [{"feature": "search-api", "type": t, "date": "2026-05-30"} for t in ["research", "adr", "plan", "reference"]]
            failed, created = await call("create", {"documents": docs})
            rule("create four documents (the feature index follows)", not failed and created.get("counts", {}).get("created") == 4, created)
            failed, found = await call("find", {"type": ["index"]})
            rows = found.get("result") or []
            rule("item 7: find type [\"index\"] is accepted and finds the feature index",
                 not failed and [(r["type"], r["feature"]) for r in rows] == [("index", "search-api")]
                 and rows[0]["path"] == "01_Projects/search-api/search-api.index.md", found)
            failed, found = await call("find", {"feature": "search-api"})
            rule("item 7: search rows follow the seed's order (adr, plan, research, reference)",
                 not failed and [r["type"] for r in found.get("result") or []] == ["adr", "plan", "research", "reference"], found)
            failed, found = await call("find", {"feature": "search-api", "limit": 2})
            rule("item 7: a limit crowds out the later types", [r["type"] for r in found.get("result") or []] == ["adr", "plan"], found)
            plan = "2026-05-30-search-api-plan"
            failed, edited = await call("plan_edit", {"plan": plan, "operations": [{"operation": "add", "action": "write the index", "scope": "src"},
                                                                                  {"operation": "add", "action": "query it", "scope": "src"}]})
            rule("the plan gains two steps", not failed and edited.get("status") == "ok", edited)
            failed, logged = await call("log", {"feature": "search-api", "plan": plan, "step": "S01", "rows": ["A:src/x.rs"],
                                                "verify": ["cargo test=pass", "cargo clippy=pass"]})
            rule("item 8: log takes 0.3.9's list-typed verify", not failed and logged.get("changed") is True, logged)
            ledger = open(os.path.join(vault, logged.get("path", "missing")), encoding="utf-8").read() if not failed else ""
            rule("item 8: each check is its own verify line", "verify: cargo test=pass" in ledger and "verify: cargo clippy=pass" in ledger, ledger)
            failed, single = await call("log", {"feature": "search-api", "plan": plan, "step": "S02", "rows": ["A:src/y.rs"], "verify": "cargo test=pass"})
            rule("item 8: and the seed's string", not failed, single)
            # Every argument error names the argument, the expected shape and an example.
            for tool, args, name in [
                ("log", {"feature": "search-api", "plan": plan, "step": "S03", "verify": True}, "verify"),
                ("find", {"feature": "search-api", "body": True}, "body"),
                ("find", {"limit": "many"}, "limit"),
                ("search_vault_tool", {"query": "x", "max_results": [3]}, "max_results"),
                ("read_note", {"path": 5}, "path"),
                ("add", {"title": 5}, "title"),
            ]:
                failed, data = await call(tool, args)
                text = message(data)
                rule(f"item 8: {tool} names `{name}`, the shape and an example", failed and f"`{name}`" in text and "expected" in text and "e.g." in text, data)
            failed, data = await call("status", {"target": "no-such-thing"})
            text = message(data)
            rule("item 8: status blames target, not plan", failed and "target" in text and "`plan`" not in text, data)

        await session_on(params, body)


# ---- item 10 ----

OBSIDIAN_NOTE = """---
type: Resource
title: Replica failover
description: How to promote the replica
timestamp: 2026-01-01T00:00:00Z
---
# Replica failover

Promote the replica when the primary database stops answering.
"""


def hand_made_vault(tmp, name):
    """A folder of Obsidian notes nobody synced: P.A.R.A. folders, one valid note, one without
    frontmatter."""
    root = os.path.join(tmp, name)
    for folder in ("00_Inbox", "01_Projects", "02_Areas", "03_Resources"):
        os.makedirs(os.path.join(root, folder))
    with open(os.path.join(root, "03_Resources", "failover.md"), "w", encoding="utf-8") as f:
        f.write(OBSIDIAN_NOTE)
    with open(os.path.join(root, "00_Inbox", "scribble.md"), "w", encoding="utf-8") as f:
        f.write("just a thought about the replica\n")
    return root


async def first_search():
    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env(tmp)
        for tool, args in [("search_vault_tool", {"query": "promote the replica"}), ("get_memory_context", {"query": "promote the replica"}),
                           ("suggest_related_tool", {"target_path": "03_Resources/failover.md", "method": "keyword"})]:
            vault = hand_made_vault(tmp, tool)
            params = StdioServerParameters(command=BIN, args=["--vault", vault, "mcp"], env=env)

            async def body(session, init, tool=tool, args=args):
                await session.list_tools()
                result = await session.call_tool(tool, args)
                data = result.structured_content or {}
                rule(f"{tool}: the first call on a never-synced vault answers", not result.is_error, data)
                reason = data.get("fallback_reason") or ""
                rule(f"{tool}: and says it published the first generation", reason.startswith("first_generation_published"), data)
                if tool == "search_vault_tool":
                    paths = [r["source"]["path"] for r in data.get("results", [])]
                    rule("the search finds the Obsidian note", "03_Resources/failover.md" in paths, paths)
                    rule("and counts the note it could not index", "1 left out" in reason, reason)
                if tool == "get_memory_context":
                    rule("the context names the note", data.get("result") == ["03_Resources/failover.md"], data)
                again = (await session.call_tool(tool, args)).structured_content or {}
                rule(f"{tool}: the next call reads that generation", not (again.get("fallback_reason") or "").startswith("first_generation"), again)

            await session_on(params, body)


# ---- item 16 ----

POWER_NOTE = """---
type: Resource
title: Failover runbook
description: How to fail the database over
timestamp: 2026-11-30T10:00:00Z
---

# Failover

Promote the replica when the primary stops answering.
"""
POWER_EDIT = POWER_NOTE.replace("stops answering.", "stops answering, then repoint the pool.")
POWER_PLAN = POWER_NOTE.replace("title: Failover runbook", "title: Failover plan").replace("Failover runbook", "Failover plan")


def power_catalog(folder):
    """An empty folder's catalog page as P.O.W.E.R. renders it (reference §1.3)."""
    return (f"---\ntype: System Guide\ntitle: {folder} Index\ndescription: Catalog of {folder}\ntimestamp: 2026-11-30T10:00:00Z\n"
            f"x-generated-by: power\nx-index-renderer: 2\nx-index-directory: \"{folder}\"\nx-index-page: 1\nx-index-pages: 1\n---\n\n# {folder}\n\nNo notes yet.\n")


def sha256_text(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def power_proposal(path, before, content, created_at):
    """A proposal as P.O.W.E.R. stores it in .power/proposals/<id>.json (reference §5)."""
    payload = {"path": path, "before_sha256": sha256_text(before), "after_sha256": sha256_text(content), "content": content}
    pid = hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")).hexdigest()
    return dict(payload, proposal_id=pid, idempotency_key=pid, schema_version=1, created_at=created_at)


def power_vault(tmp, name):
    """A vault P.O.W.E.R. was serving, as it leaves it: notes, its catalogs (00_Inbox has no
    notes, only its catalog page), two receipts and two pending proposals under .power/."""
    root = os.path.join(tmp, name)
    for folder in ("00_Inbox", "01_Projects", "02_Areas", "03_Resources"):
        os.makedirs(os.path.join(root, folder))
    files = {"03_Resources/runbook.md": POWER_NOTE, "00_Inbox/_index.md": power_catalog("00_Inbox")}
    receipts = []
    for n, (path, before, after) in enumerate([("03_Resources/runbook.md", "", POWER_NOTE), ("03_Resources/runbook.md", POWER_NOTE, POWER_NOTE)]):
        receipts.append({"receipt_schema": "power.receipt.v1", "operation": "mcp.ingest_note" if n == 0 else "memory.apply", "path": path,
                         "before_sha256": sha256_text(before), "after_sha256": sha256_text(after), "at": f"2026-11-30T10:0{n}:00+00:00",
                         "trace_id": f"{n:032x}", "span_id": f"{n:016x}", "status": "ok", "index_summary": "indexed 1 note",
                         "search_mode": "fts", "search_generation": f"0000000{n}-0000-4000-8000-000000000000", "notes_scanned": "1",
                         "notes_indexed": "1", "notes_excluded": "0", "lint_orphans": "0", "duration_ms": "12.345"})
    files[".power/memory-history.jsonl"] = "".join(json.dumps(r, sort_keys=True) + "\n" for r in receipts)
    proposals = [power_proposal("03_Resources/runbook.md", POWER_NOTE, POWER_EDIT, "2026-11-30T11:00:00+00:00"),
                 power_proposal("01_Projects/plan.md", "", POWER_PLAN, "2026-11-30T11:01:00+00:00")]
    for proposal in proposals:
        files[f".power/proposals/{proposal['proposal_id']}.json"] = json.dumps(proposal, sort_keys=True, indent=2)
    # A Task v2 snapshot (reference §9.1 names its states and fields; P.O.W.E.R.'s own extras
    # such as priority and execution_state have no place in paravault and are ignored) and a
    # legacy v1 work packet (Markdown with YAML frontmatter, every field of §9.1).
    files[".power/tasks/migrate-db.json"] = json.dumps({"task_id": "migrate-db", "revision": 2, "state": "working", "objective": "Migrate the database",
                                                        "owner": "ops", "kind": "agent", "priority": 2, "execution_state": "running",
                                                        "changed_artifacts": ["03_Resources/runbook.md"], "created_at": "2026-11-30T09:30:00+00:00"})
    files[".power/work-packets/rotate-keys.md"] = (
        "---\ncontrol_plane: power-work-packet\nschema_version: 1\ntask_id: rotate-keys\nobjective: Rotate the signing keys\nowner: sec\n"
        "actor: agent\nscope: [02_Areas/security]\nauthority: propose\nstate: input-required\nprofile: standard\nmaintenance_phase: null\n"
        "source_revision: unknown\nchanged_artifacts: []\nreceipt_ids: []\nopen_gates: []\nnext_action: ask which HSM\n"
        "blocker: the HSM is offline\nrequired_approval: caller\nhuman_interventions: 1\nidempotency_key: k1\ncheckpoint: 1\n"
        "last_action: input-required\nlast_idempotency_key: k1\ncontent_capture: disabled\ncreated_at: '2026-11-30T09:00:00+00:00'\n"
        "updated_at: '2026-11-30T09:05:00+00:00'\n---\n\n# Rotate the signing keys\n")
    files[".power/vault.json"] = json.dumps({"vault_id": "8c1f6a8e-0000-4000-8000-000000000000", "schema_version": 1, "created_at": "2026-11-30T09:00:00+00:00"})
    for rel, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
            f.write(text)
    return root, receipts, proposals


def power_bytes(root):
    """Every file under .power/, by path: its bytes."""
    out = {}
    for folder, _, names in os.walk(os.path.join(root, ".power")):
        for name in names:
            with open(os.path.join(folder, name), "rb") as f:
                out[os.path.relpath(os.path.join(folder, name), root)] = f.read()
    return out


async def power_handover():
    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env(tmp)
        vault, receipts, (edit, plan) = power_vault(tmp, "handed-over")
        before = power_bytes(vault)
        with open(os.path.join(vault, "00_Inbox", "_index.md"), "rb") as f:
            inbox_catalog = f.read()
        params = StdioServerParameters(command=BIN, args=["--vault", vault, "mcp"], env=env)
        # A rule that gives applying plans to a person.
        os.makedirs(os.path.join(vault, ".paravault"), exist_ok=True)
        with open(os.path.join(vault, ".paravault", "policy.yaml"), "w", encoding="utf-8") as f:
            f.write("approvals:\n  rules:\n    - { operations: [apply], paths: [\"01_Projects/**\"], approver: human }\n")

        async def body(session, init):
            await session.list_tools()
            history = (await session.call_tool("read_memory_history", {})).structured_content or {}
            got = history.get("receipts") or []
            rule("history shows P.O.W.E.R.'s receipts first, as its lines hold them", got[:2] == receipts, got)
            indexed = await session.call_tool("generate_index", {})
            rule("generate_index succeeds", not indexed.is_error, wire(indexed))
            path = os.path.join(vault, "00_Inbox", "_index.md")
            kept = os.path.exists(path) and open(path, "rb").read() == inbox_catalog
            rule("P.O.W.E.R.'s catalog page of a folder without notes survives generate_index, byte for byte", kept, (indexed.structured_content, os.listdir(os.path.join(vault, "00_Inbox"))))
            # Its pending proposal, handed back as an agent holds it.
            held = {k: v for k, v in edit.items() if k != "schema_version"}
            unapproved = await session.call_tool("apply_memory_change", {"proposal": held, "approved": False})
            rule("applying P.O.W.E.R.'s proposal still needs approved=true", unapproved.is_error and "approval_required" in json.dumps(unapproved.structured_content), wire(unapproved))
            forged = dict(held, content=held["content"] + "and a forged line\n")
            refused = await session.call_tool("apply_memory_change", {"proposal": forged, "approved": True})
            rule("a proposal that does not hash to P.O.W.E.R.'s stored one is refused", refused.is_error and "proposal_invalid" in json.dumps(refused.structured_content), wire(refused))
            applied = await session.call_tool("apply_memory_change", {"proposal": held, "approved": True})
            data = applied.structured_content or {}
            rule("P.O.W.E.R.'s pending proposal applies (no proposal_invalid)", not applied.is_error and data.get("proposal_id") == edit["proposal_id"], wire(applied))
            with open(os.path.join(vault, "03_Resources", "runbook.md"), encoding="utf-8") as f:
                rule("the note holds the proposed text", f.read() == POWER_EDIT)
            # Under a `human` rule a person decides it, never the agent.
            waiting = await session.call_tool("apply_memory_change", {"proposal": {k: v for k, v in plan.items() if k != "schema_version"}, "approved": True})
            rule("under a human rule P.O.W.E.R.'s proposal waits for a person", waiting.is_error and "human_approval_required" in json.dumps(waiting.structured_content), wire(waiting))
            status = (await session.call_tool("get_proposal_status", {"proposal_id": plan["proposal_id"]})).structured_content or {}
            rule("and get_proposal_status finds it pending", status.get("state") == "pending" and status.get("paths") == ["01_Projects/plan.md"], status)
            # P.O.W.E.R.'s tasks, read where they lie: shown and listed without a write, then
            # advanced (imported once, at P.O.W.E.R.'s revision) by an agent that holds that revision.
            task = await session.call_tool("handoff_work", {"action": "show", "task_id": "migrate-db"})
            shown = task.structured_content or {}
            rule("P.O.W.E.R.'s Task v2 snapshot shows as the task, at its revision, naming its file",
                 not task.is_error and shown.get("state") == "working" and shown.get("revision") == 2 and shown.get("owner") == "ops"
                 and (shown.get("imported_from") or {}).get("file") == ".power/tasks/migrate-db.json", wire(task))
            listed = (await session.call_tool("handoff_work", {"action": "list"})).structured_content or {}
            ids = [row.get("task_id") for row in listed.get("tasks") or []]
            rule("list shows both of P.O.W.E.R.'s tasks (v2 snapshot and v1 work packet)", ids == ["migrate-db", "rotate-keys"], listed)
            stepped = await session.call_tool("handoff_work", {"action": "checkpoint", "task_id": "migrate-db", "idempotency_key": "k-7",
                                                               "expected_revision": 2, "next_action": "switch the readers"})
            data = stepped.structured_content or {}
            rule("a checkpoint with P.O.W.E.R.'s expected_revision advances the task to revision 3",
                 not stepped.is_error and data.get("revision") == 3 and data.get("next_action") == "switch the readers", wire(stepped))
            again = await session.call_tool("handoff_work", {"action": "checkpoint", "task_id": "migrate-db", "idempotency_key": "k-7",
                                                             "expected_revision": 2, "next_action": "switch the readers"})
            rule("the same call again replays revision 3 (idempotent)", (again.structured_content or {}).get("revision") == 3, wire(again))
            packet = await session.call_tool("handoff_work", {"action": "show", "task_id": "rotate-keys"})
            p = packet.structured_content or {}
            rule("the v1 work packet shows as an input-required task with its blocker",
                 p.get("state") == "input-required" and (p.get("required_input") or {}).get("blocker") == "the HSM is offline", wire(packet))
            unapproved = await session.call_tool("handoff_work", {"action": "resume", "task_id": "rotate-keys"})
            rule("resuming P.O.W.E.R.'s input-required task still needs approved=true",
                 unapproved.is_error and "approval_required" in json.dumps(unapproved.structured_content), wire(unapproved))
            shadow = await session.call_tool("handoff_work", {"action": "create", "task_id": "rotate-keys", "objective": "x", "owner": "y"})
            rule("create never shadows P.O.W.E.R.'s task of the same id", shadow.is_error and "task_exists" in json.dumps(shadow.structured_content), wire(shadow))
            history = (await session.call_tool("read_memory_history", {})).structured_content or {}
            got = history.get("receipts") or []
            rule("the apply's receipt follows P.O.W.E.R.'s", got[:2] == receipts and got[-1].get("proposal_id") == edit["proposal_id"], got)

        await session_on(params, body)
        # A person rejects the plan with paravault's CLI; the agent's next apply is refused.
        config = env["PARAVAULT_CONFIG_DIR"]
        secret = "correct horse battery staple\n"
        subprocess.run([BIN, "--vault", vault, "approver", "add", "alice"], input=secret, env=env, capture_output=True, text=True, check=True)
        rejected = subprocess.run([BIN, "--vault", vault, "reject", plan["proposal_id"], "--approver", "alice"], input=secret, env=env, capture_output=True, text=True)
        rule("a person rejects P.O.W.E.R.'s pending proposal with `paravault reject`", rejected.returncode == 0, rejected.stderr + rejected.stdout)

        async def after(session, init):
            refused = await session.call_tool("apply_memory_change", {"proposal": {k: v for k, v in plan.items() if k != "schema_version"}, "approved": True})
            rule("then applying it is proposal_rejected", refused.is_error and "proposal_rejected" in json.dumps(refused.structured_content), wire(refused))

        await session_on(params, after)
        rule("not a byte of P.O.W.E.R.'s files under .power/ changed or went missing", power_bytes(vault) == before,
             sorted(set(before) ^ set(power_bytes(vault))) or [k for k in before if power_bytes(vault).get(k) != before[k]])
        rule("the plan was never written", not os.path.exists(os.path.join(vault, "01_Projects", "plan.md")))
        del config


SCENARIOS = {"power_handover": power_handover, "first_search": first_search, "ctxvault_dense": ctxvault_dense, "vaultspec": vaultspec_habits, "ctxvault_memory": ctxvault_memory, "ctxvault_query": ctxvault_query, "lists": lists, "no_vault": no_vault, "non_object": non_object, "handoff": handoff_postcondition, "server_info": server_info}


def main():
    anyio.run(SCENARIOS[SCENARIO])
    failed = RESULTS.count(False)
    print(f"{len(RESULTS) - failed} passed, {failed} failed")
    sys.exit(1 if failed or not RESULTS else 0)


main()
