//! vaultspec's gateway over paravault's own CLI verbs: `discover` walks the clap definition into
//! verb schemas (flags, arguments, `--json`) ranked by the engine's in-memory BM25
//! (`search::rank_texts`) over each verb's path, help and flag help; `invoke` runs one verb of the running binary against the served
//! vault with `--json`, in a fixed non-interactive environment, under a timeout. Verbs on the
//! policy's `specdocs.gateway_denylist` (those that install, serve, approve, change the server's
//! configuration or run commands) are never listed and never run (docs/specdocs.md).

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::api::specdocs::SpecdocsPolicy;
use crate::error::{Error, Result};

/// The schema of one CLI verb, as `discover` lists it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct VerbSchema {
    /// The verb's space-joined path (`lint`, `goals add`).
    pub verb: String,
    /// The verb's one-line help.
    pub description: String,
    /// Whether the verb answers with `--json` (every verb does).
    pub supports_json: bool,
    /// The verb's flags (those the gateway refuses are withheld).
    pub flags: Vec<FlagSchema>,
    /// The verb's positional arguments, in order.
    pub arguments: Vec<ArgumentSchema>,
}

/// One flag of a verb.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FlagSchema {
    /// The flag, `--` included.
    pub name: String,
    /// Whether the flag takes a value.
    pub takes_value: bool,
    /// The flag's help.
    pub help: String,
}

/// One positional argument of a verb.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ArgumentSchema {
    /// The argument's name.
    pub name: String,
    /// Whether the verb needs it.
    pub required: bool,
    /// Whether it takes several values.
    pub variadic: bool,
}

/// One verb `discover` ranked.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RankedVerb {
    /// The verb's schema.
    #[serde(flatten)]
    pub schema: VerbSchema,
    /// Its BM25 score against the query, to three decimals.
    pub score: f64,
}

/// What `discover` returns.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DiscoverReport {
    /// The query, as given.
    pub query: String,
    /// The number of verbs returned.
    pub count: usize,
    /// The ranked verbs, best first.
    pub verbs: Vec<RankedVerb>,
}

/// The schema of one leaf verb (flags the gateway refuses by name are withheld).
fn verb_schema(path: &str, command: &clap::Command, withheld: &[String]) -> VerbSchema {
    let flags = command
        .get_arguments()
        .filter(|a| a.get_long().is_some_and(|long| !withheld.iter().any(|w| w == long)) && a.get_id() != "help" && a.get_id() != "version")
        .map(|a| FlagSchema {
            name: format!("--{}", a.get_long().unwrap_or_default()),
            takes_value: a.get_action().takes_values(),
            help: a.get_help().map(|h| h.to_string()).unwrap_or_default(),
        })
        .collect();
    let arguments = command
        .get_positionals()
        .map(|a| ArgumentSchema {
            name: a.get_id().as_str().to_string(),
            required: a.is_required_set(),
            variadic: a.get_num_args().is_some_and(|n| n.max_values() > 1),
        })
        .collect();
    VerbSchema {
        verb: path.to_string(),
        description: command.get_about().map(|h| h.to_string()).unwrap_or_default(),
        supports_json: true,
        flags,
        arguments,
    }
}

/// The MCP tool whose authority, rate limit and visibility a CLI verb run through `invoke`
/// has (docs/governance.md, "The gateway"): a verb runs only as what the calling agent could
/// do with that tool on this server. `None`: a verb with no tool of its own (goal reads, whose
/// tools are resources), read-only and unlimited. A verb not in this table is never run
/// (`verb_denied`), so a new CLI verb is closed until it is given a row here; the `vaults`
/// verbs (the per-user registry, which `list_vaults` filters per agent), `watch`, `mcp`, `web`,
/// `init`, `approve`, `reject`, `approver` and `infra` have none. The bool: whether the verb
/// writes (always, or with `--fix` for check-markdown).
pub(crate) const VERB_TOOLS: &[(&str, Option<&str>, bool)] = &[
    ("lint", Some("lint_vault"), false),
    ("index", Some("generate_index"), true),
    ("check-markdown", Some("check_markdown_tool"), false),
    ("doctor", Some("get_server_info"), false),
    ("ingest", Some("ingest_note"), true),
    ("synthesize", Some("synthesize_session"), true),
    ("propose", Some("propose_memory_change"), true),
    ("apply", Some("apply_memory_change"), true),
    ("approvals", Some("get_proposal_status"), false),
    ("approvals show", Some("get_proposal_status"), false),
    ("history", Some("read_memory_history"), false),
    ("rot-audit", Some("rot_audit"), false),
    ("archive", Some("archive_notes"), true),
    ("heal", Some("heal_frontmatter_tool"), true),
    ("sync", Some("sync_vault"), true),
    ("search", Some("search_vault_tool"), false),
    ("read-sub-index", Some("read_sub_index"), false),
    ("handoff", Some("handoff_work"), true),
    ("goals list", None, false),
    ("goals show", None, false),
    ("goals find", None, false),
    ("goals next", None, false),
    ("goals ready", None, false),
    ("goals waves", None, false),
    ("goals add", Some("add"), true),
    ("goals apply-plan", Some("apply-plan"), true),
    ("goals update", Some("update"), true),
    ("goals move", Some("move"), true),
    ("goals set-active", Some("set_active"), true),
    ("goals complete", Some("complete"), true),
    ("goals reopen", Some("reopen"), true),
    ("goals archive", Some("archive"), true),
    ("goals delete", Some("delete"), true),
];

/// What running `verb` with `arguments` through `invoke` is, as the server's checks see it:
/// the tool it is charged to and whether it writes. A verb with no row is `verb_denied`.
pub(crate) fn verb_authority(verb: &str, arguments: Option<&Map<String, Value>>) -> Result<(Option<&'static str>, bool)> {
    let verb = verb.split_whitespace().collect::<Vec<_>>().join(" ");
    let (_, tool, writes) =
        VERB_TOOLS.iter().find(|(v, _, _)| *v == verb).ok_or_else(|| Error::GatewayVerbDenied { verb: verb.clone() })?;
    let fixes = verb == "check-markdown" && arguments.and_then(|a| a.get("fix")).is_some_and(|f| f != &Value::Bool(false) && !f.is_null());
    Ok((*tool, *writes || fixes))
}

/// Whether `verb` (a space-joined path) is denied: named on the denylist, or below a name on it.
fn denied(verb: &str, denylist: &[String]) -> bool {
    denylist.iter().any(|d| d == verb || verb.starts_with(&format!("{d} ")))
}

/// Every leaf verb of the CLI that the denylist allows, with its schema.
pub(crate) fn verb_catalog(cli: &clap::Command, policy: &SpecdocsPolicy) -> Vec<VerbSchema> {
    fn walk(prefix: &str, command: &clap::Command, policy: &SpecdocsPolicy, out: &mut Vec<VerbSchema>) {
        for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
            let path = if prefix.is_empty() { sub.get_name().to_string() } else { format!("{prefix} {}", sub.get_name()) };
            if denied(&path, &policy.gateway_denylist) {
                continue;
            }
            // A verb with no row in VERB_TOOLS is never run, so it is never listed.
            if !sub.has_subcommands() && !VERB_TOOLS.iter().any(|(v, _, _)| *v == path) {
                continue;
            }
            if sub.has_subcommands() {
                walk(&path, sub, policy, out);
            } else {
                out.push(verb_schema(&path, sub, &policy.gateway_refused_flags));
            }
        }
    }
    let mut out = Vec::new();
    walk("", cli, policy, &mut out);
    out
}

/// `discover`: the catalog ranked against `query`, best first.
pub fn discover(cli: &clap::Command, query: &str, limit: usize, policy: &SpecdocsPolicy) -> Result<DiscoverReport> {
    if query.trim().is_empty() {
        return Err(Error::InvalidArgument { name: "query", reason: "must name verb words or an intent".into() });
    }
    if limit == 0 {
        return Err(Error::InvalidArgument { name: "limit", reason: "must be at least 1".into() });
    }
    let verbs = verb_catalog(cli, policy);
    let texts: Vec<String> = verbs
        .iter()
        .map(|verb| {
            let flags: Vec<String> = verb.flags.iter().map(|f| format!("{} {}", f.name, f.help)).collect();
            format!("{} {} {}", verb.verb.replace('-', " "), verb.description, flags.join(" "))
        })
        .collect();
    let ranked: Vec<RankedVerb> = crate::api::search::rank_texts(&texts, query, limit, "ranking the verb catalog")?
        .into_iter()
        .map(|(i, score)| RankedVerb { schema: verbs[i].clone(), score: (f64::from(score) * 1000.0).round() / 1000.0 })
        .collect();
    Ok(DiscoverReport { query: query.to_string(), count: ranked.len(), verbs: ranked })
}

/// Set to `1` in the environment of every process `invoke` spawns. The gateway composes that
/// environment itself (no tool argument reaches it), and the CLI, seeing it, writes for an agent
/// (never as a person at a terminal) and never prompts.
pub(crate) const GATEWAY_ENV: &str = "PARAVAULT_GATEWAY";

/// Flags the gateway sets itself, or that would retarget the process or change what it is.
const RESERVED_FLAGS: [&str; 6] = ["vault", "json", "help", "version", "policy", "config-dir"];

/// The only variables a spawned verb sees, copied from the server's own environment (where the
/// per-user configuration, the model cache and the clock come from); every other is dropped.
const INHERITED_ENV: [&str; 13] = [
    "HOME",
    "PARAVAULT_CONFIG_DIR",
    "XDG_CONFIG_HOME",
    "PARAVAULT_MODEL_DIR",
    "HF_HUB_CACHE",
    "HF_HOME",
    "RAYON_NUM_THREADS",
    "PARAVAULT_TODAY",
    "PARAVAULT_NOW",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
];

/// `invoke` parameters (seed 000).
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InvokeRequest {
    /// The space-joined verb path returned by discover, for example "goals list".
    pub verb: String,
    /// The verb's flags as a mapping (`max-results`, `max_results` or `--max-results`). A list
    /// value repeats the flag; a boolean passes true or false (a switch is set by true).
    #[serde(default)]
    pub arguments: Option<Map<String, Value>>,
    /// The verb's positional operands, in CLI order.
    #[serde(default)]
    pub positionals: Option<Vec<String>>,
    /// Subprocess wall-clock budget in seconds (default 60, at most the policy's
    /// `specdocs.gateway_timeout_max_s`).
    #[serde(default)]
    pub timeout: Option<f64>,
}

fn refuse(name: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidArgument { name, reason: reason.into() }
}

/// The leaf command `verb` names, or why it names none.
fn leaf<'c>(cli: &'c clap::Command, verb: &str) -> Result<&'c clap::Command> {
    let mut command = cli;
    for word in verb.split(' ') {
        command = command
            .get_subcommands()
            .find(|s| s.get_name() == word && word != "help")
            .ok_or_else(|| refuse("verb", format!("'{verb}' is not a paravault verb; discover lists the verbs and their flags")))?;
    }
    if command.has_subcommands() {
        let names: Vec<&str> = command.get_subcommands().map(clap::Command::get_name).filter(|n| *n != "help").collect();
        return Err(refuse("verb", format!("'{verb}' is a group of verbs; name one: {}", names.join(", "))));
    }
    Ok(command)
}

/// One argument value as the text after `--flag=` (a scalar), or why it cannot be one.
fn scalar(flag: &str, value: &Value) -> Result<String> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => return Err(refuse("arguments", format!("--{flag} takes a string, number or boolean"))),
    };
    if text.contains('\0') {
        return Err(refuse("arguments", format!("the value of --{flag} contains a NUL character")));
    }
    Ok(text)
}

/// The verb's flags as command-line words, refusing reserved, refused and undeclared flags.
fn flag_words(verb: &str, command: &clap::Command, arguments: &Map<String, Value>, refused: &[String]) -> Result<Vec<String>> {
    let mut words = Vec::new();
    for (key, value) in arguments {
        let flag = key.trim_start_matches("--").replace('_', "-");
        if flag.is_empty() {
            return Err(refuse("arguments", format!("'{key}' is not a flag name")));
        }
        if RESERVED_FLAGS.contains(&flag.as_str()) {
            return Err(refuse(
                "arguments",
                format!("--{flag} is reserved for the server: it runs every verb against the served vault with --json"),
            ));
        }
        if refused.contains(&flag) {
            return Err(refuse(
                "arguments",
                format!("--{flag} is refused through the gateway: it would make the verb read or run something outside the vault"),
            ));
        }
        let Some(arg) = command.get_arguments().find(|a| a.get_long() == Some(flag.as_str())) else {
            return Err(refuse("arguments", format!("'{verb}' declares no flag --{flag}; discover lists its flags")));
        };
        let takes_value = arg.get_action().takes_values();
        match value {
            Value::Null => {}
            Value::Bool(set) if !takes_value => {
                if *set {
                    words.push(format!("--{flag}"));
                }
            }
            _ if !takes_value => return Err(refuse("arguments", format!("--{flag} is a switch: pass true or false"))),
            Value::Array(items) => {
                if !matches!(arg.get_action(), clap::ArgAction::Append) {
                    return Err(refuse("arguments", format!("--{flag} takes one value; a list repeats only a repeatable flag")));
                }
                for item in items {
                    words.push(format!("--{flag}={}", scalar(&flag, item)?));
                }
            }
            other => words.push(format!("--{flag}={}", scalar(&flag, other)?)),
        }
    }
    Ok(words)
}

/// The verb's operands, refusing more than it declares and operands that name a file to read.
fn operand_words(verb: &str, command: &clap::Command, positionals: &[String]) -> Result<Vec<String>> {
    let declared: Vec<&clap::Arg> = command.get_positionals().collect();
    let variadic = declared.last().is_some_and(|a| a.get_num_args().is_some_and(|n| n.max_values() > 1));
    if !variadic && positionals.len() > declared.len() {
        let names: Vec<&str> = declared.iter().map(|a| a.get_id().as_str()).collect();
        return Err(refuse(
            "positionals",
            format!("'{verb}' takes at most {} operand(s) ({}); got {}", declared.len(), names.join(", "), positionals.len()),
        ));
    }
    for operand in positionals {
        if operand.contains('\0') {
            return Err(refuse("positionals", "an operand contains a NUL character"));
        }
        if operand.starts_with('@') {
            return Err(refuse("positionals", format!("'{operand}' names a file to read (@FILE); pass the content itself")));
        }
    }
    let mut words = Vec::new();
    if !positionals.is_empty() {
        // After `--` an operand is never read as a flag, whatever it starts with.
        words.push("--".to_string());
        words.extend(positionals.iter().cloned());
    }
    Ok(words)
}

/// Reads a pipe to its end on a thread, keeping its first `keep` bytes (or its last, `tail`);
/// the result says whether bytes were dropped.
fn read_bounded(mut pipe: impl Read + Send + 'static, keep: usize, tail: bool) -> JoinHandle<(Vec<u8>, bool)> {
    std::thread::spawn(move || {
        let (mut kept, mut dropped, mut chunk) = (Vec::new(), false, [0u8; 8192]);
        loop {
            let n = match pipe.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if tail {
                kept.extend_from_slice(&chunk[..n]);
                if kept.len() > keep.saturating_mul(2).max(8192) {
                    kept.drain(..kept.len() - keep);
                    dropped = true;
                }
            } else {
                let room = keep.saturating_sub(kept.len()).min(n);
                kept.extend_from_slice(&chunk[..room]);
                dropped |= room < n;
            }
        }
        if tail && kept.len() > keep {
            kept.drain(..kept.len() - keep);
            dropped = true;
        }
        (kept, dropped)
    })
}

/// Kills the verb's whole process group (it was spawned as the group's leader).
fn kill_group(child: &Child) {
    let _ = rustix::process::kill_process_group(rustix::process::Pid::from_child(child), rustix::process::Signal::KILL);
}

/// How a spawned verb ended.
enum Ended {
    Exited(std::process::ExitStatus),
    TimedOut,
}

/// Waits for the verb and for its pipes to close, until `deadline`; past it, kills the group.
fn wait_until(child: &mut Child, deadline: Instant, pipes: [&JoinHandle<(Vec<u8>, bool)>; 2]) -> Result<Ended> {
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                kill_group(child);
                let _ = child.wait();
                return Err(Error::io("waiting for", "the invoked verb", e));
            }
        }
        if Instant::now() >= deadline {
            // Killed before it is reaped, so the group id still names it.
            kill_group(child);
            let _ = child.wait();
            return Ok(Ended::TimedOut);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    };
    // A process the verb started may still hold its pipes; while it does, its group exists.
    while !pipes.iter().all(|p| p.is_finished()) {
        if Instant::now() >= deadline {
            kill_group(child);
            return Ok(Ended::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(Ended::Exited(status))
}

/// What `invoke` returns: the verb's outcome, a failure of the verb included.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InvokeReport {
    /// The verb, whitespace normalised.
    pub verb: String,
    /// Whether the verb exited 0 with JSON that parsed.
    pub ok: bool,
    /// The verb's exit status (128 + the signal when killed; null on timeout).
    pub exit_code: Option<i32>,
    /// `json` when `data` holds the verb's parsed output, else `text`.
    pub format: InvokeFormat,
    /// The verb's `--json` output, parsed.
    pub data: Option<Value>,
    /// The verb's stdout as text, when it did not parse as JSON.
    pub stdout: Option<String>,
    /// How the verb failed (null when it did not).
    pub error: Option<InvokeError>,
    /// The command line run (the vault root shown as `<root>`).
    pub command: Vec<String>,
}

/// The form of an invoked verb's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InvokeFormat {
    /// Parsed JSON, in `data`.
    Json,
    /// Text (or nothing), in `stdout`.
    Text,
}

/// How an invoked verb failed.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InvokeError {
    /// What happened.
    pub kind: InvokeErrorKind,
    /// The verb's exit status (null on timeout).
    pub exit_code: Option<i32>,
    /// The verb's stderr, trimmed.
    pub stderr: String,
    /// What went wrong, in words.
    pub message: String,
}

/// The ways an invoked verb fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InvokeErrorKind {
    /// It ran past its timeout and was killed.
    Timeout,
    /// It exited 0 but its output is not JSON.
    JsonParse,
    /// It exited with a non-zero status.
    NonzeroExit,
}

/// `invoke`: runs one verb of `exe` (the running paravault binary) against the vault at `root`
/// with `--json`. Unknown verbs, denylisted verbs and invalid arguments are refused before
/// anything spawns; once the verb runs, its failure (`nonzero_exit`, `json_parse`, `timeout`)
/// is part of the result, not an error.
pub fn invoke(cli: &clap::Command, exe: &Path, root: &Path, policy: &SpecdocsPolicy, request: &InvokeRequest) -> Result<InvokeReport> {
    let verb = request.verb.split_whitespace().collect::<Vec<_>>().join(" ");
    if verb.is_empty() {
        return Err(refuse("verb", "name a verb that discover lists, for example \"lint\""));
    }
    if denied(&verb, &policy.gateway_denylist) {
        return Err(Error::GatewayVerbDenied { verb });
    }
    let mut built = cli.clone();
    built.build();
    let command = leaf(&built, &verb)?;
    verb_authority(&verb, request.arguments.as_ref())?;
    let timeout = request.timeout.unwrap_or(policy.gateway_timeout_s);
    if !timeout.is_finite() || timeout <= 0.0 || timeout > policy.gateway_timeout_max_s {
        return Err(refuse("timeout", format!("must be a number of seconds above 0 and at most {}", policy.gateway_timeout_max_s)));
    }
    let mut words: Vec<String> = verb.split(' ').map(str::to_string).collect();
    words.extend(flag_words(&verb, command, request.arguments.as_ref().unwrap_or(&Map::new()), &policy.gateway_refused_flags)?);
    words.extend(operand_words(&verb, command, request.positionals.as_deref().unwrap_or_default())?);
    let shown: Vec<String> =
        ["paravault", "--vault", "<root>", "--json"].into_iter().map(str::to_string).chain(words.iter().cloned()).collect();

    let mut process = std::process::Command::new(exe);
    process
        .arg("--vault")
        .arg(root)
        .arg("--json")
        .args(&words)
        .current_dir(root)
        .env_clear()
        .envs(INHERITED_ENV.iter().filter_map(|name| std::env::var_os(name).map(|value| (name, value))))
        .env(GATEWAY_ENV, "1")
        .env("PARAVAULT_LOG", "error")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let deadline = Instant::now() + Duration::from_secs_f64(timeout);
    let mut child = process.spawn().map_err(|e| Error::io("starting", "the paravault binary", e))?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        kill_group(&child);
        let _ = child.wait();
        return Err(Error::io("reading", "the invoked verb's output", std::io::Error::other("no pipes")));
    };
    let stdout = read_bounded(stdout, policy.gateway_stdout_bytes_max, false);
    let stderr = read_bounded(stderr, policy.gateway_stderr_bytes_max, true);
    let ended = wait_until(&mut child, deadline, [&stdout, &stderr])?;
    let (out, out_dropped) = stdout.join().unwrap_or_default();
    let (err, _) = stderr.join().unwrap_or_default();
    let stderr_text = String::from_utf8_lossy(&err).trim().to_string();
    let out_text = String::from_utf8_lossy(&out).trim().to_string();
    let result = |ok: bool, exit_code: Option<i32>, data: Option<Value>, stdout: Option<String>, error: Option<InvokeError>| InvokeReport {
        verb: verb.clone(),
        ok,
        exit_code,
        format: if data.is_some() { InvokeFormat::Json } else { InvokeFormat::Text },
        data,
        stdout,
        error,
        command: shown.clone(),
    };
    let status = match ended {
        Ended::TimedOut => {
            let message = format!("verb did not finish within {timeout} s; it and its process group were killed");
            let error = InvokeError { kind: InvokeErrorKind::Timeout, exit_code: None, stderr: stderr_text, message };
            return Ok(result(false, None, None, None, Some(error)));
        }
        Ended::Exited(status) => status,
    };
    let parsed: std::result::Result<Value, String> = if out_dropped {
        Err(format!("stdout exceeded {} bytes (specdocs.gateway_stdout_bytes_max); the rest was dropped", policy.gateway_stdout_bytes_max))
    } else {
        serde_json::from_slice(&out).map_err(|e| e.to_string())
    };
    let text = (!out_text.is_empty()).then_some(out_text);
    if status.success() {
        return Ok(match parsed {
            Ok(data) => result(true, Some(0), Some(data), None, None),
            Err(reason) => {
                let message = format!("verb exited 0 but its --json output did not parse: {reason}");
                let error = InvokeError { kind: InvokeErrorKind::JsonParse, exit_code: Some(0), stderr: stderr_text, message };
                result(false, Some(0), None, text, Some(error))
            }
        });
    }
    let exit_code = status.code().or_else(|| status.signal().map(|signal| 128 + signal));
    let mut message = match (status.code(), status.signal()) {
        (Some(code), _) => format!("verb exited with status {code}"),
        (None, Some(signal)) => format!("verb was killed by signal {signal}"),
        (None, None) => "verb failed without an exit status".to_string(),
    };
    // With --json, paravault prints its typed error on stdout.
    if let Ok(data) = &parsed
        && let (Some(code), Some(reason)) = (data["error"]["code"].as_str(), data["error"]["message"].as_str())
    {
        message = format!("{message}: {code}: {reason}");
    }
    let error = InvokeError { kind: InvokeErrorKind::NonzeroExit, exit_code, stderr: stderr_text, message };
    Ok(match parsed {
        Ok(data) => result(false, exit_code, Some(data), None, Some(error)),
        Err(_) => result(false, exit_code, None, text, Some(error)),
    })
}
