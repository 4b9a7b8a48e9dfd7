//! HTML for the web UI: the page layout (navigation, the header search box, breadcrumbs, a
//! refresh for pages that follow agents), error pages, the stylesheet and the favicon, human
//! times, and JSON scalars as text. Note bodies are `markdown.rs`. maud escapes every
//! interpolation.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};
use serde_json::Value;

use super::auth::Viewer;

/// Untrusted text (a proposal's diff, paths, titles, findings, comments) as a reviewer must see
/// it: every control, bidirectional-formatting and invisible character (`note::visible::hidden`)
/// shown as a marked escape (`<span class="esc">\u{202e}</span>`), the rest escaped by maud, so
/// nothing in a proposal can reorder or hide what the person approves.
pub struct Shown<'a>(pub &'a str);

impl maud::Render for Shown<'_> {
    fn render_to(&self, buffer: &mut String) {
        use std::fmt::Write as _;
        let mut plain = String::new();
        for c in self.0.chars() {
            if crate::api::note::visible::hidden(c) {
                let _ = maud::Escaper::new(buffer).write_str(&std::mem::take(&mut plain));
                buffer.push_str("<span class=\"esc\">");
                buffer.push_str(&crate::api::note::visible::escaped(c));
                buffer.push_str("</span>");
            } else {
                plain.push(c);
            }
        }
        let _ = maud::Escaper::new(buffer).write_str(&plain);
    }
}

/// The one stylesheet (served from this origin: the CSP allows no inline style).
const STYLESHEET: &str = include_str!("style.css");

/// `GET /static/style.css`.
pub(crate) async fn stylesheet() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLESHEET).into_response()
}

/// The one script (the quick switcher and the shortcuts): served from this origin, so the CSP
/// (`default-src 'self'`) admits it and no inline script; pages work without it.
const SCRIPT: &str = include_str!("app.js");

/// `GET /static/app.js`.
pub(crate) async fn script() -> Response {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], SCRIPT).into_response()
}

/// The keyboard shortcuts, as every page's legend lists them (`?` opens it): keys, what they do.
pub(crate) const SHORTCUTS: [(&str, &str); 7] = [
    ("Ctrl+K or /", "go to the search box, which lists notes by title as you type (the quick switcher)"),
    ("↑ ↓, Enter, Esc", "choose a listed note, open it, close the list (without a choice Enter searches)"),
    ("Alt+K", "the search box (the browser's access key: works without scripts)"),
    ("Alt+A", "approve, on a proposal's page (not while Approve is off)"),
    ("Alt+R", "reject, on a proposal's page"),
    ("Alt+P", "apply, on the page of a proposal that may be applied"),
    ("?", "show or hide this list"),
];

/// The favicon: a small SVG served from this origin (`GET /favicon.svg`).
const FAVICON: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 32 32\"><rect width=\"32\" height=\"32\" rx=\"6\" fill=\"#243447\"/><path d=\"M9 7h9a7 7 0 0 1 0 14h-4v5H9z M14 11v6h4a3 3 0 0 0 0-6z\" fill=\"#fff\" fill-rule=\"evenodd\"/></svg>";

/// `GET /favicon.svg`.
pub(crate) async fn favicon() -> Response {
    ([(header::CONTENT_TYPE, "image/svg+xml")], FAVICON).into_response()
}

/// What a page adds around its body: breadcrumbs (label, link; the last one is the page
/// itself) and a refresh interval for pages that follow what agents do (`<meta refresh>`: the
/// server sends no script).
#[derive(Default)]
pub struct Chrome {
    pub crumbs: Vec<(String, Option<String>)>,
    pub refresh_seconds: Option<u32>,
}

/// A whole page: navigation, the viewer's login state (logout is a POST with the CSRF token).
pub fn page(title: &str, viewer: Option<&Viewer>, body: Markup) -> Markup {
    page_with(title, viewer, &Chrome::default(), body)
}

/// A whole page with breadcrumbs or a refresh (`Chrome`).
pub fn page_with(title: &str, viewer: Option<&Viewer>, chrome: &Chrome, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                @if let Some(seconds) = chrome.refresh_seconds { meta http-equiv="refresh" content=(seconds); }
                title { (title) " · paravault" }
                link rel="icon" href="/favicon.svg" type="image/svg+xml";
                link rel="stylesheet" href="/static/style.css";
                script src="/static/app.js" defer {}
            }
            body {
                header {
                    nav aria-label="main" {
                        a href="/" { "Dashboard" }
                        a href="/browse" { "Notes" }
                        a href="/tags" { "Tags" }
                        a href="/graph" { "Graph" }
                        a href="/charts" { "Charts" }
                        a href="/search" { "Search" }
                        a href="/proposals" { "Proposals" }
                        a href="/receipts" { "Receipts" }
                        a href="/tasks" { "Tasks" }
                        a href="/maintenance" { "Maintenance" }
                    }
                    form.quick role="search" method="get" action="/search" {
                        input #quick-q type="search" name="q" placeholder="Search notes" aria-label="Search notes" accesskey="k" data-switcher;
                    }
                    @if let Some(viewer) = viewer {
                        @if let (Some(approver), Some(csrf)) = (viewer.approver(), viewer.csrf()) {
                            form.logout method="post" action="/logout" {
                                span #who { "Logged in as " strong { (approver.name()) } }
                                input type="hidden" name="csrf" value=(csrf);
                                button #logout type="submit" { "Log out" }
                            }
                        } @else if viewer.logins {
                            a href="/login" { "Log in" }
                        } @else {
                            span.notice { "read-only view" }
                        }
                    }
                }
                main {
                    @if !chrome.crumbs.is_empty() {
                        nav.crumbs aria-label="breadcrumb" { ol {
                            @for (label, link) in &chrome.crumbs {
                                li { @match link { Some(link) => a href=(link) { (label) }, None => span aria-current="page" { (label) } } }
                            }
                        } }
                    }
                    h1 { (title) }
                    (body)
                }
                footer {
                    details #shortcuts {
                        summary { "Keyboard shortcuts" }
                        table.shortcuts { tbody { @for (keys, what) in SHORTCUTS { tr { th scope="row" { kbd { (keys) } } td { (what) } } } } }
                        p.meta { "Access keys are Alt+key in Chromium and on Windows, Alt+Shift+key in Firefox, Ctrl+Option+key on a Mac. "
                            a href="/switch" { "Open a note by title" } " works without scripts." }
                    }
                }
            }
        }
    }
}

/// An error page with `status`.
pub(crate) fn error_page(status: StatusCode, title: &str, message: &str) -> Response {
    (status, page(title, None, html! { p.error #error { (message) } p { a href="/" { "Back to the dashboard" } } })).into_response()
}

/// A note body as sanitised HTML, its wikilinks unresolved (shown as text): raw HTML in the
/// Markdown becomes visible text (never markup); ammonia then keeps only harmless tags and
/// attributes and http(s)/mailto links (`markdown::render`).
#[cfg(test)]
pub(crate) fn note_html(markdown: &str) -> Markup {
    super::markdown::render(markdown, &super::markdown::Resolved::default(), false)
}

/// An RFC 3339 time as a person reads it: `2026-12-05 22:36 UTC` (no seconds' fractions);
/// anything else unchanged.
pub(crate) fn human_time(text: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(text) {
        Ok(at) => at.with_timezone(&chrono::Utc).format("%Y-%m-%d %H:%M UTC").to_string(),
        Err(_) => text.to_string(),
    }
}

/// A scalar JSON value as text (strings without quotes).
pub(crate) fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}
