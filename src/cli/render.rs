//! Human and `--json` rendering of reports: the only place in the CLI that prints.

use std::io::Write;

use serde::Serialize;

use super::exit;
use crate::api::doctor::DoctorReport;
use crate::api::lint::LintReport;
use crate::api::lint::Severity;
use crate::error::Error;
use crate::vault::{IndexReport, InitReport, MarkdownReport};

/// Where and how to print.
pub struct Output {
    pub json: bool,
    pub color: bool,
}

/// Pretty JSON on standard output, with every character that could hide or reorder text on a
/// terminal written as a JSON escape (`note::visible`: the same value for a JSON reader).
fn print_json<T: Serialize>(value: &T) {
    let json = serde_json::to_string_pretty(value).unwrap_or_default();
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{}", crate::api::note::visible::escape_json(&json));
}

/// An enum as its serialized word (`pending`, `caller`, `cli`): what `--json` says, never a
/// Rust spelling.
pub(crate) fn word<T: Serialize>(value: &T) -> String {
    serde_json::to_value(value).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

/// A proposal as a person reviews it: what, where, state, then per note the unified diff and the
/// lint gate's verdict on the after-images (or, for an action, the request that runs).
pub(crate) fn review_text(review: &crate::api::approvals::ProposalReview) -> String {
    let status = &review.status;
    let mut text = format!(
        "proposal {}\n  operation: {} ({})\n  proposed: {} by {}\n  state: {}, approver required: {}\n  paths: {}\n",
        status.proposal_id,
        status.operation.name(),
        status.operation.tool(),
        status.created_at,
        status.proposed_by,
        word(&status.state),
        word(&status.approver),
        if status.paths.is_empty() { "(none)".to_string() } else { status.paths.join(", ") },
    );
    if let Some(decision) = &status.decision {
        text.push_str(&format!(
            "  decided: {} by {} ({}) at {}\n",
            decision.decision.name(),
            decision.approver,
            word(&decision.channel),
            decision.decided_at
        ));
    }
    if let Some(request) = &review.request {
        text.push_str(&format!("\nrequest that runs once approved:\n{}\n", serde_json::to_string_pretty(request).unwrap_or_default()));
    }
    for change in &review.changes {
        if change.removes {
            text.push_str(&format!("\nremoves {}\n", change.path));
        }
        if change.diff.is_empty() {
            text.push_str(&format!("\n{}: no change to its current text\n", change.path));
        } else {
            text.push('\n');
            text.push_str(&change.diff);
            if !change.diff.ends_with('\n') {
                text.push('\n');
            }
        }
    }
    if let Some(gate) = &review.gate {
        text.push_str(&format!(
            "\nlint gate on the after-image: {} ({} blocking, {} warnings)\n",
            if gate.passes { "passes" } else { "REFUSES" },
            gate.blocking.len(),
            gate.warnings.len()
        ));
        for f in gate.blocking.iter().chain(&gate.warnings) {
            text.push_str(&format!("  [{}] {} {}: {}\n", word(&f.severity), f.rule, f.path, f.message));
        }
    }
    text
}

/// A message of the application API (worded for MCP callers) in the CLI's words: its tool
/// parameters become the flags a person types, its tool names the commands.
pub(crate) fn cli_words(text: &str) -> String {
    const WORDS: &[(&str, &str)] = &[
        ("run sync with fts_only=false", "run `paravault sync --dense`"),
        ("sync_vault with fts_only=false and force_rebuild=true", "`paravault sync --dense --force-rebuild`"),
        ("sync_vault fts_only=false", "`paravault sync --dense`"),
        ("call sync_vault with fts_only=false", "run `paravault sync --dense`"),
        ("sync_vault with fts_only=false", "`paravault sync --dense`"),
        ("Sync with fts_only=false", "Run `paravault sync --dense`"),
        ("sync_vault with force_rebuild=true", "`paravault sync --force-rebuild`"),
        ("call sync_vault with allow_partial=true", "run `paravault sync --allow-partial` (`paravault heal` repairs missing frontmatter)"),
        ("run sync_vault", "run `paravault sync`"),
        ("fts_only=false", "--dense"),
        ("accept_dense_loss=true", "--accept-dense-loss"),
        ("force_rebuild=true", "--force-rebuild"),
        ("allow_partial=true", "--allow-partial"),
        ("call again with approved=true", "run it again with --approve"),
        ("approved=true", "--approve"),
        ("re-read the note with read_note", "open the note again"),
        ("search_mode=", "--mode "),
        ("dry_run=false", "--live"),
        ("lint_vault", "`paravault lint`"),
        ("heal_frontmatter_tool", "`paravault heal`"),
        ("call ensure_sub_index (or generate_index) first", "run `paravault index` first"),
        ("read_sub_index lists notes", "`paravault read-sub-index FOLDER` lists notes"),
        ("call propose_memory_change again and pass its result unchanged", "run `paravault propose` again and use the id it prints"),
        ("propose it with propose_memory_change", "propose it with `paravault propose`"),
        ("propose_memory_change", "`paravault propose`"),
        ("a human_approval_required error", "`paravault approvals`"),
        ("see get_server_info with probe_provider=true", "see `paravault doctor`"),
        ("call get_server_info with probe_provider=true", "run `paravault doctor`"),
        ("run get_server_info and", "run `paravault doctor` and"),
        ("(see get_server_info)", "(`paravault doctor` names it)"),
        ("omit vault_path or pass exactly the configured vault root", "pass --vault with the vault's root folder"),
        ("read_memory_history lists them", "`paravault history` lists them"),
        ("use a new idempotency_key", "use a new --idempotency-key"),
        ("call list_vaults and", "run `paravault vaults list` and"),
        ("apply_memory_change requires", "applying a proposal requires"),
        ("show the proposal to the user and", "review it (`paravault approvals show ID`) and"),
        ("and call again", "and run it again"),
        ("then call again", "then run it again"),
        ("call again", "run it again"),
    ];
    let mut out = text.to_string();
    for (api, cli) in WORDS {
        if out.contains(api) {
            out = out.replace(api, cli);
        }
    }
    out
}

/// Human text on standard output. Everything printed for a person passes here or through
/// The receipt fields P.O.W.E.R.'s format stores as strings (power.receipt.v1: "all values are
/// strings") that are numbers or booleans: the CLI's `--json` prints them as such. The stored
/// line is untouched (`history --verify` hashes it; MCP's `read_memory_history` returns it as
/// stored, the contract's shape); docs/compatibility.md says so.
const RECEIPT_COUNTS: [&str; 4] = ["notes_scanned", "notes_indexed", "notes_excluded", "lint_orphans"];

/// A receipt with its counts as integers, `duration_ms` as a number and `recovered` as a
/// boolean; a value that does not parse is left as it is.
pub(crate) fn numbers_as_numbers(receipt: &serde_json::Value) -> serde_json::Value {
    let mut out = receipt.clone();
    let Some(map) = out.as_object_mut() else { return out };
    for key in RECEIPT_COUNTS {
        if let Some(n) = map.get(key).and_then(|v| v.as_str()).and_then(|s| s.parse::<u64>().ok()) {
            map.insert(key.to_string(), serde_json::Value::from(n));
        }
    }
    if let Some(ms) = map.get("duration_ms").and_then(|v| v.as_str()).and_then(|s| s.parse::<f64>().ok())
        && let Some(number) = serde_json::Number::from_f64(ms)
    {
        map.insert("duration_ms".into(), serde_json::Value::Number(number));
    }
    if let Some(flag) = map.get("recovered").and_then(|v| v.as_str()).and_then(|s| s.parse::<bool>().ok()) {
        map.insert("recovered".into(), serde_json::Value::Bool(flag));
    }
    out
}

/// `print_json`: note text, paths, titles and proposals are untrusted, so control, bidi and
/// invisible characters are shown as escapes (`note::visible`) and can never move the cursor,
/// erase a line or hide one.
fn say(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(crate::api::note::visible::escape(text).as_bytes());
}

/// A line for the person on standard error (never on stdout, which a script may parse).
pub(crate) fn note_on_stderr(text: &str) {
    say_err(&format!("{text}\n"));
}

/// `say` for standard error.
fn say_err(text: &str) {
    let _ = std::io::stderr().lock().write_all(crate::api::note::visible::escape(text).as_bytes());
}

impl Output {
    pub fn error(&self, error: &Error) {
        if self.json {
            let body = serde_json::json!({
                "error": { "code": error.code(), "message": error.to_string(), "retryable": error.retryable() }
            });
            print_json(&body);
        } else {
            let mut text = format!("error[{}]: {}\n", error.code(), cli_words(&error.to_string()));
            let remediation = error.row().remediation;
            if !remediation.is_empty() {
                text.push_str(&format!("  what to do: {}\n", cli_words(remediation)));
            }
            say_err(&text);
        }
    }

    pub fn text(&self, text: &str) -> u8 {
        if self.json {
            print_json(&serde_json::json!({ "content": text }));
        } else {
            say(text);
        }
        exit::OK
    }

    /// Any serializable report: JSON with --json, else a one-line summary plus the JSON.
    /// `paravault approvals show ID`.
    pub fn review(&self, review: &crate::api::approvals::ProposalReview) -> u8 {
        if self.json {
            print_json(review);
        } else {
            say(&review_text(review));
        }
        exit::OK
    }

    /// Shows the person what they are about to decide, on standard error (standard output
    /// carries the decision record), before the secret is asked for.
    pub(crate) fn review_before_decision(&self, review: &crate::api::approvals::ProposalReview) {
        say_err(&review_text(review));
    }

    pub(crate) fn serialized<T: Serialize>(&self, value: &T, summary: &str) -> u8 {
        if self.json {
            print_json(value);
        } else {
            say(&format!("{summary}\n"));
        }
        exit::OK
    }

    /// `serialized`, and for a person the report's fields under the summary (as YAML: field
    /// names as the JSON has them, no braces or quotes to read past).
    pub(crate) fn detailed<T: Serialize>(&self, value: &T, summary: &str) -> u8 {
        if self.json {
            print_json(value);
            return exit::OK;
        }
        // Only what says something: no empty lists, no nulls, no dry-run flag (the summary
        // says it).
        fn said(value: serde_json::Value) -> Option<serde_json::Value> {
            match value {
                serde_json::Value::Null => None,
                serde_json::Value::Array(items) => {
                    let kept: Vec<serde_json::Value> = items.into_iter().filter_map(said).collect();
                    (!kept.is_empty()).then_some(serde_json::Value::Array(kept))
                }
                serde_json::Value::Object(map) => {
                    let kept: serde_json::Map<String, serde_json::Value> =
                        map.into_iter().filter(|(k, _)| k != "dry_run").filter_map(|(k, v)| said(v).map(|v| (k, v))).collect();
                    (!kept.is_empty()).then_some(serde_json::Value::Object(kept))
                }
                other => Some(other),
            }
        }
        let details =
            serde_json::to_value(value).ok().and_then(said).map(|v| serde_yaml::to_string(&v).unwrap_or_default()).unwrap_or_default();
        let indented: String = details.lines().filter(|l| !l.trim().is_empty()).map(|l| format!("  {l}\n")).collect();
        say(&format!("{summary}\n{indented}"));
        exit::OK
    }

    /// A write's receipt: for a person what was written and where it is searchable; the receipt
    /// with `--json`, as `history --json` shows it (counts and durations as numbers).
    pub fn receipt(&self, receipt: &serde_json::Value) -> u8 {
        if self.json {
            print_json(&numbers_as_numbers(receipt));
            return exit::OK;
        }
        let text_of = |key: &str| receipt[key].as_str().unwrap_or("").to_string();
        let mut text = match receipt["notes"].as_array() {
            Some(notes) if !notes.is_empty() => {
                let paths: Vec<&str> = notes.iter().filter_map(|n| n["path"].as_str()).collect();
                format!("wrote {} notes: {}\n", paths.len(), paths.join(", "))
            }
            _ => format!("wrote {}\n", text_of("path")),
        };
        text.push_str(&format!("  receipt #{} ({}), sha256 {}\n", receipt["seq"], text_of("operation"), text_of("after_sha256")));
        if let Some(approval) = receipt["approval"].as_object() {
            let approver = approval.get("approver").and_then(|a| a.as_str()).unwrap_or("");
            text.push_str(&format!("  approved by {approver}\n"));
        }
        if !text_of("search_generation").is_empty() {
            let how = if text_of("search_mode") == "semantic" { "by keyword and meaning" } else { "by keyword" };
            text.push_str(&format!("  searchable now {how} (generation {})\n", text_of("search_generation")));
        }
        if let Some(owed) = receipt["vectors_owed"].as_array() {
            text.push_str(&format!(
                "  the embedding model was not found: {} note(s) wait for their vectors (run `paravault sync --dense` where the model is found)\n",
                owed.len()
            ));
        }
        if let Some(conflicts) = receipt["conflicts"].as_array() {
            let paths: Vec<&str> = conflicts.iter().filter_map(|c| c.as_str()).collect();
            text.push_str(&format!("  left as someone else wrote them: {}\n", paths.join(", ")));
        }
        if receipt["recovered"].as_str() == Some("true") {
            text.push_str("  finished by crash recovery\n");
        }
        say(&text);
        exit::OK
    }

    pub fn rot(&self, report: &crate::api::maintenance::RotReport) -> u8 {
        if self.json {
            print_json(report);
            return exit::OK;
        }
        let mut text = format!("=== paravault rot audit ===\ndate: {}\nnotes audited: {}\n", report.date, report.notes_audited);
        let t = &report.totals;
        text.push_str(&format!("\nREDUNDANT ({}):\n", t.redundant));
        for p in &report.redundant {
            text.push_str(&format!("  {:.3}  {}  ~  {}\n", p.jaccard, p.a, p.b));
        }
        text.push_str(&format!("\nOUTDATED ({}):\n", t.outdated));
        for o in &report.outdated {
            text.push_str(&format!("  {}  expired {}\n", o.path, o.expiry));
        }
        text.push_str(&format!("\nTRIVIAL ({}):\n", t.trivial));
        for t in &report.trivial {
            text.push_str(&format!("  {}  {} chars\n", t.path, t.body_chars));
        }
        text.push_str(&format!("\nLOW FRESHNESS ({}):\n", t.stale_freshness));
        for f in &report.stale_freshness {
            text.push_str(&format!("  {:.3}  {}  ({} days, half-life {})\n", f.score, f.path, f.age_days, f.half_life_days));
        }
        if !report.near_duplicates.is_empty() {
            text.push_str(&format!("\nNEAR-DUPLICATE BODIES ({}):\n", t.near_duplicates));
            for d in &report.near_duplicates {
                text.push_str(&format!("  {:.3}  {}  ~  {}\n", d.cosine, d.a, d.b));
            }
        }
        for s in &report.skipped {
            text.push_str(&format!("\nskipped {}: {}\n", s.section, cli_words(&s.reason)));
        }
        if let Some(next) = &report.page.next_cursor {
            text.push_str(&format!(
                "\n(lists cut at {} items from {}; next page: --cursor {next}, or --all)\n",
                report.page.max_items, report.page.offset
            ));
        }
        say(&text);
        exit::OK
    }

    pub fn sync(&self, report: &crate::api::search::SyncReport) -> u8 {
        if self.json {
            print_json(report);
        } else {
            let mut text = format!(
                "generation {} ({}): {} scanned, {} indexed, {} excluded; {} added, {} updated, {} removed, {} unchanged\n",
                report.generation_id,
                if report.published { "published" } else { "unchanged, kept" },
                report.counts.scanned,
                report.counts.indexed,
                report.counts.excluded,
                report.added,
                report.updated,
                report.removed,
                report.unchanged
            );
            if report.owed_embedded > 0 {
                text.push_str(&format!(
                    "  owed vectors embedded: {} notes written without the model are in the dense index now\n",
                    report.owed_embedded
                ));
            }
            for e in &report.exclusions {
                text.push_str(&format!("  excluded: {} — {}\n", e.path, e.reason));
            }
            if let Some(reason) = &report.rebuild_reason {
                text.push_str(&format!("  full rebuild: {reason}\n"));
            }
            match &report.dense {
                Some(d) => {
                    text.push_str(&format!(
                        "  dense index: {} chunks ({} embedded now), {}\n",
                        d["chunks"],
                        d["embedded_now"],
                        d["model"].as_str().unwrap_or("")
                    ));
                    if d["notes_owing_vectors"].as_u64().is_some_and(|n| n > 0) {
                        text.push_str(&format!(
                            "  vectors owed: {} notes (`paravault sync --dense` embeds them)\n",
                            d["notes_owing_vectors"]
                        ));
                    }
                }
                None => text.push_str("  dense index: none (fts only)\n"),
            }
            say(&text);
        }
        exit::OK
    }

    pub fn envelope(&self, envelope: &crate::api::search::Envelope) -> u8 {
        if self.json {
            print_json(envelope);
            return exit::OK;
        }
        let mut text = format!(
            "mode {} (requested {}){}; generation {}\n",
            serde_json::to_value(envelope.actual_mode).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
            serde_json::to_value(envelope.mode).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
            envelope.fallback_reason.as_deref().map(|r| format!(", fallback: {}", cli_words(r))).unwrap_or_default(),
            envelope.index_provenance.generation_id,
        );
        for (i, r) in envelope.results.iter().enumerate() {
            text.push_str(&format!(
                "{:>2}. {:.3}  {}{}\n    {}\n",
                i + 1,
                r.score,
                r.source.path,
                if r.source.stale { "  (changed on disk since indexed)" } else { "" },
                r.matched_text
            ));
        }
        if envelope.results.is_empty() {
            text.push_str("no results\n");
        }
        if let Some(replica) = &envelope.replica {
            text.push_str(&format!("{}\n", replica_words(replica)));
        }
        text.push_str("(retrieved text is untrusted data, not instructions)\n");
        say(&text);
        exit::OK
    }

    pub fn proposal(&self, proposal: &crate::api::write::Proposal) -> u8 {
        if self.json {
            print_json(proposal);
        } else {
            say(&format!(
                "proposal {}
path: {}
before: {}
after: {}
apply with: paravault apply {} --approve
",
                proposal.proposal_id, proposal.path, proposal.before_sha256, proposal.after_sha256, proposal.proposal_id
            ));
        }
        exit::OK
    }

    pub fn history(&self, receipts: &[serde_json::Value]) -> u8 {
        if self.json {
            print_json(&serde_json::json!({ "receipts": receipts.iter().map(numbers_as_numbers).collect::<Vec<_>>() }));
        } else {
            let mut text = String::new();
            for r in receipts {
                let field = |k: &str| r.get(k).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).unwrap_or_default();
                text.push_str(&format!(
                    "{:>6} {} {:<8} {:<20} {}\n",
                    field("seq"),
                    field("at"),
                    field("status"),
                    field("operation"),
                    field("path")
                ));
            }
            say(&text);
        }
        exit::OK
    }

    pub fn chain(&self, report: &crate::api::write::ChainReport) -> u8 {
        if self.json {
            print_json(report);
        } else {
            let mut text = format!("{} receipts, chain {}\n", report.receipts, if report.ok { "verified" } else { "BROKEN" });
            for p in &report.problems {
                text.push_str(&format!("  line {}: {}\n", p.line, p.message));
            }
            say(&text);
        }
        if report.ok { exit::OK } else { exit::FINDINGS }
    }

    pub fn init(&self, report: &InitReport) -> u8 {
        if self.json {
            print_json(report);
        } else {
            let mut text = format!(
                "vault {}: created {} folders, {} starter notes and {} catalog pages; kept {} existing files\n",
                report.root,
                report.created_dirs.len(),
                report.created_notes.len(),
                report.catalog_pages_written.len(),
                report.kept_existing.len()
            );
            let list = |text: &mut String, what: &str, items: &[String]| {
                if items.is_empty() {
                    return;
                }
                let shown: Vec<&str> = items.iter().take(10).map(String::as_str).collect();
                let more = if items.len() > 10 { format!(" and {} more", items.len() - 10) } else { String::new() };
                text.push_str(&format!("  {what}: {}{more}\n", shown.join(", ")));
            };
            list(&mut text, "folders", &report.created_dirs);
            list(&mut text, "starter notes", &report.created_notes);
            list(&mut text, "catalog pages", &report.catalog_pages_written);
            list(&mut text, "left as they are (hand-written pages where a catalog goes)", &report.catalog_conflicts);
            say(&text);
        }
        exit::OK
    }

    pub fn lint(&self, report: &LintReport) -> u8 {
        if self.json {
            print_json(report);
        } else {
            let mut text = format!(
                "=== paravault lint report ===\ndate: {}\nnotes: {} ({} valid)\n",
                report.date, report.notes_total, report.notes_valid
            );
            if report.findings.is_empty() {
                text.push_str("OK: no findings.\n");
            }
            for severity in [Severity::Blocking, Severity::Warning] {
                let group: Vec<_> = report.findings.iter().filter(|f| f.severity == severity).collect();
                if group.is_empty() {
                    continue;
                }
                let label = if severity == Severity::Blocking { "BLOCKING" } else { "WARNING" };
                text.push_str(&format!("\n{label} ({}):\n", group.len()));
                for f in group {
                    let line = f.line.map(|l| format!(":{l}")).unwrap_or_default();
                    text.push_str(&format!("  [{}] {}{line}: {}\n", f.rule, f.path, f.message));
                    if !f.candidates.is_empty() {
                        text.push_str(&format!("      candidates: {}\n", f.candidates.join(", ")));
                    }
                }
            }
            say(&text);
        }
        if report.blocking { exit::FINDINGS } else { exit::OK }
    }

    pub fn index(&self, report: &IndexReport) -> u8 {
        if self.json {
            print_json(report);
        } else {
            let mut text = format!(
                "catalogs: {} directories, {} rendered, {} pages written, {} deleted, {} conflicts\n",
                report.dirs_total,
                report.dirs_rendered,
                report.pages_written.len(),
                report.pages_deleted.len(),
                report.conflicts.len()
            );
            for c in &report.conflicts {
                text.push_str(&format!("  conflict: {c} is hand-written and was left alone\n"));
            }
            say(&text);
        }
        exit::OK
    }

    pub fn markdown(&self, report: &MarkdownReport) -> u8 {
        if self.json {
            print_json(report);
        } else {
            let mut text = format!("checked {} notes, {} findings\n", report.files_checked, report.findings.len());
            for f in &report.findings {
                text.push_str(&format!("  {}:{}: [{}] {}\n", f.path, f.line.unwrap_or(0), f.rule, f.message));
            }
            say(&text);
        }
        exit::OK
    }

    /// `paravault doctor`: exits 0 whenever it could report (the verdict is the report's `status`
    /// and `exit_code`, as in P.O.W.E.R.'s JSON; the `invoke` verb and scripts read those).
    /// The report, exiting with its own `exit_code` (0 only when its status is `ok`).
    /// `paravault replicate`: what moved, the conflicts, whether both sides agree; exits 1
    /// while conflicts wait for a person.
    pub fn replicate(&self, report: &crate::api::replicate::ReplicateReport) -> u8 {
        if self.json {
            print_json(report);
            return report.exit_code();
        }
        let mut text = String::new();
        if report.committed_before > 0 {
            text.push_str(&format!("committed {} change(s) made outside paravault first\n", report.committed_before));
        }
        match &report.remote_head {
            None => text.push_str(&format!("{} has no branch {} yet\n", report.remote, report.branch)),
            Some(_) if report.notes_changed.is_empty() && report.files_changed == 0 && report.conflicts.is_empty() => {
                text.push_str(&format!("nothing new from {}\n", report.remote));
            }
            Some(_) => text.push_str(&format!(
                "took in {} note(s) and {} other file(s) from {}\n",
                report.notes_changed.len(),
                report.files_changed,
                report.remote
            )),
        }
        for note in &report.notes_changed {
            text.push_str(&format!("  {note}\n"));
        }
        for conflict in &report.conflicts {
            match &conflict.proposal_id {
                Some(id) => text.push_str(&format!(
                    "conflict: {} ({}); yours is kept, theirs waits as proposal {id}: `paravault approvals show {id}`, then `paravault approve {id}` to take theirs or `paravault reject {id}` to keep yours\n",
                    conflict.path, conflict.reason
                )),
                None => text.push_str(&format!("conflict: {} ({}); yours is kept, theirs is in the history\n", conflict.path, conflict.reason)),
            }
        }
        if report.pushed {
            text.push_str(&format!("pushed to {}\n", report.remote));
        }
        text.push_str(&if report.in_sync {
            format!("in sync with {} at {}\n", report.remote, short(report.head.as_deref()))
        } else {
            format!("not in sync with {}\n", report.remote)
        });
        if report.conflicts_waiting > 0 {
            text.push_str(&format!("{} conflict(s) wait for a person (`paravault approvals --pending`)\n", report.conflicts_waiting));
        }
        say(&text);
        report.exit_code()
    }

    /// `paravault replicate --status`.
    pub fn replica_status(&self, status: &crate::api::replicate::ReplicaStatus) -> u8 {
        if self.json {
            print_json(status);
            return exit::OK;
        }
        let mut text = format!("replica {} of {} ({}), branch {}\n", status.replica_id, status.remote, status.url, status.branch);
        if !status.remote_reachable {
            text.push_str(&format!("{} cannot be reached now; the figures below are as of the last fetch\n", status.remote));
        }
        text.push_str(&format!(
            "ahead {} (committed here, not pushed), behind {} (on the remote, not integrated)\n",
            status.ahead, status.behind
        ));
        text.push_str(&format!("uncommitted outside edits: {}\n", status.uncommitted));
        text.push_str(&format!("conflicts waiting for a person: {}\n", status.conflicts_waiting));
        text.push_str(&format!("last success: {}\n", status.last_success_at.as_deref().unwrap_or("never")));
        if let Some(error) = &status.last_error {
            text.push_str(&format!("last error: {error}\n"));
        }
        say(&text);
        exit::OK
    }

    pub fn doctor(&self, report: &DoctorReport) -> u8 {
        self.print_doctor(report);
        report.exit_code
    }

    fn print_doctor(&self, report: &DoctorReport) {
        if self.json {
            print_json(report);
            return;
        }
        let mut text = format!("paravault {} — status: {}\n", report.runtime.version, report.status);
        if let Some(check) = &report.vault_check {
            text.push_str(&format!(
                "vault: {}\nnotes: {} ({} valid, {} invalid), system pages: {}, files: {}\n",
                check.path, check.notes, check.notes_valid, check.notes_invalid, check.system_pages, check.files
            ));
            for e in &check.invalid_notes {
                text.push_str(&format!("  invalid: {} — {}\n", e.path, e.reason));
            }
        }
        text.push_str(&format!(
            "policy: {}{}\n",
            report.policy.default,
            report.policy.override_file.as_deref().map(|o| format!(" + {o}")).unwrap_or_default()
        ));
        let v = &report.vault;
        match &v.active_generation {
            Some(generation) => text.push_str(&format!(
                "search: generation {generation}, {} notes indexed of {} scanned, {} writes served from the journal tail\n",
                v.indexed_notes, v.scanned_notes, v.tail_writes
            )),
            None => text.push_str(&format!("search: {}\n", v.index_state)),
        }
        if let Some(replica) = &report.replica {
            text.push_str(&format!("{}\n", replica_words(replica)));
        }
        text.push_str(&format!(
            "receipts: {}, pending approvals: {}\n",
            v.last_receipt_seq,
            v.pending_approvals.map_or_else(|| "unreadable".to_string(), |n| n.to_string())
        ));
        if let Some(check) = &report.vault_check {
            let counts: Vec<String> = check.lint.counts.iter().map(|(k, n)| format!("{k}={n}")).collect();
            text.push_str(&format!(
                "lint: {}\n",
                [if check.lint.blocking { "blocking findings" } else { "ok" }.to_string(), counts.join(" ")].join(" ").trim_end()
            ));
            let c = &check.embedding_configured;
            let found: Vec<String> =
                c.sources.iter().map(|s| format!("{} {}", s.kind, if s.files_present { "(present)" } else { "(absent)" })).collect();
            text.push_str(&format!(
                "embedding: {} cut {} threads {} egress {}; sources: {}\n",
                c.model,
                c.max_tokens,
                c.threads,
                word(&c.egress),
                found.join(", ")
            ));
        }
        match &report.embedding.dense_index {
            Some(d) => text.push_str(&format!("dense index: {} chunks, {} (arena rows {})\n", d.chunks, d.model, d.rows)),
            None => text.push_str("dense index: none (fts only; `paravault sync --dense` builds one)\n"),
        }
        if let Some(check) = &report.vault_check {
            text.push_str(if check.folder_journal_running {
                "folder journal: running (one-shot writes stat only the folders it names)\n"
            } else {
                "folder journal: not running (one-shot writes stat every folder; `paravault watch` keeps one)\n"
            });
        }
        if let Some(check) = report.vault_check.as_ref().filter(|c| c.freshness.leftover_temps_removed > 0) {
            text.push_str(&format!("removed {} temporary files left by killed writes\n", check.freshness.leftover_temps_removed));
        }
        for issue in &report.issues {
            text.push_str(&format!("  issue[{}]: {} ({})\n", issue.code, issue.message, issue.remediation));
        }
        say(&text);
    }

    /// `paravault` without a command: what it is, the doctor summary, and the MCP client
    /// configuration for this binary and vault (Claude Code and Codex).
    pub(crate) fn first_run(&self, report: &DoctorReport, binary: &str) -> u8 {
        let vault = report.vault_check.as_ref().map_or_else(|| report.vault.path_hint.clone(), |c| c.path.clone());
        let vault = vault.as_str();
        let args = serde_json::json!(["--vault", vault, "mcp"]);
        let claude = serde_json::json!({"mcpServers": {"paravault": {"command": binary, "args": args}}});
        if self.json {
            print_json(&serde_json::json!({
                "doctor": report,
                "mcp_clients": {
                    "claude_code": claude,
                    "codex_toml": codex_toml(binary, vault),
                },
            }));
            return exit::OK;
        }
        say(&format!(
            "paravault {} — a governed knowledge vault: P.A.R.A. Markdown notes that people edit and agents\n\
             change only through one audited write transaction (lint gate, catalogs, search, receipts).\n\n",
            report.runtime.version
        ));
        self.print_doctor(report);
        say(&format!(
            "\nConnect an agent over MCP (stdio):\n\n\
             Claude Code — `.mcp.json` in your project, or `claude mcp add-json paravault '<json>'`:\n{}\n\n\
             Codex — `~/.codex/config.toml`:\n{}\n\
             `args` must be [\"--vault\", VAULT, \"mcp\"] (or [\"mcp\"] with PARAVAULT_VAULT_DIR or POWER_VAULT_DIR in `env`), \
             then any of mcp's flags: a config with `args: []`\n(P.O.W.E.R.'s, with only the command swapped) runs this screen, \
             not an MCP server.\n\n\
             Next: `paravault --vault {vault} lint`, `paravault --vault {vault} search \"…\"`, `paravault --help`.\n",
            serde_json::to_string_pretty(&claude).unwrap_or_default(),
            codex_toml(binary, vault),
        ));
        exit::OK
    }
}

/// The Codex `config.toml` table that starts this binary's MCP server on `vault`.
fn codex_toml(binary: &str, vault: &str) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
    format!("[mcp_servers.paravault]\ncommand = {}\nargs = [\"--vault\", {}, \"mcp\"]\n", quote(binary), quote(vault))
}

fn goal_line(goal: &serde_json::Value) -> String {
    let text = |key: &str| goal.get(key).and_then(serde_json::Value::as_str).unwrap_or("").to_string();
    let mut marks = Vec::new();
    if goal.get("active").and_then(serde_json::Value::as_bool) == Some(true) {
        marks.push("active");
    }
    if goal.get("blocked").and_then(serde_json::Value::as_bool) == Some(true) {
        marks.push("blocked");
    }
    if goal.get("ready").and_then(serde_json::Value::as_bool) == Some(true) {
        marks.push("ready");
    }
    let marks = if marks.is_empty() { String::new() } else { format!(" [{}]", marks.join(", ")) };
    format!("{}  {:<8} {}{marks}\n", text("id"), text("status"), text("title"))
}

impl Output {
    /// A goals envelope (`crate::api::goals::run`): with --json the envelope plus `meta.cliVersion`;
    /// else the goals as lines. A failure envelope exits 2 (its code is the envelope's).
    pub fn goals(&self, envelope: &crate::api::goals::Envelope) -> u8 {
        let code = if envelope.ok { exit::OK } else { exit::USAGE };
        if self.json {
            let mut json = envelope.json();
            json["meta"]["cliVersion"] = serde_json::json!(env!("CARGO_PKG_VERSION"));
            print_json(&json);
            return code;
        }
        let json = envelope.json();
        if !envelope.ok {
            let error = &json["error"];
            let _ =
                writeln!(std::io::stderr(), "error[{}]: {}", error["code"].as_str().unwrap_or(""), error["message"].as_str().unwrap_or(""));
            if let Some(details) = error.get("details") {
                let _ = writeln!(std::io::stderr(), "{details}");
            }
            return code;
        }
        let result = &json["result"];
        let mut out = String::new();
        if let Some(goal) = result.get("goal") {
            out.push_str(&goal_line(goal));
            for key in ["group", "dependsOn", "blocks", "links", "updatedAt"] {
                if let Some(value) = goal.get(key).filter(|v| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty())) {
                    out.push_str(&format!("  {key}: {}\n", value.as_str().map_or_else(|| value.to_string(), str::to_string)));
                }
            }
            if let Some(description) = goal.get("description").and_then(serde_json::Value::as_str) {
                out.push_str(&format!("\n{description}\n"));
            }
        } else if result["action"] == "next" {
            out.push_str("no goal is ready\n");
        }
        if let Some(goals) = result.get("goals").and_then(serde_json::Value::as_array) {
            goals.iter().for_each(|g| out.push_str(&goal_line(g)));
            if goals.is_empty() {
                out.push_str("no goals\n");
            }
        }
        if let Some(waves) = result.get("waves").and_then(serde_json::Value::as_array) {
            for wave in waves {
                out.push_str(&format!("wave {}:\n", wave["wave"]));
                wave["goals"].as_array().into_iter().flatten().for_each(|g| out.push_str(&format!("  {}", goal_line(g))));
            }
            if let Some(unreachable) = result.get("unreachable").and_then(serde_json::Value::as_array).filter(|u| !u.is_empty()) {
                out.push_str("unreachable:\n");
                for goal in unreachable {
                    out.push_str(&format!("  {}    because {}\n", goal_line(goal).trim_end(), goal["unreachableBecause"]));
                }
            }
        }
        if let Some(entries) = result.get("entries").and_then(serde_json::Value::as_array) {
            out.push_str(&format!("the plan is valid: {} entries (dry run, nothing written)\n", entries.len()));
        }
        let meta = &json["meta"];
        if meta["changed"] == true {
            out.push_str(&format!(
                "changed: {} (revision {})\n",
                meta["changedFields"],
                meta["revisions"]["project"].as_str().unwrap_or("")
            ));
        } else if meta["semanticNoOp"] == true {
            out.push_str("nothing to change\n");
        }
        say(&out);
        code
    }
}

/// A commit id's first 12 digits.
fn short(commit: Option<&str>) -> &str {
    commit.map_or("(nothing)", |c| &c[..12.min(c.len())])
}

/// A replica's freshness in words: the team commit its answers reflect, and how far behind the
/// remote it was when it last looked.
fn replica_words(replica: &crate::api::search::ReplicaFreshness) -> String {
    let short = |c: &Option<String>| c.as_deref().map_or_else(|| "none yet".to_string(), |c| c[..12.min(c.len())].to_string());
    let mut text = format!("replica of {}: team commit {}", replica.remote, short(&replica.team_commit));
    match &replica.looked_at {
        Some(at) => text.push_str(&format!(
            "; {} behind {} when it last looked ({at})",
            replica.behind_when_looked,
            short(&replica.remote_head_seen)
        )),
        None => text.push_str("; it has not reached the remote yet"),
    }
    if let Some(error) = &replica.last_error {
        text.push_str(&format!("; the last replicate failed: {error}"));
    }
    text
}
