//! HTML for the web UI: the page layout, error pages, the stylesheet, note bodies rendered by
//! pulldown-cmark and sanitised by ammonia (raw HTML shown as text, scripts, event handlers and
//! `javascript:` URLs removed), and JSON values as tables. maud escapes every interpolation.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, PreEscaped, html};
use pulldown_cmark::{Event, Options, Parser};
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

/// A whole page: navigation, the viewer's login state (logout is a POST with the CSRF token).
pub fn page(title: &str, viewer: Option<&Viewer>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · paravault" }
                link rel="stylesheet" href="/static/style.css";
            }
            body {
                header {
                    nav {
                        a href="/" { "Dashboard" }
                        a href="/browse" { "Notes" }
                        a href="/search" { "Search" }
                        a href="/proposals" { "Proposals" }
                        a href="/receipts" { "Receipts" }
                        a href="/tasks" { "Tasks" }
                        a href="/maintenance" { "Maintenance" }
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
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// An error page with `status`.
pub(crate) fn error_page(status: StatusCode, title: &str, message: &str) -> Response {
    (status, page(title, None, html! { p.error #error { (message) } p { a href="/" { "Back to the dashboard" } } })).into_response()
}

/// A note body as sanitised HTML. Raw HTML in the Markdown becomes visible text (never
/// markup); ammonia then keeps only harmless tags and attributes and http(s)/mailto links.
pub(crate) fn note_html(markdown: &str) -> Markup {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let events = Parser::new_ext(markdown, options).map(|event| match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        other => other,
    });
    let mut unsafe_html = String::new();
    pulldown_cmark::html::push_html(&mut unsafe_html, events);
    let clean = ammonia::Builder::default()
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .link_rel(Some("noopener noreferrer nofollow"))
        .clean(&unsafe_html)
        .to_string();
    PreEscaped(clean)
}

/// A scalar JSON value as text (strings without quotes).
pub(crate) fn scalar(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A list of JSON objects as a table (columns: the keys of the first `columns` or of the
/// objects themselves, in order of first appearance); nested values as compact JSON.
pub(crate) fn json_table(items: &[Value], columns: Option<&[&str]>) -> Markup {
    let keys: Vec<String> = match columns {
        Some(columns) => columns.iter().map(|c| (*c).to_string()).collect(),
        None => {
            let mut keys: Vec<String> = Vec::new();
            for item in items {
                if let Value::Object(map) = item {
                    for key in map.keys() {
                        if !keys.contains(key) {
                            keys.push(key.clone());
                        }
                    }
                }
            }
            keys
        }
    };
    html! {
        @if items.is_empty() {
            p.empty { "none" }
        } @else {
            table {
                thead { tr { @for key in &keys { th { (key) } } } }
                tbody {
                    @for item in items {
                        tr {
                            @for key in &keys {
                                td { (item.get(key).map(scalar).unwrap_or_default()) }
                            }
                        }
                    }
                }
            }
        }
    }
}
