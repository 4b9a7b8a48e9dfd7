//! The overview pages: `/charts` (health over time and activity from the receipt log, rot by
//! folder from the kept health summary, drawn as SVG by `charts.rs`) and the quick switcher
//! (`/switch`, and `/switch/titles` for the script that lists matches as a person types).

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use chrono::NaiveDate;
use maud::{Markup, html};
use serde::Deserialize;

use super::WebState;
use super::auth::Viewer;
use super::charts::{FolderBar, day_columns, day_points, folder_bars};
use super::pages::{WebQuery, bad_request, engine, note_url, refresh_health_summary};
use super::render::{human_time, page};
use crate::api::write::ReceiptDay;
use crate::vault::{FolderHealth, TitleMatches};

/// Days the per-day charts cover at most (today included).
pub(crate) const CHART_DAYS: usize = 90;
/// Days they cover at least (a new vault's few days are drawn inside two weeks).
const CHART_DAYS_MIN: usize = 14;
/// Folders the rot chart draws at most (the most rotten first).
pub(crate) const CHART_FOLDERS: usize = 30;
/// Notes the switcher lists at most.
const SWITCH_MATCHES: usize = 20;

/// The days drawn: from the first day with a receipt (at most `CHART_DAYS` back, at least
/// `CHART_DAYS_MIN`) to today.
fn drawn_days(days: &[ReceiptDay]) -> &[ReceiptDay] {
    let first = days.iter().position(|d| d.receipts > 0).unwrap_or(days.len());
    let start = first.min(days.len().saturating_sub(CHART_DAYS_MIN));
    &days[start..]
}

/// The folders the rot chart draws: the highest share of stale notes first (then the most
/// notes, then by name), at most `CHART_FOLDERS`.
pub(crate) fn rotten_first(folders: &[FolderHealth]) -> Vec<&FolderHealth> {
    let share = |f: &FolderHealth| if f.notes == 0 { 0.0 } else { f.stale as f64 / f.notes as f64 };
    let mut ranked: Vec<&FolderHealth> = folders.iter().filter(|f| f.notes > 0).collect();
    ranked.sort_by(|a, b| share(b).total_cmp(&share(a)).then(b.notes.cmp(&a.notes)).then(a.folder.cmp(&b.folder)));
    ranked.truncate(CHART_FOLDERS);
    ranked
}

fn folder_label(folder: &str) -> &str {
    if folder.is_empty() { "(vault root)" } else { folder }
}

fn percent(part: usize, whole: usize) -> String {
    if whole == 0 { "0%".into() } else { format!("{:.1}%", part as f64 * 100.0 / whole as f64) }
}

fn figure(caption: Markup, chart: Markup) -> Markup {
    html! { figure.chart-box { figcaption { (caption) } (chart) } }
}

/// `GET /charts`: health over time and activity per day from the receipts, rot and freshness
/// by folder from the kept health summary.
pub async fn charts(State(state): State<Arc<WebState>>, viewer: Viewer) -> Response {
    let loaded = engine(&state, |vault| {
        let activity = vault.receipt_days(CHART_DAYS)?;
        let health = match vault.health_summary_latest()? {
            Some(latest) => latest,
            None => (vault.health_summary()?, true),
        };
        Ok((activity, health))
    })
    .await;
    let (activity, (health, current)) = match loaded {
        Ok(loaded) => loaded,
        Err(response) => return response,
    };
    if !current {
        refresh_health_summary(&state);
    }
    let days = drawn_days(&activity.days);
    let dated = |f: &dyn Fn(&ReceiptDay) -> u64| -> Vec<(NaiveDate, u64)> { days.iter().map(|d| (d.date, f(d))).collect() };
    let invalid: Vec<(NaiveDate, Option<u64>)> = days.iter().map(|d| (d.date, d.invalid_notes)).collect();
    let notes: Vec<(NaiveDate, Option<u64>)> = days.iter().map(|d| (d.date, d.notes)).collect();
    let orphans = dated(&|d| d.orphans_written.unwrap_or(0));
    let written = dated(&|d| d.notes_written as u64);
    let receipts = dated(&|d| d.receipts as u64);
    let approved = dated(&|d| d.approved_writes as u64);
    let sum = |values: &[(NaiveDate, u64)]| values.iter().map(|v| v.1).sum::<u64>();
    let (first, last) = (days.first().map(|d| d.date), days.last().map(|d| d.date));
    let span = match (first, last) {
        (Some(first), Some(last)) => format!("{first} to {last}"),
        _ => "no days".into(),
    };
    let count = |rule: &str| health.counts.get(rule).copied().unwrap_or(0);
    let ranked = rotten_first(&health.folders);
    let stale_total: usize = health.folders.iter().map(|f| f.stale).sum();
    let notes_total: usize = health.folders.iter().map(|f| f.notes).sum();
    let rows: Vec<FolderBar> = ranked
        .iter()
        .map(|f| FolderBar {
            label: folder_label(&f.folder).to_string(),
            share: if f.notes == 0 { 0.0 } else { f.stale as f64 / f.notes as f64 },
            value: format!("{} of {} · {}", f.stale, f.notes, percent(f.stale, f.notes)),
        })
        .collect();
    let left_out = health.folders.iter().filter(|f| f.notes > 0).count().saturating_sub(ranked.len());
    let recorded = days.iter().filter(|d| d.receipts > 0).count();
    let body = html! {
        p #charts-intro { "Per day from " (span) " (UTC), from the receipt log (" (recorded) (if recorded == 1 { " of these days has receipts" } else { " of these days have receipts" }) "; at most the last "
            (CHART_DAYS) " days are drawn); by folder from the kept health summary. Each chart has its numbers in a table below it." }
        @if activity.cut { p.notice #charts-cut { "The receipt log holds more receipts in these days than are counted here; the oldest days miss some." } }
        section #health-over-time {
            h2 { "Health over time" }
            (figure(html! { strong { "Invalid notes" } " — as each day's last write left the vault (the receipt's " code { "notes_excluded" } ")" },
                day_points("chart-invalid", "Invalid notes per day", "invalid notes", "invalid", &invalid)))
            (figure(html! { strong { "Orphans written" } " — notes written that day that no other note links to (the receipts' " code { "lint_orphans" } "), "
                (sum(&orphans)) " in all" },
                day_columns("chart-orphans", "Orphans among the notes written per day", "orphans written", "orphans", &orphans)))
            (figure(html! { strong { "Notes in the vault" } " — as each day's last write left it (" code { "notes_scanned" } ")" },
                day_points("chart-notes", "Notes in the vault per day", "notes", "notes", &notes)))
            p.note #not-recorded { "Receipts record no count of broken links, nor the vault-wide orphan count, so they have no history here. Now: "
                strong #now-broken { (count("broken-link")) } " broken links, " strong #now-orphans { (count("orphan")) } " orphans, "
                strong #now-stale { (count("stale")) } " stale notes (lint, computed for "
                (health.computed_from.notes) " notes"
                @if let Some(at) = &health.computed_from.observed_at { ", observed " (human_time(at)) }
                @if !current { "; being brought up to date — reload in a moment" }
                ")." }
        }
        section #activity {
            h2 { "Activity" }
            (figure(html! { strong { "Notes written" } " — " (sum(&written)) " by ok receipts (a write of several notes counts each)" },
                day_columns("chart-written", "Notes written per day", "notes written", "written", &written)))
            (figure(html! { strong { "Receipts" } " — " (sum(&receipts)) ", of which " (days.iter().map(|d| d.aborted).sum::<usize>()) " aborted" },
                day_columns("chart-receipts", "Receipts per day", "receipts", "receipts", &receipts)))
            (figure(html! { strong { "Approved writes" } " — " (sum(&approved)) " writes that carry a recorded approval (a rejected proposal writes nothing)" },
                day_columns("chart-approved", "Approved writes per day", "approved writes", "approved", &approved)))
            details { summary { "The days as a table (days with receipts)" }
                div.table-wrap { table #days {
                    thead { tr { th { "day" } th { "receipts" } th { "aborted" } th { "notes written" } th { "approved writes" } th { "notes" } th { "invalid notes" } th { "orphans written" } } }
                    tbody { @for d in days.iter().rev().filter(|d| d.receipts > 0) { tr {
                        td { (d.date) } td { (d.receipts) } td { (d.aborted) } td { (d.notes_written) } td { (d.approved_writes) }
                        td { (d.notes.map(|n| n.to_string()).unwrap_or_else(|| "not recorded".into())) }
                        td { (d.invalid_notes.map(|n| n.to_string()).unwrap_or_else(|| "not recorded".into())) }
                        td { (d.orphans_written.map(|n| n.to_string()).unwrap_or_else(|| "not recorded".into())) }
                    } } }
                } }
            }
        }
        section #rot-by-folder {
            h2 { "Rot and freshness by folder" }
            p { "The share of each folder's notes that are stale (their " code { "expiry" } " has passed; archived notes and exempt folders never are): "
                (stale_total) " of " (notes_total) " notes (" (percent(stale_total, notes_total)) "). Folders down to two levels, the most rotten first"
                @if left_out > 0 { "; " (left_out) " more folders left out (at most " (CHART_FOLDERS) " are drawn)" } "." }
            @if rows.is_empty() { p.empty { "No notes yet." } } @else {
                div.chart-box { (folder_bars("chart-rot", "Stale notes by folder",
                    &format!("The share of stale notes in the {} folders drawn; {} of {} notes are stale in all.", rows.len(), stale_total, notes_total), &rows)) }
                details { summary { "The folders as a table" }
                    div.table-wrap { table #folders {
                        thead { tr { th { "folder" } th { "notes" } th { "stale" } th { "orphans" } th { "broken links" } th { "invalid" } } }
                        tbody { @for f in &ranked { tr {
                            td { a href=(if f.folder.is_empty() { "/browse".to_string() } else { note_url("/browse", &f.folder) }) { (folder_label(&f.folder)) } }
                            td { (f.notes) } td { (f.stale) } td { (f.orphans) } td { (f.broken_links) } td { (f.invalid) }
                        } } }
                    } }
                }
            }
        }
    };
    page("Charts", Some(&viewer), body).into_response()
}

#[derive(Debug, Deserialize)]
pub(crate) struct SwitchQuery {
    #[serde(default)]
    q: String,
}

fn check_query(query: &str) -> Result<(), Box<Response>> {
    if query.chars().count() > 200 || query.chars().any(char::is_control) {
        return Err(Box::new(bad_request("a title query is at most 200 characters, no control characters")));
    }
    Ok(())
}

async fn find(state: &Arc<WebState>, query: &str) -> Result<TitleMatches, Response> {
    let wanted = query.to_string();
    engine(state, move |vault| vault.find_titles(&wanted, SWITCH_MATCHES)).await
}

/// `GET /switch?q=`: the quick switcher without a script: the notes whose title or file name
/// starts with the query (or has a word starting with it), as links.
pub async fn switch(State(state): State<Arc<WebState>>, viewer: Viewer, WebQuery(query): WebQuery<SwitchQuery>) -> Response {
    if let Err(response) = check_query(&query.q) {
        return *response;
    }
    let found = if query.q.trim().is_empty() {
        None
    } else {
        match find(&state, &query.q).await {
            Ok(found) => Some(found),
            Err(response) => return response,
        }
    };
    let body = html! {
        p { "Open a note by its title: type the start of its title, file name or any word of it. With scripts on, the header's search box lists the same matches as you type (Ctrl+K or / to get there; ↑ ↓ to choose, Enter to open)." }
        form #switch-form method="get" action="/switch" role="search" {
            label for="switch-q" { "Title" }
            input #switch-q type="search" name="q" value=(query.q) autocomplete="off" data-switcher;
            button #switch-button type="submit" { "Find" }
        }
        @if let Some(found) = &found {
            @if found.matches.is_empty() { p.empty #switch-none { "No note's title or name starts with that." } }
            @else {
                ol.results #switch-results { @for m in &found.matches { li {
                    a href=(note_url("/note", &m.path)) { (m.title) } " " span.result-path { (m.path) }
                } } }
                @if found.more { p.meta { "Only the first " (found.matches.len()) " are listed; type more of the title." } }
            }
        }
    };
    page("Open a note", Some(&viewer), body).into_response()
}

/// One match as the script lists it.
#[derive(serde::Serialize)]
struct SwitchItem<'a> {
    title: &'a str,
    path: &'a str,
    url: String,
}

/// `GET /switch/titles?q=`: the switcher's matches as JSON (`{"matches": [{title, path, url}],
/// "more"}`) for `static/app.js`.
pub async fn switch_titles(State(state): State<Arc<WebState>>, _viewer: Viewer, WebQuery(query): WebQuery<SwitchQuery>) -> Response {
    if let Err(response) = check_query(&query.q) {
        return *response;
    }
    let found = match find(&state, &query.q).await {
        Ok(found) => found,
        Err(response) => return response,
    };
    let matches: Vec<SwitchItem<'_>> =
        found.matches.iter().map(|m| SwitchItem { title: &m.title, path: &m.path, url: note_url("/note", &m.path) }).collect();
    let json = serde_json::json!({ "matches": matches, "more": found.more }).to_string();
    ([(header::CONTENT_TYPE, "application/json")], json).into_response()
}
