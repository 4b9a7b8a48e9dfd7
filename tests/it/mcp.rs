//! MCP server tests: the built binary driven over newline-delimited JSON-RPC on stdio.
//!
//! Covers the tools/list golden file and README table, a round trip through every tool,
//! the maintenance, related-notes, handoff and infra tools (happy path, typed errors, approval
//! refusals), the get_server_info report and its no-download probe, read-only mode, protocol
//! edges (discover, unknown methods), rate limits, the vault_path boundary, error masking,
//! stdout hygiene, stdin EOF and the parent watchdog.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_paravault");
const TIMEOUT: Duration = Duration::from_secs(60);

/// P.O.W.E.R. tools whose contract result is not an object (`ToolParams::BARE_RESULT`).
const BARE_RESULT_TOOLS: [&str; 2] = ["validate_memory_state", "get_memory_context"];

fn new_vault() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new(BIN).arg("--vault").arg(dir.path()).arg("init").stdout(Stdio::null()).status().unwrap();
    assert!(status.success());
    dir
}

pub(crate) struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Receiver<String>,
    next_id: u64,
}

impl Server {
    fn start(vault: &Path, extra: &[&str]) -> Server {
        Server::start_with_env(vault, extra, &[])
    }

    /// Starts the server with extra environment variables (an empty value removes the variable).
    pub(crate) fn start_with_env(vault: &Path, extra: &[&str], env: &[(&str, &Path)]) -> Server {
        let mut command = Command::new(BIN);
        command.arg("--vault").arg(vault).arg("mcp").args(extra).env("PARAVAULT_LOG", "info");
        for (name, value) in env {
            if value.as_os_str().is_empty() {
                command.env_remove(name);
            } else {
                command.env(name, value);
            }
        }
        let mut child = command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let (tx, lines) = channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // stdout hygiene: every line is a JSON-RPC 2.0 message.
                let parsed: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("non-JSON on stdout ({e}): {line}"));
                assert_eq!(parsed["jsonrpc"], "2.0", "not JSON-RPC: {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (etx, stderr) = channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = etx.send(line);
            }
        });
        let stdin = child.stdin.take();
        Server { child, stdin, lines, stderr, next_id: 1 }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request and returns the whole response object (result or error).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let line = self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())).expect("no response in time");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == json!(id) {
                return message;
            }
        }
    }

    pub(crate) fn initialize(&mut self) -> Value {
        let response = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "paravault-tests", "version": "1"}}),
        );
        assert!(response["result"].is_object(), "initialize failed: {response}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        response["result"].clone()
    }

    fn tools(&mut self) -> Vec<Value> {
        let response = self.request("tools/list", json!({}));
        response["result"]["tools"].as_array().unwrap_or_else(|| panic!("tools/list failed: {response}")).clone()
    }

    /// Calls a tool and returns the CallToolResult (panics on a JSON-RPC error).
    pub(crate) fn call(&mut self, tool: &str, args: Value) -> Value {
        let response = self.request("tools/call", json!({"name": tool, "arguments": args}));
        let result = response["result"].clone();
        assert!(result.is_object(), "tools/call {tool} gave a JSON-RPC error: {response}");
        if BARE_RESULT_TOOLS.contains(&tool) && result["isError"] == false {
            // The contract's non-object result, rendered as the Python SDK renders it (issue 50
            // item 11): a list is one text block per item, a boolean its JSON.
            let texts: Vec<Value> = result["content"].as_array().unwrap().iter().map(|c| c["text"].clone()).collect();
            let expected: Vec<Value> = match &result["structuredContent"]["result"] {
                Value::Array(items) => items.clone(),
                other => vec![json!(other.to_string())],
            };
            assert_eq!(texts, expected, "{tool}: text content is not the SDK's rendering of result: {result}");
            return result;
        }
        assert_eq!(result["content"].as_array().map(Vec::len), Some(1), "one text block: {result}");
        // Clients that pass only `content` to the model see the data: the text block is the
        // JSON serialisation of structuredContent, on success and on error.
        let text = result["content"][0]["text"].as_str().unwrap();
        let parsed: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{tool}: text block is not JSON ({e}): {text}"));
        assert_eq!(parsed, result["structuredContent"], "{tool}: text block differs from structuredContent");
        result
    }

    pub(crate) fn ok(&mut self, tool: &str, args: Value) -> Value {
        let result = self.call(tool, args.clone());
        assert_eq!(result["isError"], false, "{tool}({args}) failed: {result}");
        assert!(result["structuredContent"].is_object());
        result["structuredContent"].clone()
    }

    fn err(&mut self, tool: &str, args: Value) -> Value {
        let result = self.call(tool, args.clone());
        assert_eq!(result["isError"], true, "{tool}({args}) should fail: {result}");
        let error = result["structuredContent"]["error"].clone();
        for key in ["code", "message", "retryable", "remediation"] {
            assert!(!error[key].is_null(), "typed error lacks {key}: {error}");
        }
        error
    }

    /// Closes stdin and waits for the exit status.
    fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        wait_exit(&mut self.child, Duration::from_secs(20)).expect("server did not exit on stdin EOF")
    }

    fn stderr_text(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_exit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

fn bless() -> bool {
    std::env::var("PARAVAULT_BLESS").is_ok_and(|v| v == "1")
}

fn manifest(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn tools_list_matches_the_golden_file() {
    let vault = new_vault();
    let mut server = Server::start(vault.path(), &[]);
    server.initialize();
    let tools = server.tools();
    for tool in &tools {
        let name = tool["name"].as_str().unwrap();
        let a = &tool["annotations"];
        for hint in ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] {
            assert!(a[hint].is_boolean(), "{name} lacks {hint}");
        }
        assert_eq!(a["openWorldHint"], false);
        let risk = &tool["_meta"]["paravault.risk"];
        assert_eq!(risk["local_only"], true, "{name}");
        assert!(risk["egress"].is_string() && risk["approval"].is_string(), "{name}");
        // P.O.W.E.R.'s contract: exactly these three fields, with the same values.
        let power = tool["_meta"]["power.risk"].as_object().unwrap_or_else(|| panic!("{name} lacks power.risk"));
        let mut keys: Vec<&str> = power.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["approval", "egress", "local_only"], "{name}");
        assert_eq!((&power["egress"], &power["approval"], &power["local_only"]), (&risk["egress"], &risk["approval"], &json!(true)));
        assert!(["none", "model_download"].contains(&power["egress"].as_str().unwrap()), "{name}");
        assert!(["none", "caller", "explicit"].contains(&power["approval"].as_str().unwrap()), "{name}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{name}");
        // The typed error is a declared alternative of every output schema.
        assert_eq!(tool["outputSchema"]["properties"]["error"]["required"], json!(["code", "message", "retryable", "remediation"]));
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
        assert_eq!(tool["inputSchema"]["additionalProperties"], false, "{name}: deny_unknown_fields");
        assert!(tool["inputSchema"]["properties"]["vault_path"].is_object(), "{name} takes vault_path");
        let input = tool["inputSchema"].to_string();
        assert!(!input.contains("$ref") && !input.contains("$defs"), "{name}: definitions are inlined");
    }
    let categories = &tools.iter().find(|t| t["name"] == "read_sub_index").unwrap()["inputSchema"]["properties"]["category"]["enum"];
    assert_eq!(categories.as_array().unwrap().len(), 6);
    let golden = manifest("tests/golden/tools_list.json");
    let actual = serde_json::to_string_pretty(&json!({"tools": tools})).unwrap() + "\n";
    if bless() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&golden).expect("golden file missing; run with PARAVAULT_BLESS=1");
    assert_eq!(actual, expected, "tools/list changed; review and rerun with PARAVAULT_BLESS=1");
    assert!(server.close().success());
}

fn render_tool_table(tools: &[Value]) -> String {
    let yes = |v: &Value| if v.as_bool() == Some(true) { "yes" } else { "no" };
    let mut out = String::from(
        "| Tool | Read-only | Destructive | Idempotent | Approval | Egress | What it does |\n| --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for tool in tools {
        let a = &tool["annotations"];
        let risk = &tool["_meta"]["paravault.risk"];
        let description = tool["description"].as_str().unwrap_or("");
        // The first sentence: the first ". " after a lowercase letter or digit (not "P.A.R.A. ").
        let bytes = description.as_bytes();
        let cut = (1..bytes.len().saturating_sub(1))
            .find(|&i| bytes[i] == b'.' && bytes[i + 1] == b' ' && (bytes[i - 1].is_ascii_lowercase() || bytes[i - 1].is_ascii_digit()))
            .unwrap_or(description.len());
        let first = description[..cut].trim_end_matches('.');
        out.push_str(&format!(
            "| `{}` | {} | {} | {} | {} | {} | {}. |\n",
            tool["name"].as_str().unwrap(),
            yes(&a["readOnlyHint"]),
            yes(&a["destructiveHint"]),
            yes(&a["idempotentHint"]),
            risk["approval"].as_str().unwrap_or(""),
            risk["egress"].as_str().unwrap_or(""),
            first.replace('|', "\\|")
        ));
    }
    out
}

#[test]
fn readme_tool_table_is_generated_from_the_live_server() {
    let vault = new_vault();
    let mut server = Server::start(vault.path(), &[]);
    server.initialize();
    let table = render_tool_table(&server.tools());
    let readme_path = manifest("README.md");
    let readme = std::fs::read_to_string(&readme_path).unwrap();
    let (begin, end) = ("<!-- tools:begin -->\n", "<!-- tools:end -->");
    let start = readme.find(begin).expect("README lacks <!-- tools:begin -->") + begin.len();
    let stop = readme.find(end).expect("README lacks <!-- tools:end -->");
    if bless() && readme[start..stop] != table {
        std::fs::write(&readme_path, format!("{}{table}{}", &readme[..start], &readme[stop..])).unwrap();
        return;
    }
    assert_eq!(readme[start..stop], table, "README tool table is stale; rerun with PARAVAULT_BLESS=1");
}

#[test]
fn every_tool_round_trips() {
    let vault = new_vault();
    let root = vault.path().to_path_buf();
    let mut server = Server::start(&root, &[]);
    let init = server.initialize();
    assert!(init["instructions"].as_str().unwrap().contains("get_server_info first"));
    // Resources and prompts as P.O.W.E.R.'s SDK server advertises them (their lists are empty).
    assert_eq!(init["capabilities"], json!({"tools": {}, "resources": {}, "prompts": {}}));
    let tools = server.tools();

    let info = server.ok("get_server_info", json!({}));
    assert_eq!(info["mcp"]["tool_count"], tools.len());
    assert_eq!(info["mcp"]["transport"], "stdio");
    assert_eq!(info["mcp"]["read_only"], false);
    let catalog_sha = paravault::write::sha256_hex(paravault::mcp::canonical_json(&json!(tools)).as_bytes());
    assert_eq!(info["mcp"]["tool_catalog_sha256"], catalog_sha);

    let lint = server.ok("lint_vault", json!({}));
    assert_eq!(lint["blocking"], false);
    server.ok("generate_index", json!({}));
    assert_eq!(server.err("read_sub_index", json!({"category": "03_Resources"}))["code"], "catalog_missing");
    assert_eq!(server.err("ensure_sub_index", json!({"category": "03_Resources"}))["code"], "catalog_missing");
    let bad = server.err("read_sub_index", json!({"category": "Elsewhere"}));
    assert_eq!(bad["code"], "invalid_argument");

    let receipt = server.ok(
        "ingest_note",
        json!({"name": "03_Resources/mcp-note", "note_type": "Resource", "title": "MCP note", "description": "Written over MCP",
               "content": "# MCP note\n\nCafé body text.\n", "tags": ["mcp"], "idempotency_key": "k-1"}),
    );
    assert_eq!(receipt["path"], "03_Resources/mcp-note.md");
    let seq = receipt["seq"].as_u64().unwrap();
    let again = server.err(
        "ingest_note",
        json!({"name": "03_Resources/mcp-note", "note_type": "Resource", "title": "MCP note", "description": "x", "content": "y"}),
    );
    assert_eq!(again["code"], "already_exists");

    let page = server.ok("ensure_sub_index", json!({"category": "03_Resources", "page": 1}));
    assert!(page["content"].as_str().unwrap().contains("mcp-note"), "{page}");
    let page = server.ok("read_sub_index", json!({"category": "03_Resources"}));
    assert_eq!(page["page"], 1);
    let missing = server.err("read_sub_index", json!({"category": "03_Resources", "page": 9}));
    assert_eq!(missing["code"], "catalog_missing");

    let note = server.ok("read_note", json!({"path": "03_Resources/mcp-note.md"}));
    assert_eq!(note["eof"], true);
    let text = note["content"].as_str().unwrap().to_string();
    let new_text = text.replace("Café body text.", "Edited body text.");
    let proposal = server
        .ok("propose_memory_change", json!({"path": "03_Resources/mcp-note.md", "content": new_text, "expected_sha256": note["sha256"]}));
    let denied = server.err("apply_memory_change", json!({"proposal": proposal, "approved": false}));
    assert_eq!(denied["code"], "approval_required");
    let applied = server.ok("apply_memory_change", json!({"proposal": proposal, "approved": true}));
    assert_eq!(applied["path"], "03_Resources/mcp-note.md");
    let stale = server
        .err("propose_memory_change", json!({"path": "03_Resources/mcp-note.md", "content": text, "expected_sha256": note["sha256"]}));
    assert_eq!(stale["code"], "precondition_failed");

    let synth = server.ok(
        "synthesize_session",
        json!({"name": "06_Daily_Logs/2026-01-01_session", "title": "Session", "description": "A session",
               "content": "Did things.", "related": ["03_Resources/mcp-note.md"]}),
    );
    assert!(synth["seq"].as_u64().unwrap() > seq);

    let state = server.ok("validate_memory_state", json!({}));
    assert_eq!(state["result"], true, "the contract's boolean: {state}");
    assert_eq!(state["blocking"], json!([]));
    let history = server.ok("read_memory_history", json!({"limit": 10}));
    assert!(history["receipts"].as_array().unwrap().len() >= 3, "{history}");
    let after = server.ok("read_memory_history", json!({"after_seq": seq}));
    assert!(after["receipts"].as_array().unwrap().iter().all(|r| r["seq"].as_u64().unwrap() > seq));
    assert_eq!(server.err("read_memory_history", json!({"limit": 0}))["code"], "invalid_argument");
    let md = server.ok("check_markdown_tool", json!({}));
    assert!(md["files_checked"].as_u64().unwrap() >= 1);

    // Typed invalid_argument for schema violations, before any engine call.
    let unknown_field = server.err("lint_vault", json!({"bogus": 1}));
    assert_eq!(unknown_field["code"], "invalid_argument");
    assert_eq!(unknown_field["retryable"], false);
    // The refusal names the field, and the tool's one accepted argument, the surface's vault_path.
    let message = unknown_field["message"].as_str().unwrap();
    assert!(message.contains("`bogus`") && message.contains("`vault_path`"), "{message}");
    assert_eq!(server.err("ingest_note", json!({"name": "x"}))["code"], "invalid_argument");
    // Search answers with the untrusted envelope; dense modes fail closed with a typed error.
    let found = server.ok("search_vault_tool", json!({"query": "note", "search_mode": "fts"}));
    assert_eq!(found["trust"], "untrusted");
    assert_eq!(server.err("search_vault_tool", json!({"query": "note", "search_mode": "semantic"}))["code"], "dense_index_unavailable");
    // P.O.W.E.R.'s lexical modes answer without dense vectors and say what ran.
    for (mode, actual) in [("vector", "fts"), ("hybrid", "fts"), ("graph_assisted", "graph_assisted")] {
        let lexical = server.ok("search_vault_tool", json!({"query": "note", "search_mode": mode}));
        assert_eq!((lexical["mode"].as_str(), lexical["actual_mode"].as_str()), (Some(mode), Some(actual)), "{lexical}");
        assert!(lexical["fallback_reason"].as_str().unwrap().starts_with("dense_index_unavailable: "), "{lexical}");
        assert_eq!(lexical["results"][0]["source"]["path"], found["results"][0]["source"]["path"]);
    }
    // get_server_info's requires_dense_index lists exactly the modes that fail without one.
    let search = &info["capabilities"]["search"];
    assert_eq!(search["requires_dense_index"], json!(["semantic"]));
    for mode in search["canonical_modes"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()) {
        let needs = search["requires_dense_index"].as_array().unwrap().iter().any(|m| m == mode);
        let result = server.call("search_vault_tool", json!({"query": "note", "search_mode": mode}));
        // reranked needs no dense index (it reranks BM25's candidates) but a pinned cross-encoder,
        // which the shipped policy does not have yet: it fails closed, saying so.
        let unpinned = mode == "reranked";
        assert_eq!(result["isError"], needs || unpinned, "{mode}: {result}");
        if unpinned {
            assert_eq!(result["structuredContent"]["error"]["code"], "reranker_unavailable", "{result}");
        }
    }
    let context = server.ok("get_memory_context", json!({"query": "note"}));
    assert_eq!(context["result"][0], "03_Resources/mcp-note.md", "the contract's list of paths: {context}");
    assert_eq!(context["notes"][0]["path"], context["result"][0]);
    assert_eq!(receipt["search_mode"], "fts", "an FTS-only vault: the write was not embedded");
    // Unknown tool: a JSON-RPC error, as rmcp's router answers.
    let response = server.request("tools/call", json!({"name": "no_such_tool", "arguments": {}}));
    assert_eq!(response["error"]["code"], -32602);
    assert!(server.close().success());
}

#[test]
fn read_note_never_splits_a_character_and_is_bounded() {
    let vault = new_vault();
    let mut server = Server::start(vault.path(), &[]);
    server.initialize();
    server.ok(
        "ingest_note",
        json!({"name": "03_Resources/utf8", "note_type": "Resource", "title": "UTF-8", "description": "Multibyte text",
               "content": "é€😀 ".repeat(50)}),
    );
    let whole = std::fs::read_to_string(vault.path().join("03_Resources/utf8.md")).unwrap();
    let mut offset = 0;
    let mut assembled = String::new();
    let mut sha = None;
    loop {
        let slice = server.ok("read_note", json!({"path": "03_Resources/utf8.md", "offset": offset, "max_bytes": 7}));
        let n = slice["bytes_returned"].as_u64().unwrap() as usize;
        assert!(n <= 7 && n > 0);
        assert_eq!(slice["content"].as_str().unwrap().len(), n);
        assembled.push_str(slice["content"].as_str().unwrap());
        sha.get_or_insert(slice["sha256"].clone());
        assert_eq!(Some(&slice["sha256"]), sha.as_ref(), "sha256 is of the whole file");
        offset += n;
        if slice["eof"] == true {
            assert_eq!(slice["total_bytes"].as_u64().unwrap() as usize, whole.len());
            break;
        }
    }
    assert_eq!(assembled, whole);
    let body = whole.find('é').unwrap();
    assert_eq!(server.err("read_note", json!({"path": "03_Resources/utf8.md", "offset": body + 1}))["code"], "invalid_argument");
    assert_eq!(server.err("read_note", json!({"path": "03_Resources/utf8.md", "max_bytes": 1_000_000}))["code"], "invalid_argument");
    assert_eq!(server.err("read_note", json!({"path": "../etc/passwd"}))["code"], "path_refused");
    assert_eq!(server.err("read_note", json!({"path": ".paravault/receipts.jsonl"}))["code"], "note_unreadable");
    assert_eq!(server.err("read_note", json!({"path": "03_Resources/none.md"}))["code"], "note_unreadable");
}

#[test]
fn read_only_mode_advertises_and_accepts_only_read_only_tools() {
    let vault = new_vault();
    let mut server = Server::start(vault.path(), &["--read-only"]);
    server.initialize();
    let tools = server.tools();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(tools.iter().all(|t| t["annotations"]["readOnlyHint"] == true), "{names:?}");
    for expected in ["get_server_info", "lint_vault", "read_sub_index", "validate_memory_state", "read_memory_history", "read_note"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    for expected in ["search_vault_tool", "get_memory_context", "check_markdown_tool", "suggest_related_tool", "rot_audit"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    let writes = [
        "ingest_note",
        "apply_memory_change",
        "generate_index",
        "propose_memory_change",
        "archive_notes",
        "heal_frontmatter_tool",
        "handoff_work",
        "infra_action",
        "sync_vault",
        "ensure_sub_index",
        "synthesize_session",
    ];
    for write in writes {
        assert!(!names.contains(&write));
        // Even a dry run of a destructive tool is refused: the tool does not exist here.
        let response = server.request("tools/call", json!({"name": write, "arguments": {"dry_run": true}}));
        assert_eq!(response["error"]["code"], -32602, "{write}: {response}");
    }
    assert_eq!(names.len() + writes.len(), 23, "every tool is either read-only or refused: {names:?}");
    // The read-only maintenance report runs.
    assert!(server.ok("rot_audit", json!({}))["notes_audited"].as_u64().is_some());
    let info = server.ok("get_server_info", json!({}));
    assert_eq!(info["mcp"]["read_only"], true);
    assert_eq!(info["mcp"]["tool_count"], tools.len());
    let unavailable = info["bootstrap"]["capabilities"]["unavailable"].as_array().unwrap();
    assert!(unavailable.iter().any(|t| t == "archive_notes") && unavailable.len() == 23 - tools.len(), "{unavailable:?}");
}

#[test]
fn discover_and_unknown_methods_then_initialize() {
    let vault = new_vault();
    let mut server = Server::start(vault.path(), &[]);
    // server/discover is a known method of protocol 2026-07-28 (the Python SDK's auto mode uses
    // it): without the stateless request _meta it is invalid params, not method-not-found.
    let bare = server.request("server/discover", json!({}));
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    // With the stateless envelope (what the Python SDK 2.x sends) rmcp answers it.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
                      "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}});
    let discovered = server.request("server/discover", json!({"_meta": meta}));
    assert!(discovered["result"]["supportedVersions"].as_array().unwrap().iter().any(|v| v == "2025-06-18"), "{discovered}");
    server.initialize();
    for method in ["paravault/nonexistent", "server/unknown", "tools/discover", "resources/subscribe"] {
        let unknown = server.request(method, json!({}));
        assert_eq!(unknown["error"]["code"], -32601, "{method}: {unknown}");
    }
    assert_eq!(server.request("server/discover", json!({}))["error"]["code"], -32602);
    assert!(!server.tools().is_empty());
    assert!(server.close().success());
    // A stateless (2026-07-28) session: an unknown method in the envelope is method-not-found too.
    let mut server = Server::start(vault.path(), &[]);
    let unknown = server.request("paravault/nonexistent", json!({"_meta": meta}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
}

#[test]
fn rate_limit_charges_only_valid_calls() {
    let vault = new_vault();
    std::fs::write(vault.path().join(".paravault/policy.yaml"), "rate_limits: {lint_vault: 2}\n").unwrap();
    let mut server = Server::start(vault.path(), &[]);
    server.initialize();
    for _ in 0..3 {
        assert_eq!(server.err("lint_vault", json!({"nope": true}))["code"], "invalid_argument");
    }
    assert_eq!(server.err("lint_vault", json!({"vault_path": "/"}))["code"], "vault_boundary");
    server.ok("lint_vault", json!({}));
    server.ok("lint_vault", json!({}));
    let limited = server.err("lint_vault", json!({}));
    assert_eq!(limited["code"], "rate_limited");
    assert_eq!(limited["retryable"], true);
    assert!(limited["message"].as_str().unwrap().contains("retry after"), "{limited}");
    // Other tools have their own keys.
    server.ok("validate_memory_state", json!({}));
}

#[test]
fn rate_limits_from_policy_apply_to_the_maintenance_tools() {
    let vault = new_vault();
    std::fs::write(vault.path().join(".paravault/policy.yaml"), "rate_limits: {rot_audit: 1, archive_notes: 1}\n").unwrap();
    let mut server = Server::start(vault.path(), &[]);
    server.initialize();
    server.ok("rot_audit", json!({}));
    assert_eq!(server.err("rot_audit", json!({}))["code"], "rate_limited");
    // A refused live run (no approval) passed validation, so it is charged.
    assert_eq!(server.err("archive_notes", json!({"dry_run": false}))["code"], "approval_required");
    assert_eq!(server.err("archive_notes", json!({}))["code"], "rate_limited");
    server.ok("heal_frontmatter_tool", json!({}));
}

#[test]
fn vault_path_must_be_the_configured_root_and_errors_hide_it() {
    let vault = new_vault();
    let root = vault.path().to_path_buf();
    let mut server = Server::start(&root, &[]);
    server.initialize();
    server.ok("lint_vault", json!({"vault_path": root.to_str().unwrap()}));
    server.ok("lint_vault", json!({"vault_path": format!("{}/./00_Inbox/..", root.display())}));
    let other = tempfile::tempdir().unwrap();
    for bad in [other.path().to_str().unwrap().to_string(), format!("{}/00_Inbox", root.display()), "/nonexistent/vault".into()] {
        let error = server.err("get_server_info", json!({"vault_path": bad}));
        assert_eq!(error["code"], "vault_boundary");
    }
    // Error messages name vault-relative paths only.
    let response = server
        .request("tools/call", json!({"name": "propose_memory_change", "arguments": {"path": "03_Resources/../../x.md", "content": "x"}}));
    assert_eq!(response["result"]["isError"], true);
    assert!(!response.to_string().contains(root.to_str().unwrap()), "{response}");
}

#[test]
fn stdin_eof_exits_zero() {
    let vault = new_vault();
    let mut server = Server::start(vault.path(), &[]);
    server.initialize();
    let status = server.close();
    assert_eq!(status.code(), Some(0));
}

/// stdin ends right after a burst of requests whose answers overflow the stdout pipe, and the
/// client reads nothing for a while: the server writes every answer before it exits
/// (`Framing::drain`; with a drain of zero, frames still queued are lost and this fails).
#[test]
fn every_answer_reaches_stdout_when_stdin_ends_right_after_the_requests() {
    let vault = new_vault();
    let mut child = Command::new(BIN)
        .arg("--vault")
        .arg(vault.path())
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env("PARAVAULT_STDIO_WATCHDOG", "0")
        .spawn()
        .unwrap();
    let mut input = String::new();
    input.push_str(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "paravault-tests", "version": "1"}}})
        .to_string(),
    );
    input.push('\n');
    input.push_str("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
    const LISTS: u64 = 12;
    for id in 1..=LISTS {
        input.push_str(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {}}).to_string());
        input.push('\n');
    }
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    // The answers fill the pipe (64 KiB) long before they are all written; the server must
    // wait for this reader instead of exiting with the rest queued.
    std::thread::sleep(Duration::from_millis(1500));
    let mut ids = Vec::new();
    let mut bytes = 0;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        bytes += line.len();
        let message: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("a broken frame ({e}): {line:.200}"));
        assert!(message.get("error").is_none(), "{message}");
        ids.push(message["id"].as_u64().unwrap());
    }
    assert_eq!(child.wait().unwrap().code(), Some(0));
    ids.sort_unstable();
    assert_eq!(ids, (0..=LISTS).collect::<Vec<_>>(), "every request answered once");
    assert!(bytes > 4 * 65536, "the answers must overflow the pipe for this test to mean anything: {bytes} bytes");
}

fn wait_pid_gone(pid: u32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) if stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')) => return true,
            Ok(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    false
}

#[test]
fn watchdog_exits_when_the_parent_dies_but_stdin_stays_open() {
    let vault = new_vault();
    let err_file = vault.path().join("watchdog.err");
    // `sh` starts the server in the background, prints its pid and exits; this test keeps the
    // server's stdin pipe open, so only the watchdog can end it.
    let mut shell = Command::new("sh")
        .arg("-c")
        .arg(r#"exec 3<&0; "$0" --vault "$1" mcp <&3 3<&- >/dev/null 2>"$2" & echo $!; sleep 0.5; exit 0"#)
        .arg(BIN)
        .arg(vault.path())
        .arg(&err_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let _held_stdin = shell.stdin.take().unwrap();
    let mut pid_line = String::new();
    BufReader::new(shell.stdout.take().unwrap()).read_line(&mut pid_line).unwrap();
    let pid: u32 = pid_line.trim().parse().unwrap();
    shell.wait().unwrap();
    let started = Instant::now();
    assert!(wait_pid_gone(pid, Duration::from_secs(15)), "server {pid} still running after its parent exited");
    let elapsed = started.elapsed();
    let stderr = std::fs::read_to_string(&err_file).unwrap();
    let event: Value = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["event"] == "watchdog_exit")
        .unwrap_or_else(|| panic!("no watchdog_exit event on stderr: {stderr}"));
    assert_eq!(event["reason"], "reparented");
    assert!(elapsed < Duration::from_secs(10), "took {elapsed:?}");
}

#[test]
fn watchdog_follows_parent_pid_and_can_be_disabled() {
    let vault = new_vault();
    let mut parent = Command::new("sleep").arg("60").spawn().unwrap();
    let mut server = Server::start(vault.path(), &["--parent-pid", &parent.id().to_string()]);
    server.initialize();
    parent.kill().unwrap();
    parent.wait().unwrap();
    let status = wait_exit(&mut server.child, Duration::from_secs(15)).expect("server outlived --parent-pid");
    assert!(status.success());
    std::thread::sleep(Duration::from_millis(200));
    let stderr = server.stderr_text();
    assert!(stderr.contains(r#""event":"watchdog_exit""#) && stderr.contains("parent_pid_exited"), "{stderr}");

    // PARAVAULT_STDIO_WATCHDOG=0: the same situation does not end the server.
    let mut parent = Command::new("sleep").arg("60").spawn().unwrap();
    let mut child = Command::new(BIN)
        .arg("--vault")
        .arg(vault.path())
        .args(["mcp", "--parent-pid", &parent.id().to_string()])
        .env("PARAVAULT_STDIO_WATCHDOG", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    parent.kill().unwrap();
    parent.wait().unwrap();
    assert!(wait_exit(&mut child, Duration::from_secs(4)).is_none(), "disabled watchdog still fired");
    drop(child.stdin.take());
    assert!(wait_exit(&mut child, Duration::from_secs(20)).is_some_and(|s| s.success()));
}

/// Writes a note file directly (the server reads the vault as it finds it).
fn write_note(vault: &Path, rel: &str, frontmatter: &str, body: &str) {
    let path = vault.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, format!("---\n{frontmatter}---\n\n{body}")).unwrap();
}

fn meta(note_type: &str, title: &str, extra: &str) -> String {
    format!("type: {note_type}\ntitle: {title}\ndescription: About {title}\ntimestamp: 2026-01-01T00:00:00Z\n{extra}")
}

#[test]
fn get_server_info_is_the_manifest_report_with_doctor_v1_fields() {
    let vault = new_vault();
    let root = vault.path().to_path_buf();
    // Egress allow-public in the policy: the probe must still never download.
    std::fs::write(root.join(".paravault/policy.yaml"), "egress: allow-public\n").unwrap();
    let cache = tempfile::tempdir().unwrap();
    let unreachable = Path::new("http://127.0.0.1:9");
    let env = [("HF_HUB_CACHE", cache.path()), ("HF_ENDPOINT", unreachable), ("PARAVAULT_MODEL_DIR", Path::new(""))];
    let mut server = Server::start_with_env(&root, &[], &env);
    server.initialize();
    let before = server.ok("get_server_info", json!({}));
    assert_eq!(before["vault"]["index_state"], "missing");
    assert_eq!(before["status"], "degraded");
    assert_eq!(before["exit_code"], 1);
    server.ok(
        "ingest_note",
        json!({"name": "03_Resources/alpha", "note_type": "Resource", "title": "Alpha", "description": "A note",
               "content": "# Alpha\n\n## One\n\nFirst section.\n\n## Two\n\nSecond section.\n"}),
    );
    let info = server.ok("get_server_info", json!({}));
    for field in [
        "schema_version",
        "command",
        "status",
        "exit_code",
        "runtime",
        "configuration",
        "capabilities",
        "embedding",
        "vault",
        "issues",
        "bootstrap",
        "mcp",
    ] {
        assert!(!info[field].is_null(), "doctor report v1 lacks {field}: {info}");
    }
    assert_eq!((info["schema_version"].as_u64(), info["command"].as_str()), (Some(1), Some("doctor")));
    let v = &info["vault"];
    assert_eq!(v["index_state"], "active_generation");
    assert_eq!((v["exists"].as_bool(), v["is_directory"].as_bool()), (Some(true), Some(true)));
    assert!(v["indexed_notes"].as_u64().unwrap() >= 1 && v["indexed_notes"] == v["scanned_notes"], "{v}");
    // The ingested note alone has two sections, so at least two chunk documents.
    assert!(v["indexed_chunks"].as_u64().unwrap() >= 2, "{v}");
    assert_eq!(v["vault_id"].as_str().unwrap().len(), 16);
    assert!(v["active_generation"].is_string() && v["source_snapshot_hash"].is_string(), "{v}");
    assert_eq!(info["bootstrap"]["vault"]["source_revision"], v["source_snapshot_hash"]);
    let interfaces = &info["capabilities"]["interfaces"];
    assert!(interfaces["cli_commands"].as_array().unwrap().iter().any(|c| c == "rot-audit"));
    assert_eq!(interfaces["mcp_tools"].as_array().unwrap().len(), 23);
    assert_eq!(interfaces["mcp_tool_contracts"].as_array().unwrap().len(), 23);
    let mcp = &info["mcp"];
    assert_eq!(mcp["tool_count"], 23);
    assert_eq!(mcp["preferred_protocol"], "2026-07-28");
    assert!(mcp["sdk_version"].as_str().unwrap().starts_with("rmcp "));
    assert_eq!(mcp["tool_catalog_sha256"].as_str().unwrap().len(), 64);
    // No model is loaded by default, and doctor report v1's issue says so.
    assert_eq!(info["embedding"]["binding"], "not_requested");
    assert_eq!(info["embedding"]["probe_requested"], false);
    let codes: Vec<&str> = info["issues"].as_array().unwrap().iter().filter_map(|i| i["code"].as_str()).collect();
    assert!(codes.contains(&"embedding_binding_not_requested"), "{codes:?}");
    assert_eq!(info["runtime"]["power_framework"], "3.7.11");
    // The configured root is vault.path (doctor report v1), and appears nowhere else.
    assert_eq!(info["vault"]["path"], root.canonicalize().unwrap().display().to_string());
    let mut elsewhere = info.clone();
    elsewhere["vault"]["path"] = Value::Null;
    assert!(!elsewhere.to_string().contains(root.to_str().unwrap()), "no other absolute vault path in the report");

    // probe_provider=true: offline only; the missing model is an issue, nothing is downloaded.
    let probed = server.ok("get_server_info", json!({"probe_provider": true}));
    assert_eq!(probed["embedding"]["probe_requested"], true);
    assert_eq!(probed["embedding"]["binding"], "not_verified", "{}", probed["embedding"]);
    let probed_codes: Vec<&str> = probed["issues"].as_array().unwrap().iter().filter_map(|i| i["code"].as_str()).collect();
    assert!(!probed_codes.contains(&"embedding_binding_not_requested"), "{probed_codes:?}");
    assert!(probed["embedding"]["probe_seconds"].is_number());
    let issue = probed["issues"].as_array().unwrap().iter().find(|i| i["code"] == "embedding_model_unavailable").expect("probe issue");
    assert!(issue["message"].as_str().unwrap().contains("not downloaded"), "{issue}");
    assert_eq!(std::fs::read_dir(cache.path()).unwrap().count(), 0, "the probe wrote into the model cache");
    assert_eq!(server.err("get_server_info", json!({"probe_provider": "yes"}))["code"], "invalid_argument");
}

#[test]
fn suggest_related_tool_keyword_and_typed_errors() {
    let vault = new_vault();
    let mut server = Server::start(vault.path(), &[]);
    server.initialize();
    for (name, title, tags) in [
        ("rust-async", "Rust async runtimes", json!(["rust", "async"])),
        ("rust-executors", "Rust async executors", json!(["rust", "async"])),
        ("tomatoes", "Growing tomatoes", json!(["garden"])),
    ] {
        server.ok(
            "ingest_note",
            json!({"name": format!("03_Resources/{name}"), "note_type": "Resource", "title": title, "description": title,
                   "content": format!("# {title}\n\nNotes about {title}.\n"), "tags": tags}),
        );
    }
    let found =
        server.ok("suggest_related_tool", json!({"target_path": "03_Resources/rust-async.md", "method": "keyword", "max_results": 2}));
    assert_eq!(found["method"], "keyword");
    assert_eq!(found["target"], "03_Resources/rust-async.md");
    let related = found["related"].as_array().unwrap();
    assert!(!related.is_empty() && related.len() <= 2, "{found}");
    assert_eq!(related[0]["path"], "03_Resources/rust-executors.md", "{found}");
    assert!(related.iter().all(|r| r["path"] != "03_Resources/rust-async.md"), "never itself: {found}");
    assert_eq!((found["requested_method"].as_str(), found["fallback_reason"].is_null()), (Some("keyword"), true));
    assert_eq!(found["target_source"], "argument");
    // The default method is semantic (P.O.W.E.R.'s default); without a dense index it reports a
    // labelled fallback to keyword, as the contract says.
    let dense = server.ok("suggest_related_tool", json!({"target_path": "03_Resources/rust-async.md", "max_results": 2}));
    assert_eq!((dense["method"].as_str(), dense["requested_method"].as_str()), (Some("keyword"), Some("semantic")), "{dense}");
    assert!(dense["fallback_reason"].as_str().unwrap().starts_with("dense_index_unavailable: "), "{dense}");
    assert_eq!(dense["related"], found["related"]);
    // Without target_path: the most recently changed note (newest OKF timestamp; the last
    // ingested note here, ingest stamps the time of the write).
    let newest = server.ok("suggest_related_tool", json!({"method": "keyword", "target_path": null}));
    assert_eq!((newest["target"].as_str(), newest["target_source"].as_str()), (Some("03_Resources/tomatoes.md"), Some("newest_timestamp")));
    let target = "03_Resources/rust-async.md";
    assert_eq!(server.err("suggest_related_tool", json!({"target_path": target, "method": "fuzzy"}))["code"], "invalid_argument");
    assert_eq!(
        server.err("suggest_related_tool", json!({"target_path": target, "method": "keyword", "max_results": 0}))["code"],
        "invalid_argument"
    );
    assert_eq!(
        server.err("suggest_related_tool", json!({"target_path": target, "method": "keyword", "max_results": 21}))["code"],
        "invalid_argument"
    );
    assert_eq!(
        server.err("suggest_related_tool", json!({"target_path": "03_Resources/none.md", "method": "keyword"}))["code"],
        "invalid_argument"
    );
    assert_eq!(server.err("suggest_related_tool", json!({"target_path": "../etc/passwd.md", "method": "keyword"}))["code"], "path_refused");
    // A vault without notes has no default target: a typed error naming the parameter.
    let empty = new_vault();
    for starter in ["00_Inbox/welcome.md", "01_Projects/projects-overview.md", "PROTOCOLS/agent-protocol.md"] {
        std::fs::remove_file(empty.path().join(starter)).unwrap();
    }
    let mut server = Server::start(empty.path(), &[]);
    server.initialize();
    let none = server.err("suggest_related_tool", json!({"method": "keyword"}));
    assert_eq!(none["code"], "invalid_argument");
    assert!(none["message"].as_str().unwrap().contains("target_path"), "{none}");
}

#[test]
fn rot_audit_reports_and_fails_typed() {
    let vault = new_vault();
    let root = vault.path();
    let body = "A body that is long enough to not count as trivial in the audit report.\n";
    write_note(root, "03_Resources/graph-a.md", &meta("Resource", "Graph memory design", ""), body);
    write_note(root, "03_Resources/graph-b.md", &meta("Resource", "Graph memory design notes", ""), body);
    write_note(root, "03_Resources/expired.md", &meta("Resource", "Expired plan", "expiry: 2000-01-01\n"), body);
    write_note(root, "03_Resources/tiny.md", &meta("Resource", "Tiny", ""), "Short.\n");
    let mut server = Server::start(root, &[]);
    server.initialize();
    let report = server.ok("rot_audit", json!({}));
    assert!(report["notes_audited"].as_u64().unwrap() >= 4, "{report}");
    let redundant = report["redundant"].as_array().unwrap();
    assert!(redundant.iter().any(|p| p["a"] == "03_Resources/graph-a.md" && p["b"] == "03_Resources/graph-b.md"), "{report}");
    assert!(report["outdated"].as_array().unwrap().iter().any(|o| o["path"] == "03_Resources/expired.md"), "{report}");
    assert!(report["trivial"].as_array().unwrap().iter().any(|t| t["path"] == "03_Resources/tiny.md"), "{report}");
    assert_eq!(report["skipped"], json!([]));
    // Link checks without approval are skipped with the reason, not run.
    let skipped = server.ok("rot_audit", json!({"allow_link_rot": true}));
    assert!(skipped["skipped"].as_array().unwrap().iter().any(|s| s["section"] == "link_rot"), "{skipped}");
    // No LLM is configured: that section is reported as not configured, the audit still runs.
    let llm = server.ok("rot_audit", json!({"allow_remote_llm": true, "extended": true, "approved": true}));
    let section = llm["skipped"].as_array().unwrap().iter().find(|s| s["section"] == "semantic_contradictions").expect("skipped");
    assert!(section["reason"].as_str().unwrap().starts_with("not_configured"), "{llm}");
    assert_eq!(llm["redundant"], report["redundant"]);
    assert_eq!(server.err("rot_audit", json!({"extended": "yes"}))["code"], "invalid_argument");
    assert_eq!(server.err("rot_audit", json!({"dry_run": true}))["code"], "invalid_argument");
}

#[test]
fn archive_notes_previews_refuses_without_approval_then_moves() {
    let vault = new_vault();
    let root = vault.path();
    let body = "Kept for the record.\n";
    write_note(root, "03_Resources/old.md", &meta("Resource", "Old", "status: archived\n"), body);
    write_note(root, "03_Resources/live.md", &meta("Resource", "Live", ""), "See [the old note](old.md).\n");
    let mut server = Server::start(root, &[]);
    server.initialize();
    let preview = server.ok("archive_notes", json!({}));
    assert_eq!(preview["dry_run"], true);
    assert_eq!(
        preview["moves"],
        json!([{"from": "03_Resources/old.md", "to": "04_Archive/03_Resources/old.md", "reason": "status archived"}])
    );
    assert_eq!(preview["link_rewrites"].as_array().unwrap().len(), 1, "{preview}");
    assert!(preview.get("receipt").is_none());
    assert!(root.join("03_Resources/old.md").is_file(), "a dry run moves nothing");

    for args in [json!({"dry_run": false}), json!({"dry_run": false, "approved": false})] {
        let refused = server.err("archive_notes", args);
        assert_eq!(refused["code"], "approval_required");
        assert!(refused["remediation"].as_str().unwrap().contains("approved=true"));
    }
    assert!(root.join("03_Resources/old.md").is_file(), "a refused live run moves nothing");
    assert!(!root.join("04_Archive/03_Resources").exists());

    let done = server.ok("archive_notes", json!({"dry_run": false, "approved": true}));
    assert_eq!(done["dry_run"], false);
    assert!(done["receipt"]["seq"].as_u64().is_some(), "{done}");
    assert!(!root.join("03_Resources/old.md").exists());
    let moved = std::fs::read_to_string(root.join("04_Archive/03_Resources/old.md")).unwrap();
    assert!(moved.contains("status: archived"));
    let live = std::fs::read_to_string(root.join("03_Resources/live.md")).unwrap();
    assert!(live.contains("../04_Archive/03_Resources/old.md"), "{live}");
    assert_eq!(server.ok("validate_memory_state", json!({}))["result"], true);
    assert_eq!(server.err("archive_notes", json!({"dry_run": "false"}))["code"], "invalid_argument");
}

#[test]
fn heal_frontmatter_previews_refuses_without_approval_then_repairs() {
    let vault = new_vault();
    let root = vault.path();
    let broken = "type: resource\ntitle: Half done\ntimestamp: 2026-01-01T00:00:00Z\n";
    write_note(root, "03_Resources/half.md", broken, "The first paragraph becomes the description.\n");
    let original = std::fs::read_to_string(root.join("03_Resources/half.md")).unwrap();
    let mut server = Server::start(root, &[]);
    server.initialize();
    let preview = server.ok("heal_frontmatter_tool", json!({}));
    assert_eq!(preview["dry_run"], true);
    let note = preview["notes"].as_array().unwrap().iter().find(|n| n["path"] == "03_Resources/half.md").expect("planned repair");
    let fields: Vec<&str> = note["repairs"].as_array().unwrap().iter().map(|r| r["field"].as_str().unwrap()).collect();
    assert!(fields.contains(&"type") && fields.contains(&"description"), "{note}");
    assert_eq!(std::fs::read_to_string(root.join("03_Resources/half.md")).unwrap(), original, "a dry run writes nothing");

    let refused = server.err("heal_frontmatter_tool", json!({"dry_run": false}));
    assert_eq!(refused["code"], "approval_required");
    assert_eq!(std::fs::read_to_string(root.join("03_Resources/half.md")).unwrap(), original);

    let healed = server.ok("heal_frontmatter_tool", json!({"dry_run": false, "approved": true}));
    assert!(healed["receipt"]["seq"].as_u64().is_some(), "{healed}");
    let text = std::fs::read_to_string(root.join("03_Resources/half.md")).unwrap();
    assert!(text.contains("type: \"Resource\"") && text.contains("description: \"The first paragraph"), "{text}");
    let again = server.ok("heal_frontmatter_tool", json!({}));
    assert!(again["notes"].as_array().unwrap().iter().all(|n| n["path"] != "03_Resources/half.md"), "{again}");
    assert_eq!(server.err("heal_frontmatter_tool", json!({"fix": true}))["code"], "invalid_argument");
}

/// The reproduction of issue 16: notes written to disk with a shell while the server runs are
/// seen by the very next call (no sleep): validation, the heal preview (equal to the live run),
/// lint, the lint gate of a write, and search's stale flag.
#[test]
fn outside_edits_while_the_server_runs_are_seen_by_the_next_call() {
    let vault = new_vault();
    let root = vault.path();
    let mut server = Server::start(root, &[]);
    server.initialize();
    assert_eq!(server.ok("validate_memory_state", json!({}))["result"], true);
    server.ok("sync_vault", json!({}));
    for name in ["one", "two"] {
        std::fs::write(root.join(format!("03_Resources/{name}.md")), "---\ntype: resource\ntitle: Half\n---\nA body.\n").unwrap();
    }
    assert_eq!(server.ok("validate_memory_state", json!({}))["result"], false, "invalid notes written outside are seen");
    let lint = server.ok("lint_vault", json!({}));
    let paths: Vec<&str> = lint["findings"].as_array().unwrap().iter().filter_map(|f| f["path"].as_str()).collect();
    assert!(paths.contains(&"03_Resources/one.md") && paths.contains(&"03_Resources/two.md"), "{lint}");
    assert_eq!(lint["computed_from"]["disk_watch"], "watch", "{lint}");
    let preview = server.ok("heal_frontmatter_tool", json!({}));
    let planned: Vec<&str> = preview["notes"].as_array().unwrap().iter().filter_map(|n| n["path"].as_str()).collect();
    assert_eq!(planned.len(), 2, "{preview}");
    let live = server.ok("heal_frontmatter_tool", json!({"dry_run": false, "approved": true}));
    let healed: Vec<&str> = live["notes"].as_array().unwrap().iter().filter_map(|n| n["path"].as_str()).collect();
    assert_eq!(planned, healed, "a preview equals the live run it previews");
    // The lint gate sees a note a person created: linking to it is no broken link.
    write_note(
        root,
        "03_Resources/made-by-hand.md",
        "type: Resource\ntitle: By hand\ndescription: d\ntimestamp: 2026-01-01T00:00:00Z\n",
        "x\n",
    );
    server.ok(
        "ingest_note",
        json!({"name": "03_Resources/linker", "note_type": "Resource", "title": "Linker", "description": "d", "content": "See [[made-by-hand]].\n"}),
    );
    // Search flags a result whose note changed on disk after the generation was published.
    let searched = server.ok("search_vault_tool", json!({"query": "Linker", "search_mode": "fts"}));
    assert!(searched["results"].as_array().is_some_and(|r| !r.is_empty()), "{searched}");
    let linker = root.join("03_Resources/linker.md");
    let text = std::fs::read_to_string(&linker).unwrap();
    std::fs::write(&linker, text.replace("See [[made-by-hand]].", "Linker edited by a person.")).unwrap();
    let searched = server.ok("search_vault_tool", json!({"query": "Linker", "search_mode": "fts"}));
    let hit = searched["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["source"]["path"] == "03_Resources/linker.md")
        .unwrap_or_else(|| panic!("{searched}"));
    assert_eq!(hit["source"]["stale"], true, "{hit}");
}

#[test]
fn handoff_work_packets_over_mcp() {
    let vault = new_vault();
    let mut server = Server::start(vault.path(), &[]);
    server.initialize();
    let created = server.ok(
        "handoff_work",
        json!({"action": "create", "task_id": "t-1", "objective": "Tidy the inbox", "owner": "alice", "idempotency_key": "c-1",
               "scope": ["00_Inbox"]}),
    );
    assert_eq!((created["state"].as_str(), created["revision"].as_u64()), (Some("submitted"), Some(1)), "{created}");
    assert_eq!(created["authority"], "read-only");
    let resume = json!({"action": "resume", "task_id": "t-1", "idempotency_key": "r-1", "expected_revision": 1});
    let working = server.ok("handoff_work", resume.clone());
    assert_eq!((working["state"].as_str(), working["revision"].as_u64()), (Some("working"), Some(2)));
    assert_eq!(server.ok("handoff_work", resume), working, "an idempotent replay returns the original result");
    let stale =
        server.err("handoff_work", json!({"action": "checkpoint", "task_id": "t-1", "idempotency_key": "x-1", "expected_revision": 1}));
    assert_eq!(stale["code"], "revision_conflict");
    let listed = server.ok("handoff_work", json!({"action": "list"}));
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(server.ok("handoff_work", json!({"action": "show", "task_id": "t-1"}))["revision"], 2);
    assert_eq!(server.err("handoff_work", json!({"action": "show", "task_id": "nope"}))["code"], "task_not_found");
    assert_eq!(server.err("handoff_work", json!({"action": "explode"}))["code"], "invalid_argument");
    assert_eq!(server.err("handoff_work", json!({"action": "list", "surprise": 1}))["code"], "invalid_argument");
    assert_eq!(server.err("handoff_work", json!({"action": "show", "task_id": "../x"}))["code"], "invalid_argument");
    assert_eq!(server.err("handoff_work", json!({"action": "list", "vault_path": "/"}))["code"], "vault_boundary");
    // P.O.W.E.R.'s contract has no revision and an optional key: the transition acts on the
    // current revision and is not replayable; nulls are absent arguments.
    let checkpoint = json!({"action": "checkpoint", "task_id": "t-1", "idempotency_key": null, "expected_revision": null});
    let advanced = server.ok("handoff_work", checkpoint.clone());
    assert_eq!((advanced["state"].as_str(), advanced["revision"].as_u64()), (Some("working"), Some(3)), "{advanced}");
    assert_eq!(server.ok("handoff_work", checkpoint)["revision"], 4, "no key: a second call is a second transition");
    let numeric = server.ok("handoff_work", json!({"action": "checkpoint", "task_id": "t-1", "expected_revision": "4"}));
    assert_eq!(numeric["revision"], 5, "an integer sent as digits is read as the integer");
    server.ok("handoff_work", json!({"action": "list", "vault_path": vault.path().to_str().unwrap()}));
}

#[test]
fn infra_action_over_mcp_with_and_without_a_broker() {
    use std::os::unix::net::UnixListener;
    // No broker configured: a blocked result (not a tool error), never a fallback.
    let vault = new_vault();
    let mut server = Server::start_with_env(vault.path(), &[], &[("PARAVAULT_INFRA_SOCKET", Path::new(""))]);
    server.initialize();
    let blocked = server.ok("infra_action", json!({"operation": "status"}));
    assert_eq!(blocked["status"], "blocked");
    assert_eq!(blocked["block"]["reason_code"], "MISSING_EXECUTION_CAPABILITY");
    assert_eq!(server.err("infra_action", json!({"operation": "replicate"}))["code"], "invalid_argument");
    assert_eq!(server.err("infra_action", json!({"operation": "status", "host": "example.org"}))["code"], "invalid_argument");
    assert_eq!(server.err("infra_action", json!({"operation": "status", "target": "a b"}))["code"], "invalid_argument");
    assert_eq!(server.err("infra_action", json!({"operation": "reboot"}))["code"], "invalid_argument");
    drop(server);

    // A real broker on a Unix socket answers with a receipt.
    let sockdir = tempfile::tempdir().unwrap();
    let socket = sockdir.path().join("broker.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let broker = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line).unwrap();
        let request: Value = serde_json::from_str(&line).unwrap();
        let reply = json!({"schema": "power.infra-response.v1", "request_digest": request["request_digest"], "nonce": request["nonce"],
                           "receipt": {"schema": "power.infra-receipt.v1", "run_id": "run_abc", "exit_category": "ok"}});
        (&stream).write_all(format!("{reply}\n").as_bytes()).unwrap();
        request
    });
    let vault = new_vault();
    std::fs::write(
        vault.path().join(".paravault/policy.yaml"),
        format!("infra:\n  broker_socket: '{}'\n  timeout_ms: 5000\n", socket.display()),
    )
    .unwrap();
    let mut server = Server::start(vault.path(), &[]);
    server.initialize();
    let ok = server.ok("infra_action", json!({"operation": "rsync-dry-run", "target": "nas-1", "profile": "nightly"}));
    assert_eq!(ok["status"], "ok", "{ok}");
    assert_eq!(ok["receipt"]["run_id"], "run_abc");
    let request = broker.join().unwrap();
    assert_eq!((request["operation"].as_str(), request["target"].as_str()), (Some("rsync-dry-run"), Some("nas-1")));
    assert!(request.get("vault_path").is_none(), "vault_path never reaches the broker: {request}");
}

#[test]
fn nulls_are_absent_and_integer_digits_are_integers() {
    let vault = new_vault();
    let mut server = Server::start(vault.path(), &[]);
    server.initialize();
    // LLM clients send null for every optional parameter they do not use.
    let receipt = server.ok(
        "ingest_note",
        json!({"name": "03_Resources/nulls", "note_type": "Resource", "title": "Nulls", "description": "Null arguments",
               "content": "# Nulls\n\nOptional parameters sent as null.\n", "resource": null, "tags": null,
               "expected_sha256": null, "idempotency_key": null, "vault_path": null}),
    );
    assert_eq!(receipt["path"], "03_Resources/nulls.md");
    let found = server.ok(
        "search_vault_tool",
        json!({"query": "optional", "max_results": "3", "search_mode": null, "temporal_view": null, "as_of": null, "domain": null,
               "vault_path": null}),
    );
    assert_eq!((found["mode"].as_str(), found["result_count"].as_u64()), (Some("auto"), Some(1)), "{found}");
    server.ok("ensure_sub_index", json!({"category": "03_Resources", "page": null}));
    let page = server.ok("read_sub_index", json!({"category": "03_Resources", "page": "1", "vault_path": null}));
    assert_eq!(page["page"], 1);
    server.ok("read_memory_history", json!({"limit": "5", "after_seq": null}));
    server.ok("sync_vault", json!({"fts_only": null, "accept_dense_loss": null, "force_rebuild": null, "allow_partial": null}));
    server.ok("rot_audit", json!({"extended": null, "allow_link_rot": null, "allow_remote_llm": null, "approved": null}));
    server.ok("archive_notes", json!({"dry_run": null, "approved": null, "vault_path": null}));
    server.ok("get_server_info", json!({"vault_path": null, "probe_provider": null}));
    // What stays refused: a required parameter sent as null, digits that are not an integer, and
    // unknown fields, each by name.
    let missing = server.err("search_vault_tool", json!({"query": null}));
    assert!(missing["message"].as_str().unwrap().contains("query"), "{missing}");
    let bad = server.err("search_vault_tool", json!({"query": "x", "max_results": "three"}));
    assert_eq!(bad["code"], "invalid_argument");
    let unknown = server.err("search_vault_tool", json!({"query": "x", "limit": null, "top_k": 3}));
    assert!(unknown["message"].as_str().unwrap().contains("top_k"), "{unknown}");
}

#[test]
fn domains_scope_search_and_auto_follows_their_priority() {
    let vault = new_vault();
    let root = vault.path();
    std::fs::create_dir_all(root.join(".power")).unwrap();
    std::fs::write(
        root.join(".power/domains.yaml"),
        "version: 1\ndomains:\n  - name: kitchen\n    path: 03_Resources/kitchen\n    rules: [{keywords: [cook], weight: 2}]\n    \
         search_priority: [semantic, graph_assisted, fts]\n",
    )
    .unwrap();
    std::fs::write(
        root.join(".paravault/policy.yaml"),
        "domains:\n  - name: garden\n    path: 02_Areas/garden/\n    search_priority: [fts]\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("03_Resources/kitchen")).unwrap();
    std::fs::create_dir_all(root.join("02_Areas/garden")).unwrap();
    let mut server = Server::start(root, &[]);
    server.initialize();
    for (name, title) in
        [("03_Resources/kitchen/stew", "Beef stew"), ("02_Areas/garden/stew", "Compost stew"), ("03_Resources/stew", "Stew")]
    {
        server.ok(
            "ingest_note",
            json!({"name": name, "note_type": if name.starts_with("02") { "Area" } else { "Resource" }, "title": title,
                   "description": title, "content": format!("# {title}\n\nA stew of things.\n")}),
        );
    }
    let paths = |envelope: &Value| -> Vec<String> {
        envelope["results"].as_array().unwrap().iter().map(|r| r["source"]["path"].as_str().unwrap().to_string()).collect()
    };
    let all = server.ok("search_vault_tool", json!({"query": "stew"}));
    assert_eq!(paths(&all).len(), 3);
    // The registry file's domain: scoped to its folder; auto skips semantic (no dense index),
    // runs graph_assisted (lexically) and says so.
    let kitchen = server.ok("search_vault_tool", json!({"query": "stew", "domain": "kitchen"}));
    assert_eq!(paths(&kitchen), ["03_Resources/kitchen/stew.md"], "{kitchen}");
    assert_eq!(kitchen["actual_mode"], "graph_assisted");
    let reason = kitchen["fallback_reason"].as_str().unwrap();
    assert!(reason.contains("skipped semantic (dense_index_unavailable") && reason.contains("ran graph_assisted"), "{reason}");
    // Without a domain, auto follows the priority of the domain whose rule keywords the query
    // matches ("cook" → kitchen), without scoping to it.
    let routed = server.ok("search_vault_tool", json!({"query": "cook stew"}));
    assert_eq!((paths(&routed).len(), routed["actual_mode"].as_str()), (3, Some("graph_assisted")), "{routed}");
    assert_eq!(server.ok("search_vault_tool", json!({"query": "stew"}))["actual_mode"], "fts", "no rule matched");
    // The policy's domain.
    let garden = server.ok("search_vault_tool", json!({"query": "stew", "domain": "garden", "search_mode": "auto"}));
    assert_eq!((paths(&garden), garden["actual_mode"].as_str()), (vec!["02_Areas/garden/stew.md".to_string()], Some("fts")));
    assert!(garden["fallback_reason"].is_null(), "{garden}");
    // An unknown domain (a raw path prefix included) is a typed error naming the known ones.
    for unknown in ["pantry", "03_Resources"] {
        let error = server.err("search_vault_tool", json!({"query": "stew", "domain": unknown}));
        assert_eq!(error["code"], "invalid_argument");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains("known domains: garden, kitchen") || message.contains("known domains: kitchen, garden"), "{message}");
    }
    drop(server);
    // A malformed registry fails closed, naming the file.
    std::fs::write(root.join(".power/domains.yaml"), "version: 1\ndomains:\n  - name: Bad Name\n    path: x\n").unwrap();
    let mut server = Server::start(root, &[]);
    server.initialize();
    let error = server.err("search_vault_tool", json!({"query": "stew", "domain": "kitchen"}));
    assert_eq!(error["code"], "policy_invalid");
    assert!(error["message"].as_str().unwrap().contains(".power/domains.yaml"), "{error}");
    std::fs::write(root.join(".power/domains.yaml"), "version: 1\ndomains:\n  - name: k\n    path: x\n    search_priority: [qdrant]\n")
        .unwrap();
    let error = server.err("search_vault_tool", json!({"query": "stew", "domain": "k"}));
    assert!(error["message"].as_str().unwrap().contains("qdrant"), "{error}");
}

/// The codes `Error::code()` and the MCP adapter can return, read from their source.
fn codes_in_source() -> Vec<String> {
    let mut codes = Vec::new();
    let error_rs = std::fs::read_to_string(manifest("src/error.rs")).unwrap();
    let body = &error_rs[error_rs.find("pub mod codes {").expect("error::codes")..];
    let body = &body[..body.find("\n}\n").unwrap()];
    // Each row is `pub const NAME: CodeRow = row("code", …)`, the call possibly wrapped by rustfmt.
    for part in body.split(": CodeRow =").skip(1) {
        codes.push(part.split('"').nth(1).unwrap().to_string());
    }
    for file in ["src/mcp/mod.rs", "src/mcp/tools.rs"] {
        let text = std::fs::read_to_string(manifest(file)).unwrap();
        for part in text.split("ToolError::new(\"").skip(1) {
            codes.push(part.split('"').next().unwrap().to_string());
        }
    }
    codes.sort();
    codes.dedup();
    codes
}

#[test]
fn errors_md_documents_every_code() {
    let codes = codes_in_source();
    assert!(codes.len() >= 35 && codes.contains(&"vault_boundary".to_string()) && codes.contains(&"io_error".to_string()), "{codes:?}");
    let doc = std::fs::read_to_string(manifest("docs/errors.md")).unwrap();
    let missing: Vec<&String> = codes.iter().filter(|code| !doc.contains(&format!("| `{code}` |"))).collect();
    assert!(missing.is_empty(), "docs/errors.md lacks a row for {missing:?}");
}

/// One generated cell per parameter fact, from a property's JSON Schema.
fn param_facts(property: &Value) -> (String, String, String) {
    // `anyOf` options (schemars' optional enums) count as one property with their union.
    let options: Vec<&Value> = match property["anyOf"].as_array() {
        Some(options) => options.iter().collect(),
        None => vec![property],
    };
    let name_of =
        |t: &str, p: &Value| if t == "array" { format!("array<{}>", p["items"]["type"].as_str().unwrap_or("any")) } else { t.to_string() };
    let mut types: Vec<String> = Vec::new();
    for option in &options {
        match &option["type"] {
            Value::String(t) => types.push(name_of(t, option)),
            Value::Array(ts) => types.extend(ts.iter().filter_map(Value::as_str).map(|t| name_of(t, option))),
            _ => {}
        }
    }
    types.dedup();
    let kind = if types.is_empty() { "any".to_string() } else { types.join(" \\| ") };
    let default = match &property["default"] {
        Value::Null => "—".to_string(),
        other => format!("`{other}`"),
    };
    let mut bounds = Vec::new();
    if let Some(values) = options.iter().find_map(|o| o["enum"].as_array()) {
        bounds.push(format!("one of {}", values.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")));
    }
    for (key, label) in [("minimum", "≥"), ("maximum", "≤"), ("minLength", "chars ≥"), ("maxLength", "chars ≤"), ("maxItems", "items ≤")]
    {
        if let Some(n) = property[key].as_u64() {
            bounds.push(format!("{label} {n}"));
        }
    }
    if let Some(pattern) = property["pattern"].as_str() {
        bounds.push(format!("pattern `{pattern}`"));
    }
    let bounds = if bounds.is_empty() { "—".to_string() } else { bounds.join("; ") };
    (kind, default, bounds)
}

/// Splits a Markdown table row into cells (a `\|` inside a cell is not a separator).
fn table_cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|').trim_end_matches('|');
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().unwrap().push_str("\\|");
                chars.next();
            }
            '|' => cells.push(String::new()),
            other => cells.last_mut().unwrap().push(other),
        }
    }
    cells.into_iter().map(|c| c.trim().to_string()).collect()
}

#[test]
fn compatibility_doc_parameter_columns_are_generated_from_the_live_tools() {
    let vault = new_vault();
    let mut server = Server::start(vault.path(), &[]);
    server.initialize();
    let tools = server.tools();
    let doc_path = manifest("docs/compatibility.md");
    let doc = std::fs::read_to_string(&doc_path).expect("docs/compatibility.md");
    let (begin, end) = ("<!-- params:begin -->\n", "<!-- params:end -->");
    let start = doc.find(begin).expect("docs/compatibility.md lacks <!-- params:begin -->") + begin.len();
    let stop = doc.find(end).expect("docs/compatibility.md lacks <!-- params:end -->");
    // The hand-written columns (P.O.W.E.R.'s declaration, the verdict) are kept by (tool, parameter).
    let mut written: std::collections::HashMap<(String, String), (String, String)> = std::collections::HashMap::new();
    for row in doc[start..stop].lines().skip(2) {
        let cells = table_cells(row);
        if cells.len() == 8 {
            written.insert((cells[0].clone(), cells[1].clone()), (cells[6].clone(), cells[7].clone()));
        }
    }
    let mut table = String::from(
        "| Tool | Parameter | Type | Default | Bounds | Required | P.O.W.E.R. | Verdict |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    let mut unjudged = Vec::new();
    for tool in &tools {
        let name = format!("`{}`", tool["name"].as_str().unwrap());
        let schema = &tool["inputSchema"];
        let required: Vec<&str> = schema["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        let mut params: Vec<(&String, &Value)> = schema["properties"].as_object().unwrap().iter().collect();
        params.sort_by_key(|(p, _)| (!required.contains(&p.as_str()), p.as_str() == "vault_path", p.to_string()));
        for (param, property) in params {
            let (kind, default, bounds) = param_facts(property);
            let param = format!("`{param}`");
            let (power, verdict) = written.get(&(name.clone(), param.clone())).cloned().unwrap_or_default();
            let judged = verdict == "same" || ["same (", "stricter (", "extended ("].iter().any(|v| verdict.starts_with(v));
            if !judged {
                unjudged.push(format!("{name}.{param}"));
            }
            let needed = if required.contains(&param.trim_matches('`')) { "yes" } else { "no" };
            table.push_str(&format!("| {name} | {param} | {kind} | {default} | {bounds} | {needed} | {power} | {verdict} |\n"));
        }
    }
    if bless() && doc[start..stop] != table {
        std::fs::write(&doc_path, format!("{}{table}{}", &doc[..start], &doc[stop..])).unwrap();
    } else {
        assert_eq!(doc[start..stop], table, "docs/compatibility.md parameter table is stale; rerun with PARAVAULT_BLESS=1");
    }
    assert!(unjudged.is_empty(), "parameters without a verdict (same [(note)] | stricter (why) | extended (how)): {unjudged:?}");
}

/// An agent that retries `ingest_note` with its idempotency key after a restart, with the
/// server's clock (`PARAVAULT_NOW`) past the second the note was stamped with, gets the
/// original receipt back; the same key with a different request is `idempotency_conflict`.
#[test]
fn an_agent_retrying_ingest_note_seconds_later_gets_the_original_receipt() {
    let dir = new_vault();
    let request = json!({"name": "01_Projects/r", "note_type": "Project", "title": "T", "description": "D", "content": "x",
                         "idempotency_key": "r1"});
    let call = |now: &str, args: &Value, ok: bool| {
        let mut server = Server::start_with_env(dir.path(), &[], &[("PARAVAULT_NOW", Path::new(now))]);
        server.initialize();
        let answer = if ok { server.ok("ingest_note", args.clone()) } else { server.err("ingest_note", args.clone()) };
        assert!(server.close().success());
        answer
    };
    let first = call("2026-06-01T12:00:00Z", &request, true);
    let text = std::fs::read_to_string(dir.path().join("01_Projects/r.md")).unwrap();
    assert_eq!(call("2026-06-01T12:00:02Z", &request, true), first);
    assert_eq!(std::fs::read_to_string(dir.path().join("01_Projects/r.md")).unwrap(), text);
    let mut other = request.clone();
    other["content"] = json!("y");
    assert_eq!(call("2026-06-01T12:00:03Z", &other, false)["code"], "idempotency_conflict");
}

/// A write's answer followed by a silent agent: the server builds the search state the write
/// changed on its own (the journal's tail generation, logged as it is built), so the search
/// the agent asks next takes it as built instead of building it (issue 52).
#[test]
fn a_silent_agent_finds_its_write_already_searchable() {
    let vault = new_vault();
    let filter = Path::new("info,paravault::search::read::generation=debug");
    let mut server = Server::start_with_env(vault.path(), &[], &[("PARAVAULT_LOG", filter)]);
    server.initialize();
    // The first search publishes the vault's first generation.
    server.ok("search_vault_tool", json!({"query": "note", "search_mode": "fts"}));
    let _ = server.stderr_text();
    let receipt = server.ok(
        "ingest_note",
        json!({"name": "03_Resources/quasar", "note_type": "Resource", "title": "Quasar", "description": "A bright one",
               "content": "A quasar outshines its galaxy.\n"}),
    );
    assert_eq!(receipt["status"], "ok", "{receipt}");
    // No call is sent: the build is the server's own.
    let deadline = Instant::now() + TIMEOUT;
    let mut log = String::new();
    while !log.contains("search tail generation") {
        assert!(Instant::now() < deadline, "the write's search state was not built while the agent was silent: {log}");
        std::thread::sleep(Duration::from_millis(20));
        log.push_str(&server.stderr_text());
    }
    let found = server.ok("search_vault_tool", json!({"query": "quasar", "search_mode": "fts"}));
    assert_eq!(found["results"][0]["source"]["path"], "03_Resources/quasar.md", "{found}");
    std::thread::sleep(Duration::from_millis(50));
    let after = server.stderr_text();
    assert!(!after.contains("search tail generation"), "the search built the generation again: {after}");
}
