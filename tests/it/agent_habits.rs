//! Issue 50: agents written for each peer work unchanged, habits of their SDKs included. Each
//! test runs one scenario of `tests/sdk/agent_habits.py` (the official Python MCP SDK) against
//! the built binary; the test fails, saying so, without python3 and its `mcp` package.

use std::path::Path;

fn scenario(name: &str) {
    crate::support::run_sdk_script_with("agent_habits.py", &[Path::new(name)]);
}

/// Item 14: prompts/list, resources/list and resources/templates/list answer on every surface
/// (prompts and non-stepstone resources `[]`), never -32601.
#[test]
fn prompts_and_resources_lists_answer_on_every_surface() {
    scenario("lists");
}

/// Item 15 (and item 17's client config): `paravault mcp` without `--vault`,
/// `PARAVAULT_VAULT_DIR` or `POWER_VAULT_DIR` refuses to start, naming the three ways, unless
/// `--default-vault` asks for the default vault; `args: []` says what `args` must be.
#[test]
fn mcp_requires_its_vault_unless_the_default_is_asked_for() {
    scenario("no_vault");
}

/// The `tools` of tools/list from `paravault --vault VAULT mcp ARGS`, over newline-delimited
/// JSON-RPC on stdio (a config folder of its own).
fn tools_list(vault: &Path, config: &Path, args: &[&str]) -> Vec<serde_json::Value> {
    use std::io::{BufRead, BufReader, Write};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_paravault"))
        .arg("--vault")
        .arg(vault)
        .arg("mcp")
        .args(args)
        .env("PARAVAULT_CONFIG_DIR", config)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let requests = [
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
            "capabilities": {}, "clientInfo": {"name": "paravault-tests", "version": "1"}}}),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
    ];
    for request in requests {
        writeln!(stdin, "{request}").unwrap();
    }
    stdin.flush().unwrap();
    let mut tools = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok) {
        let message: serde_json::Value = serde_json::from_str(&line).unwrap();
        if message["id"] == 2 {
            tools = Some(message["result"]["tools"].as_array().unwrap_or_else(|| panic!("tools/list failed: {message}")).clone());
            break;
        }
    }
    drop(stdin);
    let _ = child.wait();
    tools.expect("no tools/list answer")
}

/// Item 17: every tool's input and output schema, on every surface and in read-only mode,
/// compiles with Ajv in its default strict mode (draft 2020-12 with ajv-formats, as the
/// TypeScript SDK validates): no non-standard `format`, unsigned integers with `minimum: 0`.
/// Needs node and `npm install --prefix target/ajv ajv@8 ajv-formats@3` (.ci/run does both);
/// fails, saying so, without them.
#[test]
fn every_tool_schema_compiles_with_ajv_strict() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ajv = root.join("target/ajv");
    let install = "install node (Debian: apt-get install nodejs npm), then `npm install --prefix target/ajv ajv@8 ajv-formats@3` \
                   in the repository root (.ci/run does both)";
    match std::process::Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => panic!("node is needed to compile the tool schemas with Ajv: {install}"),
    }
    for package in ["ajv", "ajv-formats"] {
        assert!(ajv.join("node_modules").join(package).join("package.json").is_file(), "{package} is missing from target/ajv: {install}");
    }
    let dir = tempfile::tempdir().unwrap();
    let (vault, config) = (dir.path().join("vault"), dir.path().join("config"));
    let init = crate::support::paravault(&vault, &["init"]);
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    let mut tools = tools_list(&vault, &config, &["--surface", "power,ctxvault,stepstone,vaultspec"]);
    let read_only = tools_list(&vault, &config, &["--surface", "power,ctxvault,stepstone,vaultspec", "--read-only"]);
    assert!(tools.len() > 40 && !read_only.is_empty(), "{} tools", tools.len());
    tools.extend(read_only);
    let file = dir.path().join("tools.json");
    std::fs::write(&file, serde_json::to_vec(&tools).unwrap()).unwrap();
    let out = std::process::Command::new("node").arg(root.join("tests/sdk/ajv_strict.js")).arg(&file).arg(&ajv).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains(" passed, 0 failed"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
}

/// Item 11: a P.O.W.E.R. tool whose contract result is not an object renders as the official
/// Python SDK renders it: `validate_memory_state`'s text is `true`/`false`, `get_memory_context`'s
/// one text block per path, and structuredContent is `{"result": X, ...}`.
#[test]
fn non_object_results_render_as_the_python_sdk_renders_them() {
    scenario("non_object");
}

/// Item 12: `handoff_work` `complete` takes P.O.W.E.R.'s `completion_postcondition` (with the
/// artifact paths) instead of a `receipt_id`, and records a content-free task-completion receipt.
#[test]
fn handoff_complete_takes_a_completion_postcondition() {
    scenario("handoff");
}

/// Item 13: `get_server_info` keeps doctor report v1's fields and values: `vault.path`,
/// `runtime.power_framework`, `embedding.binding` (`not_requested`, `verified`, `not_verified`,
/// `failed`) and the `embedding_binding_not_requested` issue, beside paravault's own fields.
#[test]
fn get_server_info_keeps_doctor_report_v1() {
    scenario("server_info");
}

/// ctxvault items 1–3: a `query` hit's `text` is the matching chunk (bounded by policy, never a
/// window cut mid-word), its `source` is the `list_docs` name (so `write_doc(file_path=source,
/// overwrite=true)` updates it), and `score` keeps ctxvault's distance direction (`relevance`
/// is the engine's score, higher is better).
#[test]
fn ctxvault_query_answers_chunks_from_the_list_docs_source() {
    scenario("ctxvault_query");
}

/// ctxvault items 4 and 5: `list_entities` has one row per normalised entity with the spellings
/// seen (`min_episodes` counts across spellings, as `query_episodes` matches), and under
/// `--agent alice` `write_episode` defaults `source` to the agent and every receipt records it.
#[test]
fn ctxvault_entities_count_across_spellings_and_writes_name_the_agent() {
    scenario("ctxvault_memory");
}

/// vaultspec items 7 and 8: `find type: ["index"]` finds feature indexes, search rows follow the
/// seed's type order, `log` takes 0.3.9's list-typed `verify`, `status` blames `target`, and
/// every argument error (vaultspec, P.O.W.E.R., stepstone) names the argument, the expected shape
/// and an example.
#[test]
fn vaultspec_find_log_and_argument_errors_speak_the_agents_words() {
    scenario("vaultspec");
}

/// Item 10: the first search (`search_vault_tool`, `get_memory_context`, `suggest_related_tool`)
/// on a vault never synced (a folder of Obsidian notes) publishes the first generation, offline
/// and by keyword, and answers with a labelled `fallback_reason`; never `no_active_generation`.
#[test]
fn the_first_search_on_a_never_synced_vault_answers() {
    scenario("first_search");
}

/// ctxvault item 6: documents written to a vault whose policy names the model are embedded by
/// the write itself (no `sync --dense`): a paraphrase sharing no word finds them through the
/// dense path; `warmup_status` becomes `ready: true` with the mode it serves (`lexical`, then
/// `hybrid`), and on a vault without the model it is ready in lexical mode and says how a
/// person enables it, never "wait".
#[test]
fn ctxvault_writes_embed_themselves_and_warmup_says_the_mode() {
    crate::support::run_sdk_script_with("agent_habits.py", &[Path::new("ctxvault_dense"), crate::model::model_dir()]);
}

/// Item 16: a vault P.O.W.E.R. was serving, handed over unchanged (a hand-built fixture in its
/// layout: reference §1.3, §1.5, §4.4, §5): `read_memory_history` shows its receipts, its
/// pending proposals (`.power/proposals/<id>.json`) apply with `approved=true` or wait for a
/// person under a `human` rule and bind the person's rejection, a forged one is refused,
/// `generate_index` keeps its catalog page of an empty folder, and no byte under `.power/`
/// changes.
#[test]
fn a_vault_power_served_is_handed_over_unchanged() {
    scenario("power_handover");
}
