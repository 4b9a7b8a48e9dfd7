#!/usr/bin/env bash
# MCP smoke test with the official Python SDK (`mcp` on PyPI), in both client modes:
# legacy (initialize handshake) and auto (server/discover, 2026-07-28 stateless envelope).
# Steps per mode: list tools + get_server_info, ingest_note, read_note, propose_memory_change,
# apply_memory_change (approved). Every other tool, search included, is called by .ci/mcp_conformance.py.
# Usage: .ci/mcp_smoke.sh [PYTHON] [PARAVAULT_BIN] [SMOKE_SCRIPT]
set -euo pipefail
PY=${1:-python3}
BIN=$(realpath "${2:-target/debug/paravault}")
SMOKE=$(realpath "${3:-../shared/scripts/mcp_smoke.py}")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The JSON the script prints after the tool list, as one line of structuredContent.
structured() { "$PY" -c 'import json,sys; t=sys.stdin.read(); print(json.dumps(json.loads(t[t.index("\n{")+1:])["structuredContent"]))'; }

for mode in legacy auto; do
  vault="$WORK/$mode"
  "$BIN" --vault "$vault" init >/dev/null
  call() { "$PY" "$SMOKE" --mode "$mode" --call "$1" --args "$2" -- "$BIN" --vault "$vault" mcp; }
  out=$(call get_server_info '{}')
  # Here-strings, not `echo | head`/`grep -q`: those readers close the pipe early, and under
  # pipefail the writer's SIGPIPE (exit 141) fails the run whenever the output outgrows the pipe.
  sed -n 1,2p <<<"$out"
  [[ $out == *"'ingest_note'"* ]] || { echo "mcp smoke: ingest_note missing from the tool list" >&2; exit 1; }
  call ingest_note '{"name":"03_Resources/smoke","note_type":"Resource","title":"Smoke","description":"MCP smoke note","content":"# Smoke\n\nHello from the Python SDK.\n"}' | structured >"$WORK/receipt.json"
  note=$(call read_note '{"path":"03_Resources/smoke.md"}' | structured)
  args=$(NOTE="$note" "$PY" -c 'import json,os; n=json.loads(os.environ["NOTE"]); print(json.dumps({"path":n["path"],"content":n["content"].replace("Hello","Edited"),"expected_sha256":n["sha256"]}))')
  proposal=$(call propose_memory_change "$args" | structured)
  applied=$(call apply_memory_change "{\"proposal\": $proposal, \"approved\": true}" | structured)
  echo "$mode: ingest seq $("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["seq"])' "$WORK/receipt.json"), apply $applied" | cut -c1-200
  grep -q "Edited from the Python SDK" "$vault/03_Resources/smoke.md"
done
echo "mcp smoke: ok"
