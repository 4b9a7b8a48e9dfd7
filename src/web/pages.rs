//! The web UI's pages: each handler checks its input (every note URL through `VaultPath`),
//! calls one application-API function off the async threads, and renders the result. Errors
//! become pages with the status their code calls for (docs/web.md).

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header, request::Parts};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Form, http};
use maud::{Markup, html};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::WebState;
use super::auth::{self, ClientAddr, Viewer};
use super::render::{Shown, error_page, json_table, note_html, page, scalar};
use crate::api::approvals::Approver;
use crate::api::approvals::secrets;
use crate::api::approvals::{ApprovalChannel, Decision, Operation, ProposalState};
use crate::api::handoff::{HandoffAction, HandoffRequest};
use crate::api::maintenance::ArchiveRequest;
use crate::api::maintenance::HealRequest;
use crate::api::maintenance::MarkdownRequest;
use crate::api::maintenance::RotRequest;
use crate::api::note::VaultPath;
use crate::api::note::frontmatter;
use crate::api::search::SearchMode;
use crate::api::search::SearchParams;
use crate::error::Error;
use crate::vault::Vault;

/// Notes one folder page lists.
const FOLDER_PAGE_NOTES: usize = 200;
/// Receipts the dashboard shows.
const DASHBOARD_RECEIPTS: usize = 10;
/// Receipts scanned for one note's history.
const NOTE_RECEIPTS_SCANNED: usize = 1000;

/// The HTTP status an engine error calls for.
fn status_of(error: &Error) -> StatusCode {
    match error.code() {
        "invalid_argument" | "path_refused" | "invalid_content" | "search_query_invalid" | "proposal_invalid" => StatusCode::BAD_REQUEST,
        "note_unreadable" | "proposal_not_found" | "task_not_found" | "receipt_not_found" => StatusCode::NOT_FOUND,
        "approver_refused" | "vault_boundary" | "vault_access_denied" => StatusCode::FORBIDDEN,
        "precondition_failed"
        | "approval_stale"
        | "already_decided"
        | "proposal_rejected"
        | "human_approval_required"
        | "approval_required"
        | "lint_gate_rejected"
        | "idempotency_conflict"
        | "already_exists"
        | "revision_conflict" => StatusCode::CONFLICT,
        "rate_limited" => StatusCode::TOO_MANY_REQUESTS,
        "not_configured"
        | "dense_index_unavailable"
        | "reranker_unavailable"
        | "no_active_generation"
        | "model_unavailable"
        | "egress_denied" => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// An engine error as a page: its code, message and remediation.
pub(crate) fn engine_error(error: &Error) -> Response {
    let status = status_of(error);
    let body = html! {
        p.error #error { "[" (error.code()) "] " (error.to_string()) }
        p { (error.row().remediation) }
        p { a href="/" { "Back to the dashboard" } }
    };
    (status, page("Refused", None, body)).into_response()
}

/// Runs an application-API call on a blocking thread, after bringing the model up to the disk
/// (as every MCP call does).
async fn engine<T: Send + 'static>(
    state: &Arc<WebState>,
    job: impl FnOnce(&Vault) -> crate::Result<T> + Send + 'static,
) -> Result<T, Response> {
    let vault = Arc::clone(&state.vault);
    match tokio::task::spawn_blocking(move || vault.observe_disk().and_then(|()| job(&vault))).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(engine_error(&error)),
        Err(join) => {
            tracing::error!(error = %join, "web handler failed");
            Err(error_page(StatusCode::INTERNAL_SERVER_ERROR, "Internal error", "The request failed unexpectedly; see the server log."))
        }
    }
}

/// A form body whose refusal is a page: 413 when too large, 400 otherwise.
pub(crate) struct WebForm<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for WebForm<T> {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Form::<T>::from_request(request, state).await {
            Ok(Form(value)) => Ok(WebForm(value)),
            Err(rejection) => {
                let status = if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    StatusCode::PAYLOAD_TOO_LARGE
                } else {
                    StatusCode::BAD_REQUEST
                };
                Err(error_page(status, "Bad request", &rejection.body_text()))
            }
        }
    }
}

/// A query string whose refusal is a 400 page.
pub(crate) struct WebQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for WebQuery<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| WebQuery(value))
            .map_err(|rejection| error_page(StatusCode::BAD_REQUEST, "Bad request", &rejection.body_text()))
    }
}

fn bad_request(message: &str) -> Response {
    error_page(StatusCode::BAD_REQUEST, "Bad request", message)
}

/// A note URL's path, through the same boundary as MCP arguments.
fn vault_path(raw: &str) -> Result<VaultPath, Box<Response>> {
    VaultPath::parse(raw).map_err(|e| Box::new(engine_error(&e)))
}

/// The URL of a vault path (each component percent-encoded).
fn note_url(prefix: &str, path: &str) -> String {
    let encoded: Vec<String> =
        path.split('/').map(|c| percent_encoding::utf8_percent_encode(c, percent_encoding::NON_ALPHANUMERIC).to_string()).collect();
    format!("{prefix}/{}", encoded.join("/"))
}

/// `GET /healthz`: "ok" without touching the vault or a session (liveness probes; the
/// benches' floor: the same stack with a no-op handler).
pub async fn healthz() -> &'static str {
    "ok"
}

/// Any unknown URL.
pub async fn not_found() -> Response {
    error_page(StatusCode::NOT_FOUND, "Not found", "There is no page at this address.")
}

fn state_name(state: ProposalState) -> &'static str {
    match state {
        ProposalState::Pending => "pending",
        ProposalState::Approved => "approved",
        ProposalState::Rejected => "rejected",
        ProposalState::Applied => "applied",
        ProposalState::Stale => "stale",
    }
}

fn proposals_table(list: &[crate::api::approvals::ProposalStatus]) -> Markup {
    html! {
        @if list.is_empty() {
            p.empty { "none" }
        } @else {
            table #proposals {
                thead { tr { th { "proposal" } th { "state" } th { "operation" } th { "notes" } th { "proposed by" } th { "created" } th { "approver" } th { "decided by" } } }
                tbody {
                    @for p in list {
                        tr {
                            td { a href=(format!("/proposals/{}", p.proposal_id)) { (&p.proposal_id[..12]) "…" } }
                            td.state { (state_name(p.state)) }
                            td { (p.operation.name()) }
                            td { (Shown(&p.paths.join(", "))) }
                            td { (Shown(&p.proposed_by)) }
                            td { (p.created_at) }
                            td { (if p.approver == Approver::Human { "human" } else { "caller" }) }
                            td { (Shown(&p.decision.as_ref().map(|d| format!("{} ({}, {:?})", d.approver, d.decision.name(), d.channel)).unwrap_or_default())) }
                        }
                    }
                }
            }
        }
    }
}

/// Receipts as table rows (newest first), with the approval they name.
fn receipts_table(receipts: &[Value]) -> Markup {
    let rows: Vec<Value> = receipts
        .iter()
        .rev()
        .map(|r| {
            json!({
                "seq": r.get("seq"),
                "at": r.get("at"),
                "operation": r.get("operation"),
                "path": r.get("path"),
                "status": r.get("status"),
                "approver": r.pointer("/approval/approver"),
                "channel": r.pointer("/approval/channel"),
                "proposal_id": r.get("proposal_id"),
            })
        })
        .collect();
    json_table(&rows, Some(&["seq", "at", "operation", "path", "status", "approver", "channel", "proposal_id"]))
}

/// Tasks (handoff packets) as a table.
fn tasks_table(tasks: &[Value]) -> Markup {
    json_table(tasks, Some(&["task_id", "state", "title", "owner", "actor", "next_action", "updated_at"]))
}

fn list_tasks(vault: &Vault) -> crate::Result<Vec<Value>> {
    let listed = serde_json::to_value(vault.handoff_work(HandoffRequest::new(HandoffAction::List))?).unwrap_or_default();
    Ok(listed.get("tasks").and_then(Value::as_array).cloned().unwrap_or_default())
}

/// `GET /`: the doctor report, pending approvals, latest receipts, active work packets.
pub async fn dashboard(State(state): State<Arc<WebState>>, viewer: Viewer) -> Response {
    let loaded = engine(&state, |vault| {
        let doctor = vault.doctor()?;
        let pending: Vec<_> =
            vault.proposals()?.into_iter().filter(|p| p.state == ProposalState::Pending && p.approver == Approver::Human).collect();
        let receipts = vault.read_memory_history(DASHBOARD_RECEIPTS, 0)?;
        let tasks = list_tasks(vault)?;
        Ok((doctor, pending, receipts, tasks))
    })
    .await;
    let (doctor, pending, receipts, tasks) = match loaded {
        Ok(loaded) => loaded,
        Err(response) => return response,
    };
    let active: Vec<Value> = tasks
        .into_iter()
        .filter(|t| !matches!(t.get("state").and_then(Value::as_str), Some("completed" | "failed" | "canceled" | "rejected")))
        .collect();
    let body = html! {
        section #doctor {
            h2 { "Doctor" }
            p { "Status: " strong #doctor-status { (doctor.status) }
                @if let Some(check) = &doctor.vault_check {
                    " · " (check.notes) " notes (" (check.notes_valid) " valid, " (check.notes_invalid) " invalid) · lint "
                    (if check.lint.blocking { "blocking" } else { "not blocking" })
                }
                " · pending approvals: " strong #pending-count { (doctor.vault.pending_approvals.map_or_else(|| "unreadable".to_string(), |n| n.to_string())) } }
            @if !doctor.issues.is_empty() {
                table { thead { tr { th { "code" } th { "severity" } th { "message" } th { "remediation" } } }
                    tbody { @for issue in &doctor.issues { tr { td { (issue.code) } td { (issue.severity) } td { (issue.message) } td { (issue.remediation) } } } } }
            }
            @if let Some(check) = doctor.vault_check.as_ref().filter(|c| !c.lint.counts.is_empty()) {
                p { "Lint findings: " @for (rule, count) in &check.lint.counts { (rule) " " (count) "; " } }
            }
        }
        section { h2 { "Waiting for a person" } (proposals_table(&pending)) }
        section { h2 { "Latest receipts" } (receipts_table(&receipts)) p { a href="/receipts" { "All receipts" } } }
        section { h2 { "Active work packets" } (tasks_table(&active)) }
    };
    page("Dashboard", Some(&viewer), body).into_response()
}

/// `GET /browse`: the catalogued P.A.R.A. folders with their valid-note counts.
pub(crate) async fn browse_root(State(state): State<Arc<WebState>>, viewer: Viewer) -> Response {
    let folders = engine(&state, |vault| {
        let layout = &vault.policy().policy.layout;
        let names: Vec<String> = layout.catalog_categories.iter().chain(&layout.catalog_extra_folders).cloned().collect();
        let root_notes: Vec<String> = vault.with_inventory(|inv| inv.counts.root_notes.iter().map(|p| p.to_string()).collect())?;
        let counts = vault.with_inventory(|inv| {
            names.iter().map(|n| (n.clone(), inv.counts.valid_per_dir.get(n).copied().unwrap_or(0))).collect::<Vec<_>>()
        })?;
        Ok((counts, root_notes))
    })
    .await;
    let (folders, root_notes) = match folders {
        Ok(f) => f,
        Err(response) => return response,
    };
    let body = html! {
        table #folders { thead { tr { th { "folder" } th { "valid notes" } } }
            tbody { @for (name, count) in &folders { tr { td { a href=(note_url("/browse", name)) { (name) } } td { (count) } } } } }
        @if !root_notes.is_empty() {
            h2 { "Daily logs at the root" }
            ul { @for path in &root_notes { li { a href=(note_url("/note", path)) { (path) } } } }
        }
    };
    page("Notes", Some(&viewer), body).into_response()
}

#[derive(Debug, Deserialize)]
pub(crate) struct PageQuery {
    #[serde(default)]
    page: usize,
}

/// `GET /browse/<folder>`: its sub-folders and its notes (a page of them).
pub async fn browse(
    State(state): State<Arc<WebState>>,
    viewer: Viewer,
    Path(raw): Path<String>,
    WebQuery(query): WebQuery<PageQuery>,
) -> Response {
    let dir = match vault_path(&raw) {
        Ok(dir) => dir,
        Err(response) => return *response,
    };
    let dir_name = dir.to_string();
    let listing = engine(&state, move |vault| {
        vault.with_inventory(|inv| {
            let mut folders: BTreeMap<String, usize> = BTreeMap::new();
            let mut notes: Vec<(String, String, bool)> = Vec::new();
            for record in inv.subtree(&dir_name).filter(|r| r.is_note()) {
                let rest = &record.path.as_str()[dir_name.len() + 1..];
                match rest.split_once('/') {
                    Some((child, _)) => *folders.entry(child.to_string()).or_default() += 1,
                    None => notes.push((record.path.to_string(), record.meta.title.clone().unwrap_or_default(), record.valid)),
                }
            }
            (folders, notes)
        })
    })
    .await;
    let (folders, notes) = match listing {
        Ok(listing) => listing,
        Err(response) => return response,
    };
    if folders.is_empty() && notes.is_empty() {
        return error_page(StatusCode::NOT_FOUND, "Not found", "No notes under this folder.");
    }
    let pages = notes.len().div_ceil(FOLDER_PAGE_NOTES).max(1);
    if query.page >= pages {
        return bad_request(&format!("page must be below {pages}"));
    }
    let shown = &notes[query.page * FOLDER_PAGE_NOTES..notes.len().min((query.page + 1) * FOLDER_PAGE_NOTES)];
    let body = html! {
        @if !folders.is_empty() {
            h2 { "Folders" }
            ul #subfolders { @for (name, count) in &folders { li { a href=(note_url("/browse", &format!("{dir}/{name}"))) { (name) } " (" (count) ")" } } }
        }
        h2 { "Notes" }
        table #notes { thead { tr { th { "note" } th { "title" } th { "valid" } } }
            tbody { @for (path, title, valid) in shown { tr { td { a href=(note_url("/note", path)) { (path) } } td { (title) } td { (if *valid { "yes" } else { "no" }) } } } } }
        @if pages > 1 {
            p { "Page " (query.page + 1) " of " (pages) " · "
                @if query.page > 0 { a href=(format!("{}?page={}", note_url("/browse", dir.as_str()), query.page - 1)) { "previous" } " " }
                @if query.page + 1 < pages { a href=(format!("{}?page={}", note_url("/browse", dir.as_str()), query.page + 1)) { "next" } } }
        }
    };
    page(dir.as_str(), Some(&viewer), body).into_response()
}

/// The receipts (oldest first) that changed `path`.
fn receipts_of(vault: &Vault, path: &str) -> crate::Result<Vec<Value>> {
    let history = vault.read_memory_history(NOTE_RECEIPTS_SCANNED, 0)?;
    Ok(history
        .into_iter()
        .filter(|r| {
            r.get("path").and_then(Value::as_str) == Some(path)
                || r.get("notes")
                    .and_then(Value::as_array)
                    .is_some_and(|n| n.iter().any(|e| e.get("path").and_then(Value::as_str) == Some(path)))
        })
        .collect())
}

/// `GET /note/<path>`: the note rendered and sanitised, its frontmatter as data, backlinks,
/// receipts.
pub async fn note(State(state): State<Arc<WebState>>, viewer: Viewer, Path(raw): Path<String>) -> Response {
    let path = match vault_path(&raw) {
        Ok(path) => path,
        Err(response) => return *response,
    };
    let read_only = state.read_only;
    let loaded = engine(&state, move |vault| {
        let limit = vault.policy().policy.limits.read_note_bytes_max;
        let slice = vault.read_note(path.as_str(), 0, limit)?;
        let backlinks: Vec<String> = vault.with_inventory(|inv| inv.linkers_of(&path).iter().map(|p| p.to_string()).collect())?;
        let receipts = receipts_of(vault, path.as_str())?;
        Ok((slice, backlinks, receipts))
    })
    .await;
    let (slice, backlinks, receipts) = match loaded {
        Ok(loaded) => loaded,
        Err(response) => return response,
    };
    let (fields, problem, body_text) = match frontmatter::split(&slice.content) {
        Ok(split) => match frontmatter::parse(&split) {
            Ok(fm) => {
                let fields: Vec<(String, String)> = fm
                    .mapping
                    .iter()
                    .map(|(k, v)| {
                        let key = k.as_str().map_or_else(|| serde_yaml::to_string(k).unwrap_or_default(), str::to_string);
                        let value = match v {
                            serde_yaml::Value::String(s) => s.clone(),
                            other => serde_yaml::to_string(other).unwrap_or_default().trim_end().to_string(),
                        };
                        (key, value)
                    })
                    .collect();
                (fields, None, split.body.to_string())
            }
            Err(problem) => (Vec::new(), Some(problem.to_string()), split.body.to_string()),
        },
        Err(problem) => (Vec::new(), Some(problem.to_string()), slice.content.clone()),
    };
    let body = html! {
        p { "sha256 " code #sha { (slice.sha256) } " · " (slice.total_bytes) " bytes"
            @if !slice.eof { " · " strong { "shown: the first " (slice.bytes_returned) " bytes" } }
            @if !read_only && slice.eof { " · " a #edit href=(note_url("/edit", &slice.path)) { "Edit (creates a proposal)" } } }
        section #frontmatter {
            h2 { "Frontmatter" }
            @if let Some(problem) = &problem { p.error { "Frontmatter problem: " (problem) } }
            table { tbody { @for (key, value) in &fields { tr { th { (key) } td { (value) } } } } }
        }
        section { h2 { "Note" } div.note-body #note-body { (note_html(&body_text)) } }
        section { h2 { "Backlinks" }
            @if backlinks.is_empty() { p.empty { "none" } }
            ul #backlinks { @for source in &backlinks { li { a href=(note_url("/note", source)) { (source) } } } } }
        section { h2 { "Receipts" } (receipts_table(&receipts)) }
    };
    page(&slice.path, Some(&viewer), body).into_response()
}

#[derive(Debug, Deserialize)]
pub(crate) struct SearchQuery {
    #[serde(default)]
    q: String,
    #[serde(default)]
    mode: Option<String>,
    #[serde(default)]
    view: Option<String>,
    #[serde(default)]
    max: Option<String>,
}

/// `GET /search`: every mode; each result with its provenance.
pub async fn search(State(state): State<Arc<WebState>>, viewer: Viewer, WebQuery(query): WebQuery<SearchQuery>) -> Response {
    let mode = query.mode.clone().unwrap_or_else(|| "auto".into());
    let view = query.view.clone().unwrap_or_else(|| "current".into());
    let max_results = match query.max.as_deref().map(str::parse::<usize>) {
        None => 20,
        Some(Ok(n)) => n,
        Some(Err(_)) => return bad_request("max must be a number"),
    };
    let form = html! {
        form #search-form method="get" action="/search" {
            label for="q" { "Query" }
            input #q type="search" name="q" value=(query.q);
            label for="mode" { "Mode" }
            select #mode name="mode" { @for name in SearchMode::ACCEPTED_NAMES { option value=(name) selected[name == mode] { (name) } } }
            label for="view" { "Temporal view" }
            select #view name="view" { @for name in ["current", "historical", "all"] { option value=(name) selected[name == view] { (name) } } }
            input type="hidden" name="max" value=(max_results);
            button #search-button type="submit" { "Search" }
        }
    };
    if query.q.trim().is_empty() {
        return page("Search", Some(&viewer), form).into_response();
    }
    let params =
        SearchParams { query: query.q.clone(), max_results, search_mode: mode.clone(), temporal_view: view, as_of: None, domain: None };
    let envelope = match engine(&state, move |vault| vault.search(&params)).await {
        Ok(envelope) => envelope,
        Err(response) => return response,
    };
    let body = html! {
        (form)
        p #provenance { "Mode asked: " (mode) " · mode run: " strong #actual-mode { (envelope.actual_mode) }
            @if let Some(reason) = &envelope.fallback_reason { " (fallback: " (reason) ")" }
            " · generation " code #generation { (envelope.index_provenance.generation_id) }
            " · index age " (envelope.index_age_seconds) " s · " (envelope.result_count) " results" }
        table #results {
            thead { tr { th { "note" } th { "title" } th { "score" } th { "snippet" } th { "mode run" } th { "stale" } } }
            tbody {
                @for result in &envelope.results {
                    tr {
                        td { a href=(note_url("/note", &result.source.path)) { (result.source.path) } }
                        td { (result.metadata.title) }
                        td { (format!("{:.3}", result.score)) }
                        td { (result.snippet) }
                        td { (result.metadata.actual_mode) }
                        td { (if result.source.stale { "stale" } else { "current" }) }
                    }
                }
            }
        }
    };
    page("Search", Some(&viewer), body).into_response()
}

#[derive(Debug, Deserialize)]
pub(crate) struct ProposalsQuery {
    #[serde(default)]
    state: Option<String>,
}

/// `GET /proposals`: every stored proposal, filtered by state.
pub async fn proposals(State(state): State<Arc<WebState>>, viewer: Viewer, WebQuery(query): WebQuery<ProposalsQuery>) -> Response {
    let wanted = query.state.unwrap_or_else(|| "all".into());
    const STATES: [&str; 6] = ["all", "pending", "approved", "rejected", "applied", "stale"];
    if !STATES.contains(&wanted.as_str()) {
        return bad_request(&format!("state must be one of {}", STATES.join(", ")));
    }
    let list = match engine(&state, |vault| vault.proposals()).await {
        Ok(list) => list,
        Err(response) => return response,
    };
    let shown: Vec<_> = list.into_iter().filter(|p| wanted == "all" || state_name(p.state) == wanted).collect();
    let body = html! {
        p { @for name in STATES { a href=(format!("/proposals?state={name}")) { (name) } " " } }
        (proposals_table(&shown))
    };
    page("Proposals", Some(&viewer), body).into_response()
}

fn check_proposal_id(id: &str) -> Result<(), Box<Response>> {
    if id.len() == 64 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(Box::new(bad_request("a proposal id is 64 lowercase hex characters")))
    }
}

/// `GET /proposals/<id>`: the diff before → after, the lint gate's verdict, who proposed it and
/// when, its decision; approve / reject with a comment; apply once approved.
pub async fn proposal(State(state): State<Arc<WebState>>, viewer: Viewer, Path(id): Path<String>) -> Response {
    if let Err(response) = check_proposal_id(&id) {
        return *response;
    }
    let lookup = id.clone();
    let (status, review) = match engine(&state, move |vault| Ok((vault.proposal_status(&lookup)?, vault.review_proposal(&lookup)?))).await {
        Ok(loaded) => loaded,
        Err(response) => return response,
    };
    let can_act = !state.read_only && viewer.approver().is_some();
    let csrf = viewer.csrf().unwrap_or_default().to_string();
    let body = html! {
        table #proposal-status { tbody {
            tr { th { "state" } td.state #state { (state_name(status.state)) } }
            tr { th { "operation" } td { (status.operation.name()) } }
            tr { th { "notes" } td { (Shown(&status.paths.join(", "))) } }
            tr { th { "proposed by" } td { (Shown(&status.proposed_by)) } }
            tr { th { "created" } td { (status.created_at) } }
            tr { th { "approver (policy)" } td { (if status.approver == Approver::Human { "a person (human rule)" } else { "the caller" }) } }
            @if let Some(decision) = &status.decision {
                tr { th { "decision" } td #decision { (decision.decision.name()) " by " (decision.approver) " via " (format!("{:?}", decision.channel).to_lowercase())
                    " at " (decision.decided_at) @if !decision.comment.is_empty() { ": " (Shown(&decision.comment)) } } }
            }
        } }
        section #gate {
            h2 { "Lint gate on the after-image" }
            @if review.gate_blocking.is_empty() { p.ok #gate-verdict { "passes" } } @else { p.error #gate-verdict { "would refuse" } }
            @for finding in review.gate_blocking.iter().chain(&review.gate_warnings) {
                p { "[" (finding.rule) "] " (Shown(&finding.path)) ": " (Shown(&finding.message)) }
            }
        }
        @for change in &review.changes {
            section.change {
                h2 { (Shown(&change.path)) }
                @match change.before {
                    crate::api::approvals::BeforeImage::Absent => p { "A new note." },
                    crate::api::approvals::BeforeImage::Current => p { "Before: the note as it is now." },
                    crate::api::approvals::BeforeImage::Unavailable => p.notice { "The note no longer holds the version this proposal was based on; no before-image is kept." },
                }
                @if change.after_text.is_none() { p.notice { "This change removes the note." } }
                pre.diff { @for line in &change.diff {
                    @match line.tag { '+' => span.add { "+ " (Shown(&line.text)) }, '-' => span.del { "- " (Shown(&line.text)) }, _ => span.same { "  " (Shown(&line.text)) } }
                } }
            }
        }
        @if can_act && status.state == ProposalState::Pending {
            section #decide {
                h2 { "Decide" }
                form method="post" action=(format!("/proposals/{id}/decide")) {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="comment" { "Comment" }
                    input #comment type="text" name="comment" maxlength="2000";
                    button #approve type="submit" name="decision" value="approve" { "Approve" }
                    " "
                    button #reject type="submit" name="decision" value="reject" { "Reject" }
                }
            }
        }
        @if can_act && (status.state == ProposalState::Approved || (status.state == ProposalState::Pending && status.approver == Approver::Caller)) {
            form #apply-form method="post" action=(format!("/proposals/{id}/apply")) {
                input type="hidden" name="csrf" value=(csrf);
                button #apply type="submit" { "Apply" }
            }
        }
    };
    page(&format!("Proposal {}", &id[..12]), Some(&viewer), body).into_response()
}

#[derive(Debug, Deserialize)]
pub(crate) struct DecideForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(default)]
    decision: Option<String>,
    #[serde(default)]
    comment: String,
}

/// `POST /proposals/<id>/decide`: the logged-in approver's decision, channel `web`.
pub async fn decide(
    State(state): State<Arc<WebState>>,
    viewer: Viewer,
    Path(id): Path<String>,
    WebForm(form): WebForm<DecideForm>,
) -> Response {
    let approver = match viewer.authorise(form.csrf.as_deref()) {
        Ok(approver) => approver.clone(),
        Err(response) => return *response,
    };
    if let Err(response) = check_proposal_id(&id) {
        return *response;
    }
    let decision = match form.decision.as_deref() {
        Some("approve") => Decision::Approved,
        Some("reject") => Decision::Rejected,
        _ => return bad_request("decision must be approve or reject"),
    };
    let dir = state.approvers_dir.clone();
    let target = id.clone();
    let decided = engine(&state, move |vault| {
        // A session outlives nothing: an approver removed from the file since login decides nothing.
        if !secrets::approver_names(&dir)?.iter().any(|n| n == approver.name()) {
            return Err(Error::ApproverRefused);
        }
        vault.decide_authenticated(&approver, &target, decision, ApprovalChannel::Web, &form.comment)
    })
    .await;
    match decided {
        Ok(_) => Redirect::to(&format!("/proposals/{id}")).into_response(),
        Err(response) => response,
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct CsrfForm {
    #[serde(default)]
    csrf: Option<String>,
}

/// `POST /proposals/<id>/apply`: runs an approved proposal (or one the caller may approve).
pub async fn apply(
    State(state): State<Arc<WebState>>,
    viewer: Viewer,
    Path(id): Path<String>,
    WebForm(form): WebForm<CsrfForm>,
) -> Response {
    if let Err(response) = viewer.authorise(form.csrf.as_deref()) {
        return *response;
    }
    if let Err(response) = check_proposal_id(&id) {
        return *response;
    }
    let target = id.clone();
    let applied = engine(&state, move |vault| {
        let status = vault.proposal_status(&target)?;
        let result = match status.operation {
            Operation::Apply => vault.apply_stored_proposal(&target, true).map(|_| target.clone()),
            Operation::Archive => vault.archive_notes(&ArchiveRequest { dry_run: false, approved: true }).map(|_| target.clone()),
            Operation::Heal => vault.heal_frontmatter(&HealRequest { dry_run: false, approved: true }).map(|_| target.clone()),
            Operation::MarkdownFix => vault.check_markdown_tool(&MarkdownRequest { fix: true, approved: true }).map(|_| target.clone()),
            // A memory change holds its whole plan: it is applied by id, exactly as proposed.
            Operation::MemoryChange | Operation::ReplicationConflict => vault.apply_memory_proposal(&target, true).map(|_| target.clone()),
            // Goal lifecycle changes, link-rot egress and replication run when the agent repeats
            // its call (the decision record lets it through); the web only decides them.
            Operation::GoalsComplete
            | Operation::GoalsReopen
            | Operation::GoalsArchive
            | Operation::GoalsDelete
            | Operation::LinkRot
            | Operation::InfraReplicate => Err(Error::InvalidArgument {
                name: "proposal_id",
                reason: format!("{} runs when the agent repeats its call; approve or reject it here", status.operation.tool()),
            }),
        };
        match result {
            // The notes changed since: the operation planned anew and holds the new plan for a decision.
            Err(Error::HumanApprovalRequired { proposal_id, .. }) if proposal_id != target => Ok(proposal_id),
            other => other,
        }
    })
    .await;
    match applied {
        Ok(shown) => Redirect::to(&format!("/proposals/{shown}")).into_response(),
        Err(response) => response,
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct ReceiptsQuery {
    #[serde(default)]
    limit: Option<usize>,
}

/// `GET /receipts`: the receipt history, newest first, and the hash chain's verification.
pub async fn receipts(State(state): State<Arc<WebState>>, viewer: Viewer, WebQuery(query): WebQuery<ReceiptsQuery>) -> Response {
    let limit = query.limit.unwrap_or(100);
    let loaded = engine(&state, move |vault| Ok((vault.read_memory_history(limit, 0)?, vault.verify_history()?))).await;
    let (history, chain) = match loaded {
        Ok(loaded) => loaded,
        Err(response) => return response,
    };
    let body = html! {
        p #chain { "Hash chain over " (chain.receipts) " receipts: "
            @if chain.ok { strong.ok { "verified" } } @else { strong.error { "BROKEN" } } }
        @for problem in &chain.problems { p.error { (serde_json::to_string(problem).unwrap_or_default()) } }
        (receipts_table(&history))
    };
    page("Receipts", Some(&viewer), body).into_response()
}

/// `GET /tasks`: the handoff work packets.
pub async fn tasks(State(state): State<Arc<WebState>>, viewer: Viewer) -> Response {
    match engine(&state, list_tasks).await {
        Ok(tasks) => page("Tasks", Some(&viewer), tasks_table(&tasks)).into_response(),
        Err(response) => response,
    }
}

/// A report's lists as titled tables.
fn report_sections(report: &Value, lists: &[&str]) -> Markup {
    html! {
        @for name in lists {
            @let items = report.get(*name).and_then(Value::as_array).cloned().unwrap_or_default();
            h3 { (name) " (" (items.len()) ")" }
            (json_table(&items, None))
        }
    }
}

/// `GET /maintenance`: the rot audit and the archive preview.
pub async fn maintenance(State(state): State<Arc<WebState>>, viewer: Viewer) -> Response {
    let loaded = engine(&state, |vault| {
        let rot = vault.rot_audit(&RotRequest::default())?;
        let archive = vault.archive_notes(&ArchiveRequest { dry_run: true, approved: false })?;
        Ok((serde_json::to_value(&rot).unwrap_or_default(), serde_json::to_value(&archive).unwrap_or_default(), archive.moves.is_empty()))
    })
    .await;
    let (rot, archive, nothing_to_archive) = match loaded {
        Ok(loaded) => loaded,
        Err(response) => return response,
    };
    let can_act = !state.read_only && viewer.approver().is_some();
    let body = html! {
        section #rot { h2 { "Rot audit (" (scalar(&rot["notes_audited"])) " notes, " (scalar(&rot["date"])) ")" }
            (report_sections(&rot, &["outdated", "redundant", "trivial", "stale_freshness", "skipped"])) }
        section #archive { h2 { "Archive preview" }
            (report_sections(&archive, &["moves", "link_rewrites", "refused"]))
            @if can_act && !nothing_to_archive {
                form method="post" action="/maintenance/archive" {
                    input type="hidden" name="csrf" value=(viewer.csrf().unwrap_or_default());
                    button #archive-approve type="submit" { "Approve and archive" }
                }
            }
        }
    };
    page("Maintenance", Some(&viewer), body).into_response()
}

/// `POST /maintenance/archive`: the person approves the live archive run; under a `human` rule
/// it becomes a proposal to decide first.
pub async fn archive(State(state): State<Arc<WebState>>, viewer: Viewer, WebForm(form): WebForm<CsrfForm>) -> Response {
    if let Err(response) = viewer.authorise(form.csrf.as_deref()) {
        return *response;
    }
    let ran = engine(&state, |vault| match vault.archive_notes(&ArchiveRequest { dry_run: false, approved: true }) {
        Ok(report) => Ok(Ok(report)),
        Err(Error::HumanApprovalRequired { proposal_id, .. }) => Ok(Err(proposal_id)),
        Err(other) => Err(other),
    })
    .await;
    match ran {
        Ok(Ok(report)) => {
            let value = serde_json::to_value(&report).unwrap_or_default();
            page("Archived", Some(&viewer), report_sections(&value, &["moves", "link_rewrites", "refused"])).into_response()
        }
        Ok(Err(proposal_id)) => Redirect::to(&format!("/proposals/{proposal_id}")).into_response(),
        Err(response) => response,
    }
}

/// `GET /edit/<path>`: the note's text in a form whose submission creates a proposal.
pub(crate) async fn edit_form(State(state): State<Arc<WebState>>, viewer: Viewer, Path(raw): Path<String>) -> Response {
    let path = match vault_path(&raw) {
        Ok(path) => path,
        Err(response) => return *response,
    };
    let slice = match engine(&state, move |vault| vault.read_note(path.as_str(), 0, vault.policy().policy.limits.read_note_bytes_max)).await
    {
        Ok(slice) => slice,
        Err(response) => return response,
    };
    if !slice.eof {
        return bad_request("this note is larger than one read; edit it with propose_memory_change");
    }
    let body = html! {
        @if viewer.approver().is_none() { p.notice { "Log in as an approver to propose a change." } }
        form #edit-form method="post" action=(note_url("/edit", &slice.path)) {
            input type="hidden" name="csrf" value=(viewer.csrf().unwrap_or_default());
            input type="hidden" name="expected_sha256" value=(slice.sha256);
            textarea #content name="content" { (slice.content) }
            button #propose type="submit" { "Propose this change" }
        }
    };
    page(&format!("Edit {}", slice.path), Some(&viewer), body).into_response()
}

#[derive(Debug, Deserialize)]
pub(crate) struct EditForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    expected_sha256: Option<String>,
}

/// `POST /edit/<path>`: `propose_memory_change` with the edited text, based on the version the
/// form showed; then the proposal's page.
pub async fn edit(
    State(state): State<Arc<WebState>>,
    viewer: Viewer,
    Path(raw): Path<String>,
    WebForm(form): WebForm<EditForm>,
) -> Response {
    if let Err(response) = viewer.authorise(form.csrf.as_deref()) {
        return *response;
    }
    let path = match vault_path(&raw) {
        Ok(path) => path,
        Err(response) => return *response,
    };
    let Some(content) = form.content else { return bad_request("content is missing") };
    // Browsers submit textareas with CRLF line ends; notes keep LF.
    let content = content.replace("\r\n", "\n");
    let expected = form.expected_sha256;
    let proposed = engine(&state, move |vault| vault.propose_memory_change(path.as_str(), &content, None, expected.as_deref())).await;
    match proposed {
        Ok(proposal) => Redirect::to(&format!("/proposals/{}", proposal.proposal_id)).into_response(),
        Err(response) => response,
    }
}

#[derive(Debug, Deserialize)]
pub(crate) struct LoginForm {
    #[serde(default)]
    csrf: Option<String>,
    #[serde(default)]
    approver: String,
    #[serde(default)]
    secret: String,
}

fn login_page(status: StatusCode, csrf: &str, message: Option<&str>, set_cookie: Option<String>) -> Response {
    let body = html! {
        @if let Some(message) = message { p.error #error { (message) } }
        form #login-form method="post" action="/login" {
            input type="hidden" name="csrf" value=(csrf);
            label for="approver" { "Approver" }
            input #approver type="text" name="approver" autocomplete="username" required;
            label for="secret" { "Secret" }
            input #secret type="password" name="secret" autocomplete="current-password" required;
            button #login type="submit" { "Log in" }
        }
    };
    let mut response = (status, page("Log in", None, body)).into_response();
    if let Some(cookie) = set_cookie
        && let Ok(value) = http::HeaderValue::from_str(&cookie)
    {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}

/// `GET /login`: the login form, with an anonymous session holding its CSRF token.
pub(crate) async fn login_form(State(state): State<Arc<WebState>>, headers: HeaderMap) -> Response {
    let visitor = auth::visitor(&headers, &state);
    match visitor.session {
        Some(session) => login_page(StatusCode::OK, &session.csrf, None, None),
        None => {
            let (id, session) = state.sessions.create(None);
            login_page(StatusCode::OK, &session.csrf, None, Some(auth::session_cookie(&id, state.secure_cookies)))
        }
    }
}

/// `POST /login`: rate-limited per client; checks the form's CSRF token against the login
/// session, the secret against the approver's argon2 hash; a new session id on success.
pub async fn login(
    State(state): State<Arc<WebState>>,
    ClientAddr(client): ClientAddr,
    headers: HeaderMap,
    WebForm(form): WebForm<LoginForm>,
) -> Response {
    if let Err(wait) = state.login_limiter.check(client) {
        let mut response =
            error_page(StatusCode::TOO_MANY_REQUESTS, "Too many attempts", "Too many login attempts from this address; wait a minute.");
        if let Ok(value) = http::HeaderValue::from_str(&wait.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
        return response;
    }
    let visitor = auth::visitor(&headers, &state);
    let (Some(session_id), Some(session)) = (visitor.session_id.clone(), visitor.session.clone()) else {
        return error_page(
            StatusCode::FORBIDDEN,
            "Refused",
            "This request carries no valid CSRF token. Reload the login page and try again.",
        );
    };
    if !form.csrf.as_deref().is_some_and(|given| auth::tokens_equal(&session.csrf, given)) {
        return error_page(
            StatusCode::FORBIDDEN,
            "Refused",
            "This request carries no valid CSRF token. Reload the login page and try again.",
        );
    }
    let dir = state.approvers_dir.clone();
    let (name, secret) = (form.approver, form.secret);
    let checked = tokio::task::spawn_blocking(move || secrets::authenticate(&dir, &name, &secret)).await;
    match checked {
        Ok(Ok(approver)) => {
            state.sessions.remove(&session_id);
            let (id, _) = state.sessions.create(Some(approver));
            let mut response = Redirect::to("/").into_response();
            if let Ok(value) = http::HeaderValue::from_str(&auth::session_cookie(&id, state.secure_cookies)) {
                response.headers_mut().append(header::SET_COOKIE, value);
            }
            response
        }
        Ok(Err(Error::ApproverRefused | Error::InvalidArgument { .. })) => {
            login_page(StatusCode::FORBIDDEN, &session.csrf, Some("That approver name and secret were refused."), None)
        }
        Ok(Err(other)) => engine_error(&other),
        Err(_) => error_page(StatusCode::INTERNAL_SERVER_ERROR, "Internal error", "The login check failed unexpectedly."),
    }
}

/// `POST /logout`: ends the session (CSRF-checked) and clears the cookie.
pub async fn logout(State(state): State<Arc<WebState>>, viewer: Viewer, WebForm(form): WebForm<CsrfForm>) -> Response {
    if let Err(response) = viewer.authorise(form.csrf.as_deref()) {
        return *response;
    }
    if let Some(id) = &viewer.session_id {
        state.sessions.remove(id);
    }
    let mut response = Redirect::to("/login").into_response();
    if let Ok(value) = http::HeaderValue::from_str(&auth::session_cookie("", state.secure_cookies)) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
    response
}
