//! The `paravault` command line: a thin clap adapter over `Vault`.
//!
//! Exit codes (docs/errors.md): 0 ok; 1 blocking findings (lint) or a degraded doctor report;
//! 2 bad usage or a refused argument; 3 the vault or its policy cannot be used; 4 I/O failure.

pub mod goals;
mod progress;
pub mod render;
pub mod vaults;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use crate::api::maintenance::ArchiveRequest;
use crate::api::maintenance::HealRequest;
use crate::api::maintenance::MarkdownRequest;
use crate::api::maintenance::RotRequest;
use crate::api::search::{SearchParams, SyncParams};
use crate::api::write::{IngestRequest, SynthesizeRequest};
use crate::error::Error;
use crate::vault::{self, Vault, VaultOptions};

#[derive(Debug, Parser)]
#[command(name = "paravault", version, about = "A governed knowledge-vault engine for P.A.R.A. Markdown vaults")]
pub struct Cli {
    /// Vault root (else PARAVAULT_VAULT_DIR, else POWER_VAULT_DIR, else the default vault).
    #[arg(long, global = true, value_name = "DIR")]
    pub vault: Option<PathBuf>,
    /// Print machine-readable JSON instead of a human report.
    #[arg(long, global = true)]
    pub json: bool,
    /// Without a command: what paravault is, the doctor summary of the vault and the MCP
    /// client configuration for this binary.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// `paravault approvals` actions.
#[derive(Debug, Subcommand)]
pub enum ApprovalsAction {
    /// Show a proposal as a person reviews it: state, per note the unified diff of the current
    /// text → the after-image, and the lint gate's verdict on the after-images.
    Show {
        /// The proposal's id (`paravault approvals` lists them).
        proposal_id: String,
    },
}

/// `paravault remote` actions.
#[derive(Debug, Subcommand)]
pub enum RemoteAction {
    /// Make this vault a replica whose history goes to URL (any git URL: a path, file://,
    /// ssh://, git://, https://). Every transaction becomes a git commit from then on;
    /// `paravault replicate` exchanges them.
    Add {
        /// The remote's name (`origin`).
        name: String,
        /// The git URL of a bare repository (an empty one, or one another replica pushed to).
        url: String,
    },
}

/// `paravault approver` actions.
#[derive(Debug, Subcommand)]
pub enum ApproverAction {
    /// Register an approver; the secret is prompted twice (read once from standard input when
    /// it is not a terminal).
    Add {
        /// The approver's name (you give it to `approve --approver`).
        name: String,
    },
    /// List registered approver names.
    List,
    /// Show an approver's public signing key, making one (sealed under the secret, which is
    /// prompted) for an approver registered before signed approvals.
    Key {
        /// The approver's name.
        name: String,
    },
    /// Put an approver's public key in this vault's registry (it travels with the vault):
    /// the first key is the approver's own, signed by itself; every later one is signed by an
    /// approver whose key is already there (their secret is prompted).
    Register {
        /// The approver whose key is registered.
        name: String,
        /// Their public key (`paravault approver key NAME` on their machine); default: the
        /// key this machine holds for NAME.
        #[arg(long)]
        public_key: Option<String>,
        /// The approver who signs the change (default: NAME).
        #[arg(long)]
        signed_by: Option<String>,
    },
    /// Take an approver's key out of this vault's registry (signed by another active approver;
    /// the last key cannot be revoked).
    Revoke {
        /// The approver whose key is revoked.
        name: String,
        /// The key to revoke (default: NAME's only active key).
        #[arg(long)]
        public_key: Option<String>,
        /// The approver who signs the change.
        #[arg(long)]
        signed_by: String,
    },
}

/// `paravault policy` actions.
#[derive(Debug, Subcommand)]
pub enum PolicyAction {
    /// Sign `.paravault/policy.yaml` as it is now (`.paravault/policy.sig`): a shared vault's
    /// gate refuses a policy change without an approver's signature. The secret is prompted.
    Sign {
        /// The approver who signs (their secret is prompted).
        #[arg(long)]
        approver: String,
    },
}

/// `paravault gate` actions.
#[derive(Debug, Subcommand)]
pub enum GateAction {
    /// Install the pre-receive hook on a bare repository: the remote then refuses pushes a
    /// replica's engine would never make (docs/governance.md, "The gate").
    Install {
        /// The bare repository (`git init --bare`).
        repository: std::path::PathBuf,
        /// The vault's branch, the only one the remote accepts.
        #[arg(long, default_value = "main")]
        branch: String,
        /// The paravault binary the hook runs (default: this one).
        #[arg(long)]
        binary: Option<std::path::PathBuf>,
    },
    /// Judge the ref updates git gives a pre-receive hook on standard input (the hook runs it).
    Check {
        /// The repository (default: the current folder, where git runs hooks).
        #[arg(long, default_value = ".")]
        repository: std::path::PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the P.A.R.A. layout and starter notes where missing (never overwrites).
    Init,
    /// Vault-wide health report; exits 1 when anything is blocking.
    Lint,
    /// Regenerate index.md and the changed directory catalogs.
    Index,
    /// Markdown style checks (never blocking); --fix --approve fixes whitespace and list markers.
    CheckMarkdown {
        /// Fix what can be fixed safely (trailing whitespace, mixed list markers); needs --approve.
        #[arg(long)]
        fix: bool,
        /// You approve the fixes (a person's decision: without it --fix only reports).
        #[arg(long)]
        approve: bool,
    },
    /// Vault, policy, counts and findings summary.
    Doctor,
    /// Create one note through the write transaction (the target must not exist).
    Ingest {
        /// Vault-relative path inside a P.A.R.A. folder (`.md` added if missing).
        name: String,
        /// The note type, one of the policy's types (by default Project, Area, Resource, Archive, Daily Log, System Guide).
        #[arg(long = "type", default_value = "Resource")]
        note_type: String,
        #[command(flatten)]
        text: NoteText,
        /// A tag for the note (repeatable).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// Where the note's content comes from (a URL or citation; frontmatter `resource`).
        #[arg(long)]
        resource: Option<String>,
        /// A key of your choosing: running the same command again with it returns the first receipt instead of failing.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Create one session synthesis note (Daily Log by default).
    Synthesize {
        /// Vault-relative path of the new note inside a P.A.R.A. folder (`.md` added if missing).
        name: String,
        #[command(flatten)]
        text: NoteText,
        /// The note type (default Daily Log); one of the policy's types.
        #[arg(long = "type", default_value = crate::api::policy::DEFAULT_SYNTHESIS_TYPE)]
        note_type: String,
        /// A tag for the note (repeatable).
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// A note this synthesis relates to, as a vault path or [[link]] (repeatable).
        #[arg(long = "related")]
        related: Vec<String>,
        /// Who owns the note (frontmatter `owner`).
        #[arg(long)]
        owner: Option<String>,
        /// A key of your choosing: running the same command again with it returns the first receipt instead of failing.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Store a content-addressed proposal to replace a note's whole text (never writes the note).
    Propose {
        /// Vault-relative path of the note to replace (inside a P.A.R.A. folder).
        path: String,
        /// File holding the full new note text; `-` reads standard input.
        #[arg(long, default_value = "-")]
        content_file: String,
        /// sha256 of the note version the edit is based on (refused if the note changed since).
        #[arg(long)]
        expected_sha256: Option<String>,
    },
    /// Apply a stored proposal by id; requires --approve.
    Apply {
        /// The proposal's id (`paravault approvals` lists them).
        proposal_id: String,
        /// You approve this change (required: a proposal is never applied without it; a `human` rule also needs `paravault approve`).
        #[arg(long)]
        approve: bool,
    },
    /// Approve a proposal as a person: the approver secret is prompted on the terminal (read
    /// from standard input when it is not a terminal), never taken as an argument.
    Approve {
        /// The proposal's id (`paravault approvals --pending` lists those waiting for a person).
        proposal_id: String,
        /// Your approver name (`paravault approver add`).
        #[arg(long)]
        approver: String,
        /// Why you decided so (kept in the decision record).
        #[arg(long, default_value = "")]
        comment: String,
    },
    /// Reject a proposal as a person (secret prompted as for approve); later applies fail
    /// with proposal_rejected.
    Reject {
        /// The proposal's id (`paravault approvals --pending` lists those waiting for a person).
        proposal_id: String,
        /// Your approver name (`paravault approver add`).
        #[arg(long)]
        approver: String,
        /// Why you decided so (kept in the decision record).
        #[arg(long, default_value = "")]
        comment: String,
    },
    /// List stored proposals and their state (--pending: only those waiting for a person);
    /// `approvals show ID` shows one with its diff and the lint gate's verdict.
    Approvals {
        /// Only the proposals waiting for a person's decision.
        #[arg(long)]
        pending: bool,
        #[command(subcommand)]
        action: Option<ApprovalsAction>,
    },
    /// Connect this vault to a git remote (`remote add origin URL`): one vault on several devices.
    Remote {
        #[command(subcommand)]
        action: RemoteAction,
    },
    /// Fetch the remote's commits, integrate them through the lint gate (conflicts become
    /// proposals a person decides), push this replica's; exits 0 in sync, 1 when conflicts wait.
    Replicate {
        /// Only say where this replica stands: ahead/behind the remote, uncommitted files,
        /// conflicts waiting, the last success (changes nothing here).
        #[arg(long)]
        status: bool,
    },
    /// Make a working replica of the vault at URL in FOLDER (files, a replica id and the first
    /// search index); `paravault --vault FOLDER replicate` keeps it in step.
    Clone {
        /// The git URL of the vault's remote.
        url: String,
        /// A new (or empty) folder for the replica.
        folder: std::path::PathBuf,
    },
    /// Manage approvers (secrets stored as argon2 hashes outside the vault) and their signing
    /// keys in this vault's registry.
    Approver {
        #[command(subcommand)]
        action: ApproverAction,
    },
    /// Sign the vault's policy as an approver.
    Policy {
        #[command(subcommand)]
        action: PolicyAction,
    },
    /// The gate on a shared remote: `gate install REPO` (a pre-receive hook), `gate check`.
    Gate {
        #[command(subcommand)]
        action: GateAction,
    },
    /// Show receipts; --verify checks the hash chain.
    History {
        /// How many receipts to show, newest last.
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Only the receipts after this sequence number.
        #[arg(long, default_value_t = 0)]
        after_seq: u64,
        /// Check the receipts' hash chain (and, with --check-files, the notes) instead of listing.
        #[arg(long)]
        verify: bool,
        /// With --verify: also check that each note holds the after_sha256 of the newest ok
        /// receipt that changed it (reads those notes).
        #[arg(long, requires = "verify")]
        check_files: bool,
    },
    /// Redundant, outdated, trivial and stale notes.
    RotAudit {
        /// Also find near-duplicate bodies from the stored dense vectors (needs a dense index).
        #[arg(long)]
        extended: bool,
        /// Also check links to the web (reaches the network; needs --approve and a policy that allows it).
        #[arg(long)]
        allow_link_rot: bool,
        /// Ask for the semantic-contradiction section, which needs a remote language model: none is configured in this engine, so the report names it as skipped.
        #[arg(long)]
        allow_remote_llm: bool,
        /// You approve the network access --allow-link-rot or --allow-remote-llm asks for.
        #[arg(long)]
        approve: bool,
        /// Items per list (default and bound from policy `maintenance.report_items_*`).
        #[arg(long, conflicts_with = "all")]
        max_items: Option<usize>,
        /// The `next_cursor` of a previous page.
        #[arg(long, conflicts_with = "all")]
        cursor: Option<String>,
        /// Print every item of every list (no paging).
        #[arg(long)]
        all: bool,
    },
    /// Move archived or expired notes into the archive folder (dry run unless --live --approve).
    Archive {
        /// Move the notes (without it: a dry run that lists what would move).
        #[arg(long)]
        live: bool,
        /// You approve the moves (required with --live).
        #[arg(long)]
        approve: bool,
    },
    /// Repair invalid frontmatter (dry run unless --live --approve).
    Heal {
        /// Repair the notes (without it: a dry run that lists the repairs).
        #[arg(long)]
        live: bool,
        /// You approve the repairs (required with --live).
        #[arg(long)]
        approve: bool,
    },
    /// Publish a complete search generation for the vault as it is on disk (FTS offline;
    /// --dense also builds or completes the dense index with the local model).
    Sync {
        /// Publish only the valid notes when some are invalid (they are named).
        #[arg(long)]
        allow_partial: bool,
        /// Rebuild the index from scratch (with --dense: re-embed every note, e.g. after a model change).
        #[arg(long)]
        force_rebuild: bool,
        /// Also build or complete the dense index (vectors for meaning) with the local embedding model.
        #[arg(long)]
        dense: bool,
        /// Allow an FTS-only sync to drop an existing dense index.
        #[arg(long)]
        accept_dense_loss: bool,
    },
    /// Search the vault's notes (the active published generation); --json prints the untrusted
    /// retrieval envelope.
    Search {
        /// What to search for (words, a phrase in quotes, or a question).
        query: String,
        /// How many notes to show (at most the policy's `search.max_results_cap`).
        #[arg(long, default_value_t = 10)]
        max_results: usize,
        /// auto (the default: hybrid with a dense index, else fts), fts (BM25 keywords), semantic or vector (meaning), hybrid (both fused), graph_assisted (hybrid plus linked notes) or reranked (cross-encoder).
        #[arg(long, default_value = "auto")]
        mode: String,
        /// current (the default: notes not superseded or expired), historical (only those) or all.
        #[arg(long, default_value = "current")]
        temporal_view: String,
        /// The date the temporal view is judged at, YYYY-MM-DD (default: today).
        #[arg(long)]
        as_of: Option<String>,
        /// A domain from the policy's `domains` or `.power/domains.yaml`: scopes the results to
        /// its folder, and --mode auto follows its search_priority.
        #[arg(long)]
        domain: Option<String>,
    },
    /// Serve the vault over MCP on stdio (protocol on stdout, logs on stderr).
    Mcp {
        /// Advertise and accept only read-only tools.
        #[arg(long)]
        read_only: bool,
        /// Also exit when this process is gone (the server always exits on stdin EOF and
        /// when re-parented; PARAVAULT_STDIO_WATCHDOG=0 disables the parent checks).
        #[arg(long, value_name = "PID")]
        parent_pid: Option<u32>,
        /// The tool surfaces to serve, comma-separated: power (P.O.W.E.R., the default),
        /// ctxvault, stepstone, vaultspec. Two surfaces may not define the same tool name.
        #[arg(long, value_name = "LIST", default_value = "power")]
        surface: String,
        /// Who is calling: surfaces with per-agent access (ctxvault's restricted vaults) decide
        /// with this name.
        #[arg(long, value_name = "NAME")]
        agent: Option<String>,
        /// Serve the default vault. Without --vault, PARAVAULT_VAULT_DIR or POWER_VAULT_DIR the
        /// server refuses to start unless this asks for the default vault explicitly (a client
        /// that forgot its vault must not write an agent's memory where nobody looks).
        #[arg(long)]
        default_vault: bool,
    },
    /// Keep the vault's folder journal until stopped (Linux, local file systems): one-shot
    /// writes then ask it which folders changed instead of a stat of every folder. Prints one
    /// JSON line once it watches.
    Watch,
    /// Serve the web UI for people (docs/web.md): review and decide proposals, browse, search.
    Web {
        /// Where to listen. Only a loopback address unless an approver is registered (then
        /// every page needs a login; put a TLS proxy in front: cookies are marked Secure).
        #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8742")]
        bind: std::net::SocketAddr,
        /// No POST route at all: browse, search and review only (no login; loopback only).
        #[arg(long)]
        read_only: bool,
        /// A host name people reach the server by (the TLS proxy's name), besides localhost,
        /// 127.0.0.1, [::1], the bind address and the policy's `approvals.review_url` host;
        /// repeatable. Requests naming any other host are answered 421 (DNS rebinding).
        #[arg(long, value_name = "NAME")]
        public_host: Vec<String>,
        /// Connections open at once, all clients together (503 beyond it; default 128).
        #[arg(long, value_name = "N")]
        max_connections: Option<usize>,
        /// Connections open at once from one client address (503 beyond it; default 32).
        #[arg(long, value_name = "N")]
        max_connections_per_client: Option<usize>,
    },
    /// Read one page of a category catalog.
    ReadSubIndex {
        /// The catalog's folder, e.g. 03_Resources.
        category: String,
        /// The page number (1 is the first).
        #[arg(long, default_value_t = 1)]
        page: usize,
    },
    /// Create, inspect or advance a durable work packet (`handoff_work`): the result in words, JSON with --json.
    Handoff {
        /// The request as JSON, e.g. '{"action":"list"}'.
        #[arg(long)]
        request: String,
    },
    /// The vault registry of the ctxvault surface (a file in the user's config folder, outside
    /// every vault): add, list or remove named vaults and who may use them.
    Vaults {
        #[command(subcommand)]
        action: vaults::VaultsAction,
    },
    /// Project goals: the stepstone operations (docs/goals.md); --json prints the envelope.
    Goals {
        #[command(subcommand)]
        command: goals::GoalsCommand,
    },
    /// Call the configured INFRA-1 broker (`infra_action`): the result in words, JSON with --json.
    Infra {
        /// The request as JSON, e.g. '{"operation":"status"}'.
        #[arg(long)]
        request: String,
    },
    /// Serve this vault's INFRA-1 broker on a Unix socket until stopped: agents' `infra_action`
    /// asks it for status, probe, rsync-dry-run, replicate and verify of the targets its
    /// configuration allows, over git. Prints one JSON line once it listens.
    Broker {
        /// The socket to listen on (default: .paravault/broker.sock in the vault).
        #[arg(long, value_name = "PATH")]
        socket: Option<PathBuf>,
        /// The broker's configuration: targets, approval, dry-run policy, principals (default:
        /// .paravault/broker.yaml in the vault).
        #[arg(long, value_name = "PATH")]
        config: Option<PathBuf>,
    },
}

/// Stable exit codes.
pub mod exit {
    pub const OK: u8 = 0;
    pub(crate) const FINDINGS: u8 = crate::error::ExitClass::Findings as u8;
    pub(crate) const USAGE: u8 = crate::error::ExitClass::Usage as u8;
    pub const VAULT: u8 = crate::error::ExitClass::Vault as u8;
    pub(crate) const IO: u8 = crate::error::ExitClass::Io as u8;
}

fn exit_code_of(error: &Error) -> u8 {
    error.row().exit as u8
}

/// The options every command opens its vault with: the clock, and the process's lifetime
/// (`Lifetime::OneShot` for one command; the servers say `Resident`).
fn options(lifetime: vault::Lifetime) -> VaultOptions {
    let today = std::env::var("PARAVAULT_TODAY").ok().and_then(|t| chrono::NaiveDate::parse_from_str(&t, "%Y-%m-%d").ok());
    // The instant notes the engine renders are stamped with (tests, reproducible runs).
    let now = std::env::var("PARAVAULT_NOW").ok().and_then(|t| chrono::DateTime::parse_from_rfc3339(&t).ok()).map(|t| t.to_utc());
    VaultOptions { today, now, lifetime }
}

/// This binary's absolute path (what an MCP client configuration must name).
fn this_binary() -> String {
    std::env::current_exe().ok().and_then(|p| p.canonicalize().ok()).map_or_else(|| "paravault".to_string(), |p| p.display().to_string())
}

/// Whether vaultspec's `invoke` started this process for an agent (the gateway sets the mark in
/// the environment it composes; no tool argument reaches it). Such a run writes for the agent
/// and never prompts.
fn run_by_gateway() -> bool {
    std::env::var_os(crate::mcp::vaultspec_gateway::GATEWAY_ENV).is_some_and(|v| v == "1")
}

/// Opens the vault for a person at the terminal (`Channel::Person`), or for the agent when the
/// MCP gateway ran this process; the default vault (and only it) is initialised on first use,
/// with its first search generation.
fn open(cli: &Cli) -> Result<Vault, Error> {
    open_as(cli, if run_by_gateway() { vault::Channel::Agent } else { vault::Channel::Person }, vault::Lifetime::OneShot)
}

/// `open` for a command that serves until stopped with a file watcher (`paravault web`).
fn open_resident(cli: &Cli) -> Result<Vault, Error> {
    open_as(cli, if run_by_gateway() { vault::Channel::Agent } else { vault::Channel::Person }, vault::Lifetime::Resident)
}

/// Serves MCP on stdio; on a terminal it first says that it waits for a client there.
fn serve_stdio_saying_so(vault: Vault, options: crate::mcp::McpOptions) -> Result<(), String> {
    if std::io::stdin().is_terminal() {
        render::note_on_stderr(&format!(
            "paravault mcp serves {} over stdio and waits for an MCP client on standard input \
             (an agent starts it; Ctrl-D or Ctrl-C ends it)",
            vault.root().display()
        ));
    }
    crate::mcp::serve_stdio(vault, options)
}

/// The vault this command uses: `--vault`, else the environment, else the current folder when
/// it looks like a vault (never the hidden default vault from inside one), else the default
/// vault. A vault chosen implicitly is named on standard error.
fn vault_root(cli: &Cli) -> Result<(std::path::PathBuf, vault::RootSource), Error> {
    let (root, source) = vault::resolve_root(cli.vault.as_deref())?;
    if source != vault::RootSource::Default {
        return Ok((root, source));
    }
    if let Ok(current) = std::env::current_dir()
        && current != root
        && vault::looks_like_a_vault(&current)
    {
        render::note_on_stderr(&format!("vault: {} (the current folder; --vault chooses another)", current.display()));
        return Ok((current, vault::RootSource::CurrentFolder));
    }
    render::note_on_stderr(&format!("vault: {} (the default vault; --vault chooses another)", root.display()));
    Ok((root, source))
}

/// Whether `paravault mcp` was told its vault (P.O.W.E.R.'s contract: the server requires its
/// vault before startup): `--vault`, `PARAVAULT_VAULT_DIR` or `POWER_VAULT_DIR`, or
/// `--default-vault` for the default vault and nothing else. Never the current folder: a client
/// starts the server wherever it likes. The refusal names the three ways and the client config.
fn mcp_vault_named(cli: &Cli, default_vault: bool) -> Result<(std::path::PathBuf, vault::RootSource), String> {
    let (root, source) = vault::resolve_root(cli.vault.as_deref()).map_err(|e| e.to_string())?;
    match (source, default_vault) {
        (vault::RootSource::Default, true) => {
            render::note_on_stderr(&format!("vault: {} (the default vault, --default-vault)", root.display()));
            Ok((root, source))
        }
        (vault::RootSource::Default, false) => Err(format!(
            "paravault mcp needs its vault: pass --vault /path/to/vault before `mcp`, or set PARAVAULT_VAULT_DIR or \
             POWER_VAULT_DIR (an MCP client config: \"args\": [\"--vault\", \"/path/to/vault\", \"mcp\"]); \
             --default-vault serves the default vault ({}) on purpose",
            root.display()
        )),
        (_, true) => Err(format!(
            "--default-vault asks for the default vault, but the vault is already named ({}); drop one of them",
            root.display()
        )),
        (_, false) => Ok((root, source)),
    }
}

/// Opens the vault, writing for `channel`, for a process of `lifetime`.
fn open_as(cli: &Cli, channel: vault::Channel, lifetime: vault::Lifetime) -> Result<Vault, Error> {
    let (root, source) = vault_root(cli)?;
    open_at(&root, source, channel, lifetime)
}

/// Opens the vault at `root`, writing for `channel`; the default vault is initialised on first
/// use.
fn open_at(root: &std::path::Path, source: vault::RootSource, channel: vault::Channel, lifetime: vault::Lifetime) -> Result<Vault, Error> {
    if source == vault::RootSource::Default && !root.exists() {
        let (vault, report) = Vault::init(root, options(lifetime))?;
        // A new default vault is searchable at once (its first generation, FTS, offline): the
        // first-run screen and the first `search` find the starter notes.
        vault.sync_vault(&SyncParams::default())?;
        tracing::info!(created = report.created_notes.len(), "initialised the default vault and published its first search generation");
        return Ok(vault.acting_for(channel));
    }
    Vault::open(root, options(lifetime)).map(|vault| vault.acting_for(channel))
}

/// Reads an approver secret: prompted without echo on a terminal (twice when `confirm`), else
/// the first line of standard input. Never an argument: it would land in shell history and `ps`.
fn read_secret(prompt: &str, confirm: bool) -> Result<String, Error> {
    let refuse = |reason: String| Error::InvalidArgument { name: "secret", reason };
    if run_by_gateway() {
        return Err(refuse("an approver secret is a person's, typed at a terminal; the MCP gateway never supplies one".into()));
    }
    if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password(prompt).map_err(|e| refuse(format!("cannot read it from the terminal: {e}")))?;
        if confirm {
            let again = rpassword::prompt_password("again: ").map_err(|e| refuse(format!("cannot read it from the terminal: {e}")))?;
            if again != first {
                return Err(refuse("the two entries differ".into()));
            }
        }
        Ok(first)
    } else {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map_err(|e| refuse(format!("cannot read it from standard input: {e}")))?;
        let secret = line.strip_suffix('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).unwrap_or(&line).to_string();
        if secret.is_empty() {
            return Err(refuse("standard input held no secret".into()));
        }
        Ok(secret)
    }
}

/// `approve` / `reject`: shows what is decided, reads the secret, records the decision.
fn decide(
    cli: &Cli,
    out: &render::Output,
    proposal_id: &str,
    approver: &str,
    comment: &str,
    decision: crate::api::approvals::Decision,
) -> Result<crate::api::approvals::DecisionRecord, Error> {
    let vault = open(cli)?;
    // What is decided (diff and lint verdict) is shown before the secret is asked for.
    out.review_before_decision(&vault.proposal_review(proposal_id)?);
    let secret = read_secret(&format!("secret for {approver}: "), false)?;
    vault.decide(&crate::api::approvals::DecisionRequest {
        proposal_id: proposal_id.to_string(),
        decision,
        approver: approver.to_string(),
        secret,
        channel: crate::api::approvals::ApprovalChannel::Cli,
        comment: comment.to_string(),
    })
}

/// `approver key NAME`: the public key, made first (the secret prompted) when there is none.
fn approver_key(out: &render::Output, name: &str) -> Result<u8, Error> {
    let dir = crate::api::approvals::secrets::default_dir()?;
    let (key, made) = match crate::api::approvals::secrets::public_key(&dir, name)? {
        Some(key) => (key, false),
        None => {
            let secret = read_secret(&format!("secret for {name}: "), false)?;
            (crate::api::approvals::secrets::add_signing_key(&dir, name, &secret)?, true)
        }
    };
    Ok(out.serialized(&serde_json::json!({"approver": name, "public_key": key, "created": made}), &key))
}

/// `approver register` / `revoke`: the signer's secret is prompted.
fn change_key(
    cli: &Cli,
    out: &render::Output,
    action: crate::api::approvals::keys::KeyAction,
    name: &str,
    public_key: Option<&str>,
    signer: &str,
) -> Result<u8, Error> {
    let vault = open(cli)?;
    let public_key = match (public_key, action) {
        (Some(k), _) => Some(k.to_string()),
        (None, crate::api::approvals::keys::KeyAction::Revoke) => {
            let active = vault.approver_keys()?.unwrap_or_default();
            let keys: Vec<&String> = active.keys.get(name).map(|k| k.iter().collect()).unwrap_or_default();
            match keys.as_slice() {
                [only] => Some((*only).clone()),
                [] => return Err(Error::InvalidArgument { name: "name", reason: format!("'{name}' has no active key in this vault") }),
                _ => {
                    return Err(Error::InvalidArgument {
                        name: "public-key",
                        reason: format!("'{name}' has {} active keys: name one", keys.len()),
                    });
                }
            }
        }
        (None, _) => None,
    };
    let secret = read_secret(&format!("secret for {signer}: "), false)?;
    let change =
        vault.change_approver_key(&crate::api::approvals::secrets::default_dir()?, action, name, public_key.as_deref(), signer, &secret)?;
    let verb = if change.action == crate::api::approvals::keys::KeyAction::Add { "registered" } else { "revoked" };
    Ok(out.serialized(&change, &format!("{verb} {name}'s key {} (entry {}, signed by {signer})", change.public_key, change.seq)))
}

/// `gate check`: the hook's body. Refusals go to standard error (git shows them to the
/// pusher as `remote:` lines) and fail the command, so git changes nothing.
fn gate_check(out: &render::Output, repository: &std::path::Path) -> Result<u8, Error> {
    let mut updates = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut updates).map_err(|e| Error::io("reading", "the ref updates", e))?;
    let report = crate::api::replicate::gate::check(repository, &updates, options(vault::Lifetime::OneShot).clock().today())?;
    if report.refusals.is_empty() {
        return Ok(
            out.serialized(&report, &format!("gate: {} update(s), {} path(s) checked, accepted", report.updates, report.paths_checked))
        );
    }
    for refusal in &report.refusals {
        eprintln!("paravault gate refused {refusal}");
    }
    Err(Error::PushRefused { summary: report.refusals.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ") })
}

/// Reads `-` (standard input) or a file.
fn read_text(source: &str) -> Result<String, Error> {
    use std::io::Read;
    let mut text = String::new();
    if source == "-" {
        std::io::stdin().read_to_string(&mut text).map_err(|e| Error::io("reading", "standard input", e))?;
        return Ok(text);
    }
    std::fs::read_to_string(source).map_err(|e| Error::InvalidArgument { name: "content", reason: format!("cannot read '{source}': {e}") })
}

/// The text of a note `ingest` and `synthesize` create: its title, description and body.
#[derive(Debug, clap::Args)]
pub struct NoteText {
    /// The note's title (frontmatter `title`).
    #[arg(long)]
    title: String,
    /// One line saying what the note is (frontmatter `description`).
    #[arg(long)]
    description: String,
    /// Note body as text.
    #[arg(long, conflicts_with = "content_file")]
    content: Option<String>,
    /// File holding the note body; `-` (the default) reads standard input.
    #[arg(long)]
    content_file: Option<String>,
}

impl NoteText {
    /// The note body: inline text, else the named file, else standard input.
    fn body(&self) -> Result<String, Error> {
        match (&self.content, &self.content_file) {
            (Some(text), _) => Ok(text.clone()),
            (None, Some(file)) => read_text(file),
            (None, None) => read_text("-"),
        }
    }
}

/// Parses a `--request` JSON argument into a typed request (unknown fields are refused).
/// A top-level string field of a `--request` JSON (the action or operation it names), for the
/// summary line; empty when absent.
fn request_field(request: &str, field: &str) -> String {
    serde_json::from_str::<serde_json::Value>(request).ok().and_then(|v| v[field].as_str().map(str::to_string)).unwrap_or_default()
}

fn parse_request<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, Error> {
    serde_json::from_str(text).map_err(|e| Error::InvalidArgument { name: "request", reason: e.to_string() })
}

/// Runs the CLI and returns the process exit code.
pub fn run(cli: Cli) -> ExitCode {
    let Some(command) = &cli.command else {
        if !std::io::stdin().is_terminal() {
            // Most likely an MCP client whose config has `args: []` (P.O.W.E.R.'s, with only the
            // command swapped): say on stderr, which clients log, what starts the server.
            render::note_on_stderr(
                "paravault without a command prints its first-run screen and serves no MCP: an MCP client's `args` \
                 must be [\"--vault\", \"/path/to/vault\", \"mcp\"] (or [\"mcp\"] with PARAVAULT_VAULT_DIR or POWER_VAULT_DIR set)",
            );
        }
        let out = render::Output { json: cli.json, color: std::io::stdout().is_terminal() };
        return match open(&cli).and_then(|v| v.doctor()) {
            Ok(report) => ExitCode::from(out.first_run(&report, &this_binary())),
            Err(error) => {
                eprintln!("error [{}]: {error}", error.code());
                ExitCode::from(exit_code_of(&error))
            }
        };
    };
    if let Command::Mcp { read_only, parent_pid, surface, agent, default_vault } = command {
        // A bad selection is refused before the vault is opened or anything is served.
        let surfaces = match crate::mcp::surface::Surface::parse_list(surface)
            .and_then(|surfaces| crate::mcp::surface::catalogs(&surfaces).map(|_| surfaces))
        {
            Ok(surfaces) => surfaces,
            Err(message) => {
                eprintln!("error [invalid_argument]: --surface: {message}");
                return ExitCode::from(exit::USAGE);
            }
        };
        let (root, source) = match mcp_vault_named(&cli, *default_vault) {
            Ok(named) => named,
            Err(message) => {
                eprintln!("error [invalid_argument]: {message}");
                return ExitCode::from(exit::USAGE);
            }
        };
        let options =
            crate::mcp::McpOptions { read_only: *read_only, parent_pid: *parent_pid, surfaces, agent: agent.clone(), cli: Cli::command() };
        // The MCP server writes for the agent on the other end of stdio.
        return match open_at(&root, source, vault::Channel::Agent, vault::Lifetime::Resident)
            .map(|vault| vault.writing_for_agent(agent.clone().filter(|a| !a.trim().is_empty())))
        {
            Ok(vault) => match serve_stdio_saying_so(vault, options) {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    tracing::error!(%message, "MCP server stopped");
                    ExitCode::from(exit::IO)
                }
            },
            Err(error) => {
                eprintln!("error [{}]: {error}", error.code());
                ExitCode::from(exit_code_of(&error))
            }
        };
    }
    if let Command::Web { bind, read_only, public_host, max_connections, max_connections_per_client } = command {
        let served = crate::web::WebOptions::loopback(bind.port())
            .map(|options| crate::web::WebOptions {
                bind: *bind,
                read_only: *read_only,
                public_hosts: public_host.clone(),
                max_connections: max_connections.unwrap_or(options.max_connections),
                max_connections_per_client: max_connections_per_client.unwrap_or(options.max_connections_per_client),
                ..options
            })
            .and_then(|options| open_resident(&cli).map(|vault| (vault, options)));
        return match served {
            Ok((vault, options)) => match crate::web::serve(vault, options) {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("error: {message}");
                    ExitCode::from(exit::USAGE)
                }
            },
            Err(error) => {
                eprintln!("error [{}]: {error}", error.code());
                ExitCode::from(exit_code_of(&error))
            }
        };
    }
    let out = render::Output { json: cli.json, color: std::io::stdout().is_terminal() };
    let result = match command {
        Command::Init => vault_root(&cli)
            .and_then(|(root, _)| Vault::init(&root, options(vault::Lifetime::OneShot)))
            .map(|(_, report)| out.init(&report)),
        Command::Lint => open(&cli).and_then(|v| v.lint_vault()).map(|r| out.lint(&r)),
        // `watch` keeps no watcher-fed model: its replication rounds plan each write from the
        // persisted copy, as one command does.
        Command::Watch => open(&cli)
            .and_then(|v| {
                let stop = std::sync::atomic::AtomicBool::new(false);
                std::thread::scope(|scope| {
                    // A replica replicates on the policy's interval while it is watched.
                    let (watched_vault, stopping) = (&v, &stop);
                    let replicating =
                        v.replication_interval().map(|every| scope.spawn(move || watched_vault.replicate_every(every, stopping)));
                    // One line, flushed at once: whoever started it reads it to know it watches.
                    let watched = v.keep_folder_journal(|ready| {
                        use std::io::Write as _;
                        let mut stdout = std::io::stdout().lock();
                        let _ = writeln!(stdout, "{}", serde_json::to_string(ready).unwrap_or_default());
                        let _ = stdout.flush();
                    });
                    stop.store(true, std::sync::atomic::Ordering::Release);
                    if let Some(replicating) = replicating {
                        replicating.thread().unpark();
                    }
                    watched
                })
            })
            .map(|()| exit::OK),
        Command::Broker { socket, config } => open_as(&cli, vault::Channel::Agent, vault::Lifetime::Resident)
            .and_then(|v| {
                let options = crate::api::handoff::BrokerOptions { socket: socket.clone(), config: config.clone() };
                // One line, flushed at once: whoever started it reads it to know it listens.
                v.serve_broker(&options, |ready| {
                    use std::io::Write as _;
                    let mut stdout = std::io::stdout().lock();
                    let _ = writeln!(stdout, "{}", serde_json::to_string(ready).unwrap_or_default());
                    let _ = stdout.flush();
                })
            })
            .map(|()| exit::OK),
        Command::Index => open(&cli).and_then(|v| v.generate_index()).map(|r| out.index(&r)),
        Command::CheckMarkdown { fix: false, .. } => open(&cli).and_then(|v| v.check_markdown()).map(|r| out.markdown(&r)),
        Command::CheckMarkdown { fix: true, approve } => open(&cli)
            .and_then(|v| v.check_markdown_tool(&MarkdownRequest { fix: true, approved: *approve }))
            .map(|r| out.detailed(&r, &format!("fixed {} notes", r.fixed_notes.len()))),
        Command::RotAudit { extended, allow_link_rot, allow_remote_llm, approve, max_items, cursor, all } => open(&cli)
            .and_then(|v| {
                let request = RotRequest {
                    extended: *extended,
                    allow_link_rot: *allow_link_rot,
                    allow_remote_llm: *allow_remote_llm,
                    approved: *approve,
                    max_items: *max_items,
                    cursor: cursor.clone(),
                    unbounded: *all,
                };
                progress::with_bar(cli.json, |progress| v.rot_audit_with_progress(&request, progress))
            })
            .map(|r| out.rot(&r)),
        Command::Archive { live, approve } => open(&cli)
            .and_then(|v| {
                progress::with_bar(cli.json, |progress| {
                    v.archive_notes_with_progress(&ArchiveRequest { dry_run: !*live, approved: *approve }, progress)
                })
            })
            .map(|r| {
                out.detailed(
                    &r,
                    &format!(
                        "{} {} notes, {} link rewrites, {} refused{}",
                        if r.dry_run { "would archive" } else { "archived" },
                        r.moves.len(),
                        r.link_rewrites.len(),
                        r.refused.len(),
                        if r.dry_run { " (a dry run: `paravault archive --live --approve` does it)" } else { "" }
                    ),
                )
            }),
        Command::Heal { live, approve } => open(&cli)
            .and_then(|v| {
                progress::with_bar(cli.json, |progress| {
                    v.heal_frontmatter_with_progress(&HealRequest { dry_run: !*live, approved: *approve }, progress)
                })
            })
            .map(|r| {
                out.detailed(
                    &r,
                    &format!(
                        "{} {} notes, {} refused{}",
                        if r.dry_run { "would heal" } else { "healed" },
                        r.notes.len(),
                        r.refused.len(),
                        if r.dry_run { " (a dry run: `paravault heal --live --approve` does it)" } else { "" }
                    ),
                )
            }),
        Command::Doctor => open(&cli).and_then(|v| v.doctor()).map(|r| out.doctor(&r)),
        Command::Remote { action: RemoteAction::Add { name, url } } => open(&cli).and_then(|v| v.remote_add(name, url)).map(|r| {
            let made = if r.initialised_repository { " (it is now a git repository)" } else { "" };
            out.detailed(
                &r,
                &format!(
                    "{} is a replica of {} '{}' on branch {}{made}; run `paravault replicate` to push it",
                    r.vault, r.remote, r.url, r.branch
                ),
            )
        }),
        Command::Replicate { status: true } => open(&cli).and_then(|v| v.replica_status()).map(|s| out.replica_status(&s)),
        Command::Replicate { status: false } => {
            open(&cli).and_then(|v| progress::with_bar(cli.json, |progress| v.replicate_with_progress(progress))).map(|r| out.replicate(&r))
        }
        Command::Clone { url, folder } => crate::api::replicate::clone_vault(url, folder, options(vault::Lifetime::OneShot)).map(|r| {
            out.detailed(&r, &format!("cloned {} into {} (replica {}, {} notes searchable)", r.url, r.vault, r.replica_id, r.notes_indexed))
        }),
        Command::Ingest { name, note_type, text, tags, resource, idempotency_key } => text
            .body()
            .and_then(|content| {
                let request = IngestRequest {
                    name: name.clone(),
                    note_type: note_type.clone(),
                    title: text.title.clone(),
                    description: text.description.clone(),
                    content,
                    resource: resource.clone(),
                    tags: tags.clone(),
                    expected_sha256: None,
                    idempotency_key: idempotency_key.clone(),
                };
                open(&cli).and_then(|v| v.ingest_note(&request))
            })
            .map(|r| out.receipt(&r.to_value())),
        Command::Synthesize { name, text, note_type, tags, related, owner, idempotency_key } => text
            .body()
            .and_then(|content| {
                let request = SynthesizeRequest {
                    name: name.clone(),
                    title: text.title.clone(),
                    description: text.description.clone(),
                    content,
                    note_type: note_type.clone(),
                    tags: tags.clone(),
                    related: related.clone(),
                    owner: owner.clone(),
                    expected_sha256: None,
                    idempotency_key: idempotency_key.clone(),
                };
                open(&cli).and_then(|v| v.synthesize_session(&request))
            })
            .map(|r| out.receipt(&r.to_value())),
        Command::Propose { path, content_file, expected_sha256 } => read_text(content_file)
            .and_then(|content| open(&cli).and_then(|v| v.propose_memory_change(path, &content, None, expected_sha256.as_deref())))
            .map(|p| out.proposal(&p)),
        Command::Apply { proposal_id, approve } => {
            open(&cli).and_then(|v| v.apply_proposal_by_id(proposal_id, *approve)).map(|r| out.receipt(&r.to_value()))
        }
        Command::Approve { proposal_id, approver, comment } => {
            decide(&cli, &out, proposal_id, approver, comment, crate::api::approvals::Decision::Approved)
                .map(|r| out.detailed(&r, &format!("approved {proposal_id}")))
        }
        Command::Reject { proposal_id, approver, comment } => {
            decide(&cli, &out, proposal_id, approver, comment, crate::api::approvals::Decision::Rejected)
                .map(|r| out.detailed(&r, &format!("rejected {proposal_id}")))
        }
        Command::Approvals { action: Some(ApprovalsAction::Show { proposal_id }), .. } => {
            open(&cli).and_then(|v| v.proposal_review(proposal_id)).map(|review| out.review(&review))
        }
        Command::Approvals { pending, action: None } => open(&cli).and_then(|v| v.proposals()).map(|list| {
            let list: Vec<_> = list
                .into_iter()
                .filter(|p| {
                    !*pending
                        || (p.state == crate::api::approvals::ProposalState::Pending
                            && p.approver == crate::api::approvals::Approver::Human)
                })
                .collect();
            let lines: Vec<String> = list
                .iter()
                .map(|p| {
                    format!(
                        "{}  {:<9} {:<22} approver: {:<6} {}  {}",
                        p.proposal_id,
                        render::word(&p.state),
                        render::word(&p.operation),
                        render::word(&p.approver),
                        p.paths.join(", "),
                        p.created_at
                    )
                })
                .collect();
            out.serialized(&list, &format!("{} proposals\n{}", list.len(), lines.join("\n")))
        }),
        Command::Approver { action: ApproverAction::Add { name } } => read_secret(&format!("new secret for {name}: "), true)
            .and_then(|secret| crate::api::approvals::secrets::add_approver(&crate::api::approvals::secrets::default_dir()?, name, &secret))
            .map(|()| out.serialized(&serde_json::json!({"approver": name, "added": true}), &format!("approver {name} added"))),
        Command::Approver { action: ApproverAction::Key { name } } => approver_key(&out, name),
        Command::Approver { action: ApproverAction::Register { name, public_key, signed_by } } => {
            let signer = signed_by.as_deref().unwrap_or(name);
            change_key(&cli, &out, crate::api::approvals::keys::KeyAction::Add, name, public_key.as_deref(), signer)
        }
        Command::Approver { action: ApproverAction::Revoke { name, public_key, signed_by } } => {
            change_key(&cli, &out, crate::api::approvals::keys::KeyAction::Revoke, name, public_key.as_deref(), signed_by)
        }
        Command::Policy { action: PolicyAction::Sign { approver } } => open(&cli).and_then(|vault| {
            let secret = read_secret(&format!("secret for {approver}: "), false)?;
            let signature = vault.sign_policy(&crate::api::approvals::secrets::default_dir()?, approver, &secret)?;
            Ok(out.serialized(&signature, &format!("policy signed by {approver} (sha256 {})", signature.policy_sha256)))
        }),
        Command::Gate { action: GateAction::Install { repository, branch, binary } } => {
            let binary = match binary {
                Some(b) => Ok(b.clone()),
                None => crate::api::replicate::gate::current_binary(),
            };
            binary.and_then(|b| crate::api::replicate::gate::install(repository, branch, &b)).map(|r| {
                out.serialized(&r, &format!("gate installed on {} (branch {}; hook {} runs {})", r.repository, r.branch, r.hook, r.binary))
            })
        }
        Command::Gate { action: GateAction::Check { repository } } => gate_check(&out, repository),
        Command::Approver { action: ApproverAction::List } => crate::api::approvals::secrets::default_dir()
            .and_then(|dir| crate::api::approvals::secrets::approver_names(&dir))
            .map(|names| out.serialized(&names, &names.join("\n"))),
        Command::History { limit, after_seq, verify, check_files } => open(&cli).and_then(|v| {
            if *verify {
                v.verify_history_with(*check_files).map(|report| out.chain(&report))
            } else {
                v.read_memory_history(*limit, *after_seq).map(|h| out.history(&h))
            }
        }),
        Command::Sync { allow_partial, force_rebuild, dense, accept_dense_loss } => open(&cli)
            .and_then(|v| {
                let params = SyncParams {
                    allow_partial: *allow_partial,
                    force_rebuild: *force_rebuild,
                    fts_only: !*dense,
                    accept_dense_loss: *accept_dense_loss,
                };
                progress::with_bar(cli.json, |progress| v.sync_vault_with_progress(&params, progress))
            })
            .map(|r| out.sync(&r)),
        Command::Search { query, max_results, mode, temporal_view, as_of, domain } => open(&cli)
            .and_then(|v| {
                let params = SearchParams {
                    query: query.clone(),
                    max_results: *max_results,
                    search_mode: mode.clone(),
                    temporal_view: temporal_view.clone(),
                    as_of: as_of.clone(),
                    domain: domain.clone(),
                };
                // A vault never synced (a folder of Obsidian notes) gets its first generation
                // now, offline and by keyword; the envelope's fallback says so.
                v.search(&params)
            })
            .map(|e| out.envelope(&e)),
        Command::Mcp { .. } | Command::Web { .. } => unreachable!("handled above"),
        Command::ReadSubIndex { category, page } => open(&cli).and_then(|v| v.read_sub_index(category, *page)).map(|text| out.text(&text)),
        Command::Handoff { request } => parse_request(request)
            .and_then(|request| open(&cli).and_then(|v| v.handoff_work(request)))
            .map(|r| out.detailed(&r, &format!("handoff {}: done", request_field(request, "action")))),
        Command::Infra { request } => {
            parse_request(request).and_then(|request| open(&cli).and_then(|v| v.infra_action(request))).map(|r| {
                let value = serde_json::to_value(&r).unwrap_or_default();
                out.detailed(&r, &format!("infra {}: {}", request_field(request, "operation"), value["status"].as_str().unwrap_or("done")))
            })
        }
        Command::Vaults { action } => vaults::run(action).map(|(r, summary)| out.detailed(&r, &summary)),
        Command::Goals { command } => {
            goals::request(command).and_then(|request| open(&cli).map(|v| crate::api::goals::run(&v, request))).map(|e| out.goals(&e))
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(error) => {
            out.error(&error);
            if !cli.json
                && let Some(hint) = folder_hint(&cli, &error)
            {
                render::note_on_stderr(&hint);
            }
            ExitCode::from(exit_code_of(&error))
        }
    }
}

/// For a note path outside the P.A.R.A. folders: the vault's folders, and the one the path
/// most likely meant.
fn folder_hint(cli: &Cli, error: &Error) -> Option<String> {
    let Error::PathRefused { path, reason: crate::error::PathRefusal::NotInParaFolder } = error else { return None };
    let (root, _) = vault::resolve_root(cli.vault.as_deref()).ok()?;
    let policy = crate::api::policy::LoadedPolicy::load(&root).ok()?;
    let folders = &policy.policy.layout.para_folders;
    let top = path.split('/').next().unwrap_or("");
    let meant = if path.contains('/') { crate::api::note::closest(top, folders) } else { None };
    let mut hint = format!("  the P.A.R.A. folders: {}", folders.join(", "));
    if let Some(folder) = meant {
        hint.push_str(&format!(" (did you mean {folder}/{}?)", path.split_once('/').map_or("", |(_, rest)| rest)));
    }
    Some(hint)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every flag and argument of every command, with its path (`paravault goals add --title`).
    fn undocumented(command: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            if arg.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                out.push(format!("{path} {id}"));
            }
        }
        for sub in command.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let sub_path = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none_or(|a| a.to_string().trim().is_empty()) {
                out.push(format!("{sub_path} (the command)"));
            }
            undocumented(sub, &sub_path, out);
        }
    }

    #[test]
    fn messages_speak_cli_words_not_tool_parameters() {
        use super::render::cli_words;
        assert_eq!(cli_words("apply_memory_change requires approved=true"), "applying a proposal requires --approve");
        assert_eq!(
            cli_words("call sync_vault with fts_only=false to keep the dense index current, or accept_dense_loss=true to drop it"),
            "run `paravault sync --dense` to keep the dense index current, or --accept-dense-loss to drop it"
        );
        assert_eq!(
            cli_words("re-read the note with read_note and base the change on its current sha256"),
            "open the note again and base the change on its current sha256"
        );
        // Every remediation of the error table, in CLI words, names no tool parameter.
        for row in crate::error::codes::ALL {
            let text = cli_words(row.remediation);
            for word in [
                "fts_only",
                "accept_dense_loss",
                "approved=true",
                "allow_partial",
                "read_note",
                "sync_vault",
                "get_server_info",
                "lint_vault",
                "propose_memory_change",
                "generate_index",
                "ensure_sub_index",
                "search_mode=",
                "call again",
            ] {
                assert!(!text.contains(word), "{}: {text}", row.code);
            }
        }
    }

    #[test]
    fn every_command_flag_and_argument_has_help() {
        let mut missing = Vec::new();
        undocumented(&super::Cli::command(), "paravault", &mut missing);
        assert!(missing.is_empty(), "{} without help:\n{}", missing.len(), missing.join("\n"));
    }
}
