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
use serde_json::Value;

use super::WebState;
use super::auth::{self, ClientAddr, Viewer};
use super::markdown::{Resolved, image_type, render as render_markdown, search_url, tag_url, wiki_targets};
use super::render::{Chrome, Shown, error_page, human_time, page, page_with, scalar};
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
use crate::api::search::SearchParams;
use crate::error::Error;
use crate::vault::{LinkTarget, Vault};

/// Notes one folder page lists.
const FOLDER_PAGE_NOTES: usize = 200;
/// Receipts the dashboard shows.
const DASHBOARD_RECEIPTS: usize = 10;
/// How often the dashboard and the proposals list reload themselves when the person asks them
/// to follow agents live (`?live=1`: a `<meta refresh>`, as the server sends no script), so a
/// proposal an agent just made appears without a reload. Opt-in and with a way back: a page
/// that reloads by itself unasked is an accessibility failure (WCAG 2.2.1, axe `meta-refresh`).
const REFRESH_SECONDS: u32 = 20;

#[derive(Debug, Deserialize)]
pub(crate) struct LiveQuery {
    #[serde(default)]
    live: Option<String>,
}

impl LiveQuery {
    fn on(&self) -> bool {
        self.live.as_deref().is_some_and(|v| v == "1")
    }
}

/// The switch between following live and not, for page `path` (whose other query is `query`).
fn live_switch(path: &str, query: &str, live: bool) -> Markup {
    let still = if query.is_empty() { path.to_string() } else { format!("{path}?{query}") };
    let following = if query.is_empty() { format!("{path}?live=1") } else { format!("{path}?{query}&live=1") };
    html! {
        p.meta #live {
            @if live {
                "Following live: this page reloads every " (REFRESH_SECONDS) " s. " a href=(still) { "Stop following" }
            } @else {
                a href=(following) { "Follow live" } " (reload every " (REFRESH_SECONDS) " s, to see what agents propose as they do)"
            }
        }
    }
}

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
pub(super) async fn engine<T: Send + 'static>(
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

pub(super) fn bad_request(message: &str) -> Response {
    error_page(StatusCode::BAD_REQUEST, "Bad request", message)
}

/// A note URL's path, through the same boundary as MCP arguments.
fn vault_path(raw: &str) -> Result<VaultPath, Box<Response>> {
    VaultPath::parse(raw).map_err(|e| Box::new(engine_error(&e)))
}

/// The URL of a vault path (each component percent-encoded).
pub(super) fn note_url(prefix: &str, path: &str) -> String {
    super::markdown::path_url(prefix, path)
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
            div.table-wrap { table #proposals {
                thead { tr { th { "proposal" } th { "state" } th { "operation" } th { "notes" } th { "proposed by" } th { "created" } th { "approver" } th { "decided by" } } }
                tbody {
                    @for p in list {
                        tr {
                            td { a href=(format!("/proposals/{}", p.proposal_id)) { code { (&p.proposal_id[..12]) "…" } } }
                            td.state { (state_name(p.state)) }
                            td { (p.operation.name()) }
                            td { @for (i, path) in p.paths.iter().enumerate() { @if i > 0 { ", " } (path_link(path)) } }
                            td { (Shown(&p.proposed_by)) }
                            td { (human_time(&p.created_at)) }
                            td { (if p.approver == Approver::Human { "human" } else { "caller" }) }
                            td { (Shown(&p.decision.as_ref().map(|d| format!("{} ({}, {:?})", d.approver, d.decision.name(), d.channel)).unwrap_or_default())) }
                        }
                    }
                }
            } }
        }
    }
}

/// A vault path as a link to its note (or text when it is no Markdown page).
fn path_link(path: &str) -> Markup {
    html! { @if path.ends_with(".md") { a href=(note_url("/note", path)) { (Shown(path)) } } @else { (Shown(path)) } }
}

/// Receipts as table rows (newest first), with the approval they name; paths and proposal ids
/// are links.
fn receipts_table(receipts: &[Value]) -> Markup {
    let text = |r: &Value, pointer: &str| r.pointer(pointer).map(scalar).unwrap_or_default();
    html! {
        @if receipts.is_empty() { p.empty { "none" } } @else {
            div.table-wrap { table.receipts {
                thead { tr { th { "seq" } th { "at" } th { "operation" } th { "path" } th { "status" } th { "approver" } th { "channel" } th { "proposal" } } }
                tbody { @for r in receipts.iter().rev() {
                    @let paths: Vec<String> = match r.get("path").and_then(Value::as_str) {
                        Some(path) => vec![path.to_string()],
                        None => r.get("notes").and_then(Value::as_array).map(|notes| notes.iter().filter_map(|n| n.get("path").and_then(Value::as_str).map(str::to_string)).collect()).unwrap_or_default(),
                    };
                    @let proposal = text(r, "/proposal_id");
                    tr {
                        td { (text(r, "/seq")) }
                        td { (human_time(&text(r, "/at"))) }
                        td { (text(r, "/operation")) }
                        td { @for (i, path) in paths.iter().enumerate() { @if i > 0 { ", " } (path_link(path)) } }
                        td { (text(r, "/status")) }
                        td { (text(r, "/approval/approver")) }
                        td { (text(r, "/approval/channel")) }
                        td { @if proposal.len() == 64 { a href=(format!("/proposals/{proposal}")) { code { (&proposal[..12]) "…" } } } @else { (proposal) } }
                    }
                } }
            } }
        }
    }
}

/// Tasks (handoff packets) as a table, each id a link to the task's page.
fn tasks_table(tasks: &[Value]) -> Markup {
    let text = |t: &Value, key: &str| t.get(key).map(scalar).unwrap_or_default();
    html! {
        @if tasks.is_empty() { p.empty { "none" } } @else {
            div.table-wrap { table #tasks {
                thead { tr { th { "task" } th { "state" } th { "title" } th { "owner" } th { "actor" } th { "next action" } th { "updated" } } }
                tbody { @for t in tasks { tr {
                    @let id = text(t, "task_id");
                    td { a href=(note_url("/tasks", &id)) { (id) } }
                    td.state { (text(t, "state")) }
                    td { (text(t, "title")) }
                    td { (text(t, "owner")) }
                    td { (text(t, "actor")) }
                    td { (text(t, "next_action")) }
                    td { (human_time(&text(t, "updated_at"))) }
                } } }
            } }
        }
    }
}

fn list_tasks(vault: &Vault) -> crate::Result<Vec<Value>> {
    let listed = serde_json::to_value(vault.handoff_work(HandoffRequest::new(HandoffAction::List))?).unwrap_or_default();
    Ok(listed.get("tasks").and_then(Value::as_array).cloned().unwrap_or_default())
}

/// `GET /`: the doctor report, pending approvals, latest receipts, active work packets.
pub async fn dashboard(State(state): State<Arc<WebState>>, viewer: Viewer, WebQuery(live): WebQuery<LiveQuery>) -> Response {
    let loaded = engine(&state, |vault| {
        let doctor = vault.doctor_latest()?;
        let pending: Vec<_> =
            vault.proposals()?.into_iter().filter(|p| p.state == ProposalState::Pending && p.approver == Approver::Human).collect();
        let receipts = vault.read_memory_history(DASHBOARD_RECEIPTS, 0)?;
        let tasks = list_tasks(vault)?;
        Ok((doctor, pending, receipts, tasks))
    })
    .await;
    let ((doctor, lint_current), pending, receipts, tasks) = match loaded {
        Ok(loaded) => loaded,
        Err(response) => return response,
    };
    if !lint_current {
        refresh_health_summary(&state);
    }
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
                div.table-wrap { table { thead { tr { th { "code" } th { "severity" } th { "message" } th { "remediation" } } }
                    tbody { @for issue in &doctor.issues { tr { td { (issue.code) } td { (issue.severity) } td { (issue.message) } td { (issue.remediation) } } } } } }
            }
            @if let Some(check) = doctor.vault_check.as_ref().filter(|c| !c.lint.counts.is_empty()) {
                p { "Lint findings: " @for (rule, count) in &check.lint.counts { (rule) " " (count) "; " } }
            }
            @if let Some(check) = doctor.vault_check.as_ref().filter(|_| !lint_current) {
                p.note #lint-older { "The lint figures are from an earlier state of the vault ("
                    (check.computed_from.notes) " notes"
                    @if let Some(at) = &check.computed_from.observed_at { ", observed " (human_time(at)) }
                    "); they are being brought up to date — reload in a moment." }
            }
        }
        section { h2 { "Waiting for a person" } (proposals_table(&pending)) }
        section { h2 { "Latest receipts" } (receipts_table(&receipts)) p { a href="/receipts" { "All receipts" } } }
        section { h2 { "Active work packets" } (tasks_table(&active)) }
    };
    let live = live.on();
    let body = html! { (live_switch("/", "", live)) (body) };
    page_with("Dashboard", Some(&viewer), &Chrome { crumbs: Vec::new(), refresh_seconds: live.then_some(REFRESH_SECONDS) }, body)
        .into_response()
}

/// Recomputes the health summary on a blocking thread after the dashboard showed an older one,
/// at most one at a time (a burst of visits after a write costs one whole lint).
pub(super) fn refresh_health_summary(state: &Arc<WebState>) {
    if state.health_refresh.swap(true, std::sync::atomic::Ordering::AcqRel) {
        return;
    }
    let state = Arc::clone(state);
    tokio::task::spawn_blocking(move || {
        if let Err(error) = state.vault.health_summary() {
            tracing::warn!(%error, "refreshing the health summary failed");
        }
        state.health_refresh.store(false, std::sync::atomic::Ordering::Release);
    });
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
    /// One-based: page 1 is the first.
    #[serde(default)]
    page: Option<usize>,
    /// Keep notes whose path or title holds this (no case).
    #[serde(default)]
    q: Option<String>,
    /// `path` (the default), `title` or `invalid` (invalid notes first).
    #[serde(default)]
    sort: Option<String>,
}

/// `GET /browse/<folder>`: its sub-folders and its notes (a page of them, filtered and sorted).
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
    let sort = query.sort.clone().unwrap_or_else(|| "path".into());
    if !["path", "title", "invalid"].contains(&sort.as_str()) {
        return bad_request("sort must be path, title or invalid");
    }
    let page_number = query.page.unwrap_or(1);
    if page_number == 0 {
        return bad_request("page counts from 1");
    }
    let filter = query.q.clone().unwrap_or_default();
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
    let (folders, mut notes) = match listing {
        Ok(listing) => listing,
        Err(response) => return response,
    };
    if folders.is_empty() && notes.is_empty() {
        return error_page(StatusCode::NOT_FOUND, "Not found", "No notes under this folder.");
    }
    let all_notes = notes.len();
    let needle = filter.trim().to_lowercase();
    if !needle.is_empty() {
        notes.retain(|(path, title, _)| path.to_lowercase().contains(&needle) || title.to_lowercase().contains(&needle));
    }
    match sort.as_str() {
        "title" => notes.sort_by(|a, b| a.1.to_lowercase().cmp(&b.1.to_lowercase()).then_with(|| a.0.cmp(&b.0))),
        "invalid" => notes.sort_by(|a, b| a.2.cmp(&b.2).then_with(|| a.0.cmp(&b.0))),
        _ => {}
    }
    let pages = notes.len().div_ceil(FOLDER_PAGE_NOTES).max(1);
    if page_number > pages {
        return error_page(
            StatusCode::NOT_FOUND,
            "No such page",
            &format!("This list has {pages} page(s); page {page_number} does not exist."),
        );
    }
    let index = page_number - 1;
    let shown = &notes[index * FOLDER_PAGE_NOTES..notes.len().min(page_number * FOLDER_PAGE_NOTES)];
    let base = note_url("/browse", dir.as_str());
    let link = |page: usize| {
        let mut url = url::form_urlencoded::Serializer::new(String::new());
        url.append_pair("page", &page.to_string());
        if !filter.is_empty() {
            url.append_pair("q", &filter);
        }
        if sort != "path" {
            url.append_pair("sort", &sort);
        }
        format!("{base}?{}", url.finish())
    };
    let body = html! {
        @if !folders.is_empty() {
            h2 { "Folders" }
            ul.folders #subfolders { @for (name, count) in &folders { li { a href=(note_url("/browse", &format!("{dir}/{name}"))) { (name) } " " span.count { (count) } } } }
        }
        h2 { "Notes" }
        form.filter #filter-form method="get" action=(base) {
            label for="filter" { "Filter by path or title" }
            input #filter type="search" name="q" value=(filter);
            label for="sort" { "Sort" }
            select #sort name="sort" { @for (value, name) in [("path", "by path"), ("title", "by title"), ("invalid", "invalid first")] { option value=(value) selected[value == sort] { (name) } } }
            button type="submit" { "Apply" }
        }
        p.count { (notes.len()) " of " (all_notes) " notes" }
        table #notes { thead { tr { th { "note" } th { "title" } th { "valid" } } }
            tbody { @for (path, title, valid) in shown { tr { td { a href=(note_url("/note", path)) { (path.rsplit('/').next().unwrap_or(path)) } } td { (title) } td { (if *valid { "yes" } else { "no" }) } } } } }
        @if pages > 1 {
            nav.pager aria-label="pages" { "Page " (page_number) " of " (pages) " · "
                @if page_number > 1 { a rel="prev" href=(link(page_number - 1)) { "previous" } " " }
                @if page_number < pages { a rel="next" href=(link(page_number + 1)) { "next" } } }
        }
    };
    let chrome = Chrome { crumbs: crumbs(dir.as_str()), refresh_seconds: None };
    page_with(dir.as_str(), Some(&viewer), &chrome, body).into_response()
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

/// Notes a note page expands when it embeds them (the rest are shown as links).
const EMBEDS_EXPANDED: usize = 10;
/// Bytes of an embedded note read for its excerpt, and the excerpt's length in characters.
const EMBED_READ_BYTES: usize = 4096;
const EMBED_EXCERPT_CHARS: usize = 800;

/// The start of a note's body (frontmatter left out), cut at a line end near
/// `EMBED_EXCERPT_CHARS`, with "…" when there is more.
fn excerpt(text: &str, complete: bool) -> String {
    let body = match frontmatter::split(text) {
        Ok(split) => split.body.to_string(),
        Err(_) => text.to_string(),
    };
    let body = body.trim_start();
    if complete && body.chars().count() <= EMBED_EXCERPT_CHARS {
        return body.to_string();
    }
    let cut: usize = body.chars().take(EMBED_EXCERPT_CHARS).map(char::len_utf8).sum();
    let end = body[..cut].rfind('\n').filter(|&n| n > 0).unwrap_or(cut);
    format!("{}\n\n…", body[..end].trim_end())
}

/// Breadcrumbs of a folder or a note: Notes › each folder › the last component.
fn crumbs(path: &str) -> Vec<(String, Option<String>)> {
    let mut out = vec![("Notes".to_string(), Some("/browse".to_string()))];
    let parts: Vec<&str> = path.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        let link = (i + 1 < parts.len()).then(|| note_url("/browse", &parts[..=i].join("/")));
        out.push(((*part).to_string(), link));
    }
    out
}

/// A frontmatter value as a person reads it.
enum FieldValue {
    Text(String),
    List(Vec<String>),
    Yaml(String),
}

fn field_value(value: &serde_yaml::Value) -> FieldValue {
    use serde_yaml::Value as Y;
    let scalar = |v: &Y| match v {
        Y::String(s) => Some(s.clone()),
        Y::Bool(b) => Some(b.to_string()),
        Y::Number(n) => Some(n.to_string()),
        Y::Null => Some(String::new()),
        _ => None,
    };
    match value {
        Y::Sequence(items) => match items.iter().map(scalar).collect::<Option<Vec<String>>>() {
            Some(list) => FieldValue::List(list),
            None => FieldValue::Yaml(serde_yaml::to_string(value).unwrap_or_default().trim_end().to_string()),
        },
        other => match scalar(other) {
            Some(text) => FieldValue::Text(text),
            None => FieldValue::Yaml(serde_yaml::to_string(other).unwrap_or_default().trim_end().to_string()),
        },
    }
}

/// `GET /note/<path>`: the note rendered and sanitised (wikilinks resolved by the engine,
/// embeds, callouts, tasks, footnotes, tags), its frontmatter as values, backlinks, receipts.
pub async fn note(State(state): State<Arc<WebState>>, viewer: Viewer, Path(raw): Path<String>) -> Response {
    let path = match vault_path(&raw) {
        Ok(path) => path,
        Err(response) => return *response,
    };
    let read_only = state.read_only;
    let loaded = engine(&state, move |vault| {
        let limit = vault.policy().policy.limits.read_note_bytes_max;
        let slice = vault.read_note(path.as_str(), 0, limit)?;
        let body = match frontmatter::split(&slice.content) {
            Ok(split) => split.body.to_string(),
            Err(_) => slice.content.clone(),
        };
        let targets = wiki_targets(&body);
        let found = vault.resolve_wikilinks(path.as_str(), &targets)?;
        let mut resolved = Resolved::default();
        for (target, link) in targets.into_iter().zip(found) {
            if let (true, LinkTarget::Note(embedded)) = (target.1, &link)
                && resolved.excerpts.len() < EMBEDS_EXPANDED
                && !resolved.excerpts.contains_key(embedded)
                && *embedded != slice.path
            {
                let part = vault.read_note(embedded, 0, EMBED_READ_BYTES.min(limit))?;
                resolved.excerpts.insert(embedded.clone(), excerpt(&part.content, part.eof));
            }
            resolved.targets.insert(target, link);
        }
        let backlinks = vault.backlinks(path.as_str())?;
        let receipts = receipts_of(vault, path.as_str())?;
        Ok((slice, resolved, backlinks, receipts))
    })
    .await;
    let (slice, resolved, backlinks, receipts) = match loaded {
        Ok(loaded) => loaded,
        Err(response) => return response,
    };
    let (fields, problem, body_text) = match frontmatter::split(&slice.content) {
        Ok(split) => match frontmatter::parse(&split) {
            Ok(fm) => {
                let fields: Vec<(String, FieldValue)> = fm
                    .mapping
                    .iter()
                    .map(|(k, v)| {
                        let key = k.as_str().map_or_else(|| serde_yaml::to_string(k).unwrap_or_default(), str::to_string);
                        (key, field_value(v))
                    })
                    .collect();
                (fields, None, split.body.to_string())
            }
            Err(problem) => (Vec::new(), Some(problem.to_string()), split.body.to_string()),
        },
        Err(problem) => (Vec::new(), Some(problem.to_string()), slice.content.clone()),
    };
    let rendered = render_markdown(&body_text, &resolved, false);
    let body = html! {
        p.meta { "sha256 " code #sha { (&slice.sha256[..16]) "…" } " · " (slice.total_bytes) " bytes"
            @if !slice.eof { " · " strong { "shown: the first " (slice.bytes_returned) " bytes" } }
            " · " a #graph-link href=(format!("/graph?note={}", percent_encoding::utf8_percent_encode(&slice.path, percent_encoding::NON_ALPHANUMERIC))) { "Link graph" }
            @if !read_only && slice.eof { " · " a #edit href=(note_url("/edit", &slice.path)) { "Edit (creates a proposal)" } } }
        section #frontmatter {
            h2 { "Frontmatter" }
            @if let Some(problem) = &problem { p.error { "Frontmatter problem: " (problem) } }
            table.fields { tbody { @for (key, value) in &fields { tr { th scope="row" { (key) } td {
                @match value {
                    FieldValue::Text(text) => (text),
                    FieldValue::List(items) if items.is_empty() => span.empty { "(empty list)" },
                    FieldValue::List(items) => ul.chips { @for item in items { li {
                        @if key == "tags" { a.tag href=(tag_url(item)) { "#" (item.trim_start_matches('#')) } } @else { (item) }
                    } } },
                    FieldValue::Yaml(yaml) => pre { (yaml) },
                }
            } } } } }
        }
        section { h2 { "Note" } div.note-body #note-body { (rendered) } }
        section { h2 { "Backlinks" }
            @if backlinks.is_empty() { p.empty { "none" } }
            ul #backlinks { @for source in &backlinks { li { a href=(note_url("/note", source)) { (source) } } } } }
        section { h2 { "Receipts" } (receipts_table(&receipts)) }
    };
    let chrome = Chrome { crumbs: crumbs(&slice.path), refresh_seconds: None };
    page_with(&slice.path, Some(&viewer), &chrome, body).into_response()
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

/// The search modes a person picks from (the `hybrid_reranked` alias left out: it is
/// `reranked`), each with what it does in one line.
pub(crate) const SEARCH_MODES: [(&str, &str); 7] = [
    ("auto", "picks a mode for you: the domain's priority, else full-text"),
    ("fts", "full-text: the words you type, ranked by BM25"),
    ("semantic", "by meaning: embedding similarity (needs the dense index; refused without it)"),
    ("vector", "by meaning, answering full-text when there are no dense vectors"),
    ("hybrid", "full-text and meaning fused (reciprocal rank fusion)"),
    ("reranked", "hybrid's best candidates re-ordered by a cross-encoder model"),
    ("graph_assisted", "hybrid, then notes up to two links away from the best hits"),
];

/// The temporal views with what each admits.
const TEMPORAL_VIEWS: [(&str, &str); 3] =
    [("current", "notes valid today"), ("historical", "only superseded or expired notes"), ("all", "every note")];

/// The words of a query worth marking in a snippet (two characters or more, lower-cased).
pub(crate) fn query_terms(query: &str) -> Vec<String> {
    let mut terms: Vec<String> =
        query.split(|c: char| !c.is_alphanumeric()).filter(|w| w.chars().count() >= 2).map(str::to_lowercase).collect();
    terms.sort_by_key(|t| std::cmp::Reverse(t.len()));
    terms.dedup();
    terms
}

/// A snippet with the query's words marked (`<mark>`), every piece escaped; whitespace folded.
pub(crate) fn highlighted(snippet: &str, terms: &[String]) -> Markup {
    // Wikilink brackets are Markdown syntax, not what the note says.
    let text: String = snippet.replace("![[", "").replace("[[", "").replace("]]", "").split_whitespace().collect::<Vec<_>>().join(" ");
    let lower = text.to_lowercase();
    // Lower-casing can change byte lengths: mark only where it did not.
    let mut pieces: Vec<(bool, &str)> = Vec::new();
    if lower.len() == text.len() && !terms.is_empty() {
        let mut at = 0;
        while at < text.len() {
            let hit = terms
                .iter()
                .filter_map(|t| lower[at..].find(t.as_str()).map(|i| (at + i, t.len())))
                .min_by_key(|(i, len)| (*i, std::cmp::Reverse(*len)));
            match hit {
                Some((start, len)) if text.is_char_boundary(start) && text.is_char_boundary(start + len) => {
                    if start > at {
                        pieces.push((false, &text[at..start]));
                    }
                    pieces.push((true, &text[start..start + len]));
                    at = start + len;
                }
                _ => {
                    pieces.push((false, &text[at..]));
                    at = text.len();
                }
            }
        }
    } else {
        pieces.push((false, &text));
    }
    html! { @for (marked, piece) in pieces { @if marked { mark { (piece) } } @else { (piece) } } }
}

/// `GET /search`: every mode, each explained; results with their title, the query's words
/// marked in the snippet, and their provenance.
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
            fieldset.modes {
                legend { "Mode" }
                @for (name, what) in SEARCH_MODES {
                    label.mode { input type="radio" name="mode" value=(name) checked[name == mode || (name == "reranked" && mode == "hybrid_reranked")]; " " strong { (name) } " — " (what) }
                }
            }
            label for="view" { "Temporal view" }
            select #view name="view" { @for (name, what) in TEMPORAL_VIEWS { option value=(name) selected[name == view] { (name) ": " (what) } } }
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
    let terms = query_terms(&query.q);
    let body = html! {
        (form)
        p #provenance { "Mode asked: " (mode) " · mode run: " strong #actual-mode { (envelope.actual_mode) }
            @if let Some(reason) = &envelope.fallback_reason { " (fallback: " (reason) ")" }
            " · generation " code #generation { (envelope.index_provenance.generation_id) }
            " · index age " (envelope.index_age_seconds) " s · " (envelope.result_count) " results" }
        @if let Some(replica) = &envelope.replica {
            p #replica-freshness {
                "Replica of " (replica.remote) ": team commit " code { (short_commit(replica.team_commit.as_deref())) }
                @match &replica.looked_at {
                    Some(at) => { " · " (replica.behind_when_looked) " behind the remote when it last looked (" (human_time(at)) ")" }
                    None => { " · it has not reached the remote yet" }
                }
                @if let Some(error) = &replica.last_error { " · the last replicate failed: " (error) }
            }
        }
        @if envelope.results.is_empty() { p.empty { "No note matches." } }
        ol #results.results {
            @for result in &envelope.results {
                li {
                    p.result-title {
                        a href=(note_url("/note", &result.source.path)) {
                            @if result.metadata.title.trim().is_empty() { (result.source.path) } @else { (result.metadata.title) }
                        }
                        @if result.source.stale { " " span.badge { "stale" } }
                    }
                    p.result-path { (result.source.path) " · score " (format!("{:.3}", result.score)) " · " (result.metadata.actual_mode) }
                    p.snippet { (highlighted(&result.snippet, &terms)) }
                }
            }
        }
    };
    page("Search", Some(&viewer), body).into_response()
}

/// A commit id shortened to 12 hex digits ("none yet" when there is none).
fn short_commit(commit: Option<&str>) -> String {
    commit.map_or_else(|| "none yet".to_string(), |c| c[..12.min(c.len())].to_string())
}

#[derive(Debug, Deserialize)]
pub(crate) struct ProposalsQuery {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    live: Option<String>,
}

/// `GET /proposals`: every stored proposal, filtered by state.
pub async fn proposals(State(state): State<Arc<WebState>>, viewer: Viewer, WebQuery(query): WebQuery<ProposalsQuery>) -> Response {
    let live = LiveQuery { live: query.live.clone() }.on();
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
        (live_switch("/proposals", &format!("state={wanted}"), live))
        (proposals_table(&shown))
    };
    page_with("Proposals", Some(&viewer), &Chrome { crumbs: Vec::new(), refresh_seconds: live.then_some(REFRESH_SECONDS) }, body)
        .into_response()
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
            tr { th { "notes" } td { @for (i, path) in status.paths.iter().enumerate() { @if i > 0 { ", " } (path_link(path)) } } }
            tr { th { "proposed by" } td { (Shown(&status.proposed_by)) } }
            tr { th { "created" } td { (human_time(&status.created_at)) } }
            tr { th { "approver (policy)" } td { (if status.approver == Approver::Human { "a person (human rule)" } else { "the caller" }) } }
            @if let Some(decision) = &status.decision {
                tr { th { "decision" } td #decision { (decision.decision.name()) " by " (decision.approver) " via " (format!("{:?}", decision.channel).to_lowercase())
                    " at " (human_time(&decision.decided_at)) @if !decision.comment.is_empty() { ": " (Shown(&decision.comment)) } } }
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
                    crate::api::approvals::BeforeImage::Kept => p #before-kept { @if status.state == ProposalState::Applied {
                            "Before: the text this proposal replaced when it was applied (kept with the proposal)." } @else {
                            "Before: the version this proposal was based on (kept with the proposal); the note has changed since." } },
                    crate::api::approvals::BeforeImage::Unavailable => p.notice { "The note no longer holds the version this proposal was based on, and this proposal was stored before such copies were kept." },
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
                    @if review.gate_blocking.is_empty() {
                        button #approve type="submit" name="decision" value="approve" accesskey="a" aria-keyshortcuts="Alt+A" { "Approve" }
                    } @else {
                        button #approve type="submit" name="decision" value="approve" disabled aria-describedby="approve-why" { "Approve" }
                    }
                    " "
                    button #reject type="submit" name="decision" value="reject" accesskey="r" aria-keyshortcuts="Alt+R" { "Reject" }
                    @if !review.gate_blocking.is_empty() {
                        p.error #approve-why { "Approve is off: the lint gate would refuse this change ("
                            @for (i, f) in review.gate_blocking.iter().enumerate() { @if i > 0 { "; " } "[" (f.rule) "] " (Shown(&f.path)) ": " (Shown(&f.message)) }
                            "), so applying it would fail. Reject it, or have the proposal fixed." }
                    }
                    p.meta #decide-keys { @if review.gate_blocking.is_empty() { "Keys: Alt+A approves, Alt+R rejects" } @else { "Keys: Alt+R rejects (Approve is off, and so is its key)" }
                        " — the browser's access keys; " kbd { "?" } " lists every shortcut." }
                }
            }
        }
        @if can_act && (status.state == ProposalState::Approved || (status.state == ProposalState::Pending && status.approver == Approver::Caller)) {
            form #apply-form method="post" action=(format!("/proposals/{id}/apply")) {
                input type="hidden" name="csrf" value=(csrf);
                button #apply type="submit" accesskey="p" aria-keyshortcuts="Alt+P" { "Apply" }
                p.meta #apply-keys { "Key: Alt+P applies (the browser's access key)." }
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
        Ok(tasks) => {
            let body = html! {
                p { "Work packets agents hand to each other (" code { "handoff_work" } "); an agent creates them, a person follows them here." }
                (tasks_table(&tasks))
            };
            page("Tasks", Some(&viewer), body).into_response()
        }
        Err(response) => response,
    }
}

/// `GET /tasks/<id>`: one work packet, every field.
pub async fn task(State(state): State<Arc<WebState>>, viewer: Viewer, Path(id): Path<String>) -> Response {
    if id.is_empty() || id.len() > 128 || !id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')) {
        return bad_request("a task id is letters, digits, '.', '_' and '-'");
    }
    let wanted = id.clone();
    let shown = engine(&state, move |vault| {
        let mut request = HandoffRequest::new(HandoffAction::Show);
        request.task_id = Some(wanted);
        Ok(serde_json::to_value(vault.handoff_work(request)?).unwrap_or_default())
    })
    .await;
    let task = match shown {
        Ok(task) => task,
        Err(response) => return response,
    };
    let fields: Vec<(String, Value)> = match task.get("task").unwrap_or(&task) {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        _ => Vec::new(),
    };
    let body = html! {
        table.fields #task { tbody { @for (key, value) in &fields { tr { th scope="row" { (key) } td {
            @match value {
                Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
                    @if items.is_empty() { span.empty { "none" } } @else { ul.chips { @for item in items { li { (Shown(&scalar(item))) } } } }
                }
                Value::Object(_) | Value::Array(_) => pre { (Shown(&serde_json::to_string_pretty(value).unwrap_or_default())) },
                Value::String(text) if key.ends_with("_at") => (human_time(text)),
                other => (Shown(&scalar(other))),
            }
        } } } } }
    };
    let chrome = Chrome { crumbs: vec![("Tasks".into(), Some("/tasks".into())), (id.clone(), None)], refresh_seconds: None };
    page_with(&format!("Task {id}"), Some(&viewer), &chrome, body).into_response()
}

/// An age in days as a person reads it: "12 days", "3.4 years".
fn human_days(days: f64) -> String {
    if days >= 365.0 { format!("{:.1} years", days / 365.25) } else { format!("{} days", days.round()) }
}

/// One report value: paths as links, ages in days or years, ratios with two decimals.
fn report_cell(key: &str, value: &Value) -> Markup {
    match value {
        Value::String(path) if matches!(key, "path" | "a" | "b" | "from" | "to" | "source" | "target") => path_link(path),
        Value::Number(n) if key.ends_with("_days") => html! { (n.as_f64().map(human_days).unwrap_or_default()) },
        Value::Number(n) if n.is_f64() => html! { (format!("{:.2}", n.as_f64().unwrap_or_default())) },
        Value::Array(_) | Value::Object(_) => html! { code { (Shown(&value.to_string())) } },
        other => html! { (Shown(&scalar(other))) },
    }
}

/// A report's lists as titled tables: "name (shown of total)" when the list was cut to a page.
fn report_sections(report: &Value, lists: &[&str]) -> Markup {
    html! {
        @for name in lists {
            @let items = report.get(*name).and_then(Value::as_array).cloned().unwrap_or_default();
            @let total = report.pointer(&format!("/totals/{name}")).and_then(Value::as_u64).map(|t| t as usize);
            h3 { (name.replace('_', " ")) " ("
                @match total { Some(total) if total > items.len() => { (items.len()) " shown of " (total) }, _ => { (items.len()) } }
                ")" }
            @if items.is_empty() { p.empty { "none" } } @else {
                @let keys: Vec<String> = items.first().and_then(Value::as_object).map(|m| m.keys().cloned().collect()).unwrap_or_default();
                div.table-wrap { table {
                    thead { tr { @for key in &keys { th { (key.replace('_', " ")) } } } }
                    tbody { @for item in &items { tr { @for key in &keys { td { (report_cell(key, item.get(key).unwrap_or(&Value::Null))) } } } } }
                } }
            }
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
            // The text the person starts from: after a conflict it is the base of the three-way view.
            input type="hidden" name="base" value=(slice.content);
            label for="content" { "Note text" }
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
    /// The text the form showed (`expected_sha256` is its sha256).
    #[serde(default)]
    base: Option<String>,
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
    // The base of a three-way view after a conflict: the form's text, when its sha256 is the
    // version the edit was based on (with the browser's CRLF line ends, or as the note had them).
    let base = form.base.and_then(|base| {
        let expected = form.expected_sha256.as_deref()?;
        [base.replace("\r\n", "\n"), base].into_iter().find(|b| crate::api::engine::sha256_hex(b.as_bytes()).eq_ignore_ascii_case(expected))
    });
    let expected = form.expected_sha256;
    let typed = content.clone();
    let proposed = engine(&state, move |vault| match vault.propose_memory_change(path.as_str(), &content, None, expected.as_deref()) {
        Ok(proposal) => Ok(Ok(proposal)),
        // The note changed since the form was shown: keep the person's text, show the note now.
        Err(Error::PreconditionFailed { .. }) => {
            let now = vault.read_note(path.as_str(), 0, vault.policy().policy.limits.read_note_bytes_max)?;
            Ok(Err(now))
        }
        Err(other) => Err(other),
    })
    .await;
    match proposed {
        Ok(Ok(proposal)) => Redirect::to(&format!("/proposals/{}", proposal.proposal_id)).into_response(),
        Ok(Err(now)) => (StatusCode::CONFLICT, edit_conflict(&viewer, &now, base.as_deref(), &typed)).into_response(),
        Err(response) => response,
    }
}

/// A line diff as `<pre class="diff">` (`-` only in `from`, `+` only in `to`).
fn diff_block(id: &str, from: &str, to: &str) -> Markup {
    let diff = similar::TextDiff::from_lines(from, to);
    html! {
        pre.diff id=(id) { @for change in diff.iter_all_changes() {
            @let line = change.value().trim_end_matches('\n');
            @match change.tag() {
                similar::ChangeTag::Insert => span.add { "+ " (Shown(line)) },
                similar::ChangeTag::Delete => span.del { "- " (Shown(line)) },
                similar::ChangeTag::Equal => span.same { "  " (Shown(line)) },
            }
        } }
    }
}

/// The edit form again after a conflict (409): the person's text kept, the note as it is now,
/// and a three-way view when the version they started from is known (`base`): what changed
/// in the note since, what they changed, and how their text differs from the note now.
/// Submitting proposes their text against the current version.
fn edit_conflict(viewer: &Viewer, now: &crate::vault::NoteSlice, base: Option<&str>, typed: &str) -> Markup {
    let body = html! {
        p.error #error { "[precondition_failed] This note changed since you opened it. Your text is kept below." }
        @if let Some(base) = base {
            section #three-way {
                h2 { "Three ways" }
                p { "Base: the note as you opened it. Theirs: the note as it is now (" code { (&now.sha256[..16]) "…" } "). Yours: your text below." }
                h3 { "Theirs: what changed in the note since you opened it" }
                (diff_block("conflict-theirs", base, &now.content))
                h3 { "Yours: what you changed" }
                (diff_block("conflict-yours", base, typed))
                details { summary { "Base: the note as you opened it" } pre #base { (Shown(base)) } }
            }
        } @else {
            p.notice { "The version you started from is not known here (the form did not carry it), so only your text against the note now is shown." }
        }
        h2 { "Your text against the note now" }
        p { span.del { "− only in the note now" } ", " span.add { "+ only in your text" } ". Submitting again proposes your text in place of the current version." }
        (diff_block("conflict-diff", &now.content, typed))
        form #edit-form method="post" action=(note_url("/edit", &now.path)) {
            input type="hidden" name="csrf" value=(viewer.csrf().unwrap_or_default());
            input type="hidden" name="expected_sha256" value=(now.sha256);
            input type="hidden" name="base" value=(now.content);
            label for="content" { "Your text" }
            textarea #content name="content" { (typed) }
            button #propose type="submit" { "Propose my text against the current version" }
        }
        details { summary { "The note as it is now" } pre #current { (Shown(&now.content)) } }
    };
    let chrome = Chrome { crumbs: crumbs(&now.path), refresh_seconds: None };
    page_with(&format!("Edit {} (conflict)", now.path), Some(viewer), &chrome, body)
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

/// `GET /file/<path>`: an image of the vault for an embed (`![[image.png]]`): only a file the
/// policy lists as an attachment, only the image types `markdown::IMAGE_TYPES` names, with that
/// content type (no SVG: it could hold script).
pub async fn file(State(state): State<Arc<WebState>>, _viewer: Viewer, Path(raw): Path<String>) -> Response {
    let path = match vault_path(&raw) {
        Ok(path) => path,
        Err(response) => return *response,
    };
    let Some(content_type) = image_type(path.as_str()) else {
        return error_page(StatusCode::NOT_FOUND, "Not found", "Only images of the vault are served here.");
    };
    match engine(&state, move |vault| vault.read_attachment(path.as_str())).await {
        Ok(bytes) => ([(header::CONTENT_TYPE, content_type), (header::CONTENT_DISPOSITION, "inline")], bytes).into_response(),
        Err(response) => response,
    }
}

/// `GET /tags`: every frontmatter tag with its note count.
pub async fn tags_index(State(state): State<Arc<WebState>>, viewer: Viewer) -> Response {
    let tags = match engine(&state, |vault| vault.tag_index()).await {
        Ok(tags) => tags,
        Err(response) => return response,
    };
    let body = html! {
        p { "Tags from the notes' frontmatter (`tags:`), compared without case and without “#”." }
        @if tags.is_empty() { p.empty { "No note has a tag." } }
        ul.chips #tags { @for t in &tags { li { a.tag href=(tag_url(&t.tag)) { "#" (t.tag) } " " span.count { (t.notes) } } } }
    };
    page("Tags", Some(&viewer), body).into_response()
}

/// `GET /tags/<tag>`: the notes carrying a tag, and a search for it in the notes' text.
pub async fn tag(State(state): State<Arc<WebState>>, viewer: Viewer, Path(tag): Path<String>) -> Response {
    if tag.is_empty() || tag.len() > 200 || tag.chars().any(char::is_control) {
        return bad_request("a tag is 1 to 200 characters, no control characters");
    }
    let wanted = tag.clone();
    let notes = match engine(&state, move |vault| vault.tagged_notes(&wanted)).await {
        Ok(notes) => notes,
        Err(response) => return response,
    };
    let body = html! {
        p { (notes.len()) " notes carry this tag in their frontmatter · "
            a href=(search_url(&format!("#{tag}"))) { "search the notes' text for #" (tag) } " · " a href="/tags" { "all tags" } }
        @if !notes.is_empty() {
            table #tagged { thead { tr { th { "note" } th { "title" } } }
                tbody { @for (path, title) in &notes { tr { td { a href=(note_url("/note", path)) { (path) } } td { (title) } } } } }
        }
    };
    let chrome = Chrome { crumbs: vec![("Tags".into(), Some("/tags".into())), (format!("#{tag}"), None)], refresh_seconds: None };
    page_with(&format!("#{tag}"), Some(&viewer), &chrome, body).into_response()
}

/// Nodes the link graph shows at most.
const GRAPH_NODES: usize = 60;

#[derive(Debug, Deserialize)]
pub(crate) struct GraphQuery {
    #[serde(default)]
    note: Option<String>,
}

/// `GET /graph` (the most linked notes of the vault and the links among them) and
/// `GET /graph?note=<path>` (a note's neighbourhood): server-rendered SVG.
pub async fn graph(State(state): State<Arc<WebState>>, viewer: Viewer, WebQuery(query): WebQuery<GraphQuery>) -> Response {
    let centre = match query.note.as_deref().filter(|n| !n.is_empty()).map(vault_path).transpose() {
        Ok(centre) => centre.map(|p| p.to_string()),
        Err(response) => return *response,
    };
    let wanted = centre.clone();
    let graph = match engine(&state, move |vault| vault.link_graph(wanted.as_deref(), GRAPH_NODES)).await {
        Ok(graph) => graph,
        Err(response) => return response,
    };
    let caption = match &centre {
        Some(path) => format!("Notes linked to and from {path}"),
        None => format!("The {} most linked notes and the links among them", graph.nodes.len()),
    };
    let body = html! {
        p #graph-summary { (caption) ": " (graph.nodes.len()) " notes, " (graph.edges.len()) " links"
            @if graph.left_out > 0 { " (" (graph.left_out) " more notes left out; at most " (GRAPH_NODES) " are drawn)" }
            @if centre.is_some() { " · " a href="/graph" { "whole vault" } } }
        @if graph.nodes.is_empty() { p.empty { "No links between notes yet." } }
        @else {
            div.graph-box { (super::graph::svg(&graph, centre.is_some(), &caption)) }
            details { summary { "The same notes as a list" }
                table #graph-nodes { thead { tr { th { "note" } th { "title" } th { "links" } th { "neighbourhood" } } }
                    tbody { @for node in &graph.nodes { tr {
                        td { a href=(note_url("/note", &node.path)) { (node.path) } } td { (node.title) } td { (node.degree) }
                        td { a href=(format!("/graph?note={}", percent_encoding::utf8_percent_encode(&node.path, percent_encoding::NON_ALPHANUMERIC))) { "graph" } }
                    } } } }
            }
        }
    };
    let chrome = match &centre {
        Some(path) => {
            let mut crumbs = crumbs(path);
            if let Some(last) = crumbs.last_mut() {
                last.1 = Some(note_url("/note", path));
            }
            crumbs.push(("graph".into(), None));
            Chrome { crumbs, refresh_seconds: None }
        }
        None => Chrome::default(),
    };
    page_with("Link graph", Some(&viewer), &chrome, body).into_response()
}
