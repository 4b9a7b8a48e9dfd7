//! vaultspec's `discover` over paravault's own CLI verbs: the clap definition walked into verb
//! schemas (flags, arguments, `--json`), ranked by BM25 (tantivy, in memory) over each verb's
//! path, help and flag help. Verbs on the policy's `specdocs.gateway_denylist` (those that
//! install, serve, or run commands) are never listed.

use serde_json::{Value, json};
use tantivy::collector::TopDocs;
use tantivy::query::QueryParser;
use tantivy::schema::{STORED, Schema, TEXT, Value as _};
use tantivy::{Index, TantivyDocument, doc};

use crate::error::{Error, Result};

/// The schema of one leaf verb.
fn verb_schema(path: &str, command: &clap::Command) -> Value {
    let flags: Vec<Value> = command
        .get_arguments()
        .filter(|a| a.get_long().is_some() && a.get_id() != "help" && a.get_id() != "version")
        .map(|a| {
            json!({"name": format!("--{}", a.get_long().unwrap_or_default()), "takes_value": a.get_action().takes_values(),
                   "help": a.get_help().map(|h| h.to_string()).unwrap_or_default()})
        })
        .collect();
    let arguments: Vec<Value> = command
        .get_positionals()
        .map(|a| json!({"name": a.get_id().as_str(), "required": a.is_required_set(), "variadic": a.get_num_args().is_some_and(|n| n.max_values() > 1)}))
        .collect();
    json!({"verb": path, "description": command.get_about().map(|h| h.to_string()).unwrap_or_default(),
           "supports_json": true, "flags": flags, "arguments": arguments})
}

/// Every leaf verb of the CLI that the denylist allows, with its schema.
pub fn verb_catalog(cli: &clap::Command, denylist: &[String]) -> Vec<Value> {
    fn walk(prefix: &str, command: &clap::Command, denylist: &[String], out: &mut Vec<Value>) {
        for sub in command.get_subcommands().filter(|s| s.get_name() != "help") {
            let path = if prefix.is_empty() { sub.get_name().to_string() } else { format!("{prefix} {}", sub.get_name()) };
            if denylist.iter().any(|d| *d == path || path.starts_with(&format!("{d} "))) {
                continue;
            }
            if sub.has_subcommands() {
                walk(&path, sub, denylist, out);
            } else {
                out.push(verb_schema(&path, sub));
            }
        }
    }
    let mut out = Vec::new();
    walk("", cli, denylist, &mut out);
    out
}

fn engine_error(reason: impl std::fmt::Display) -> Error {
    Error::SearchIndex { action: "ranking the verb catalog", reason: reason.to_string() }
}

/// `discover`: the catalog ranked against `query`, best first.
pub fn discover(cli: &clap::Command, query: &str, limit: usize, denylist: &[String]) -> Result<Value> {
    if query.trim().is_empty() {
        return Err(Error::InvalidArgument { name: "query", reason: "must name verb words or an intent".into() });
    }
    if limit == 0 {
        return Err(Error::InvalidArgument { name: "limit", reason: "must be at least 1".into() });
    }
    let verbs = verb_catalog(cli, denylist);
    let mut builder = Schema::builder();
    let position = builder.add_u64_field("position", STORED);
    let text = builder.add_text_field("text", TEXT);
    let index = Index::create_in_ram(builder.build());
    let mut writer = index.writer_with_num_threads(1, 15_000_000).map_err(engine_error)?;
    for (i, verb) in verbs.iter().enumerate() {
        let flags: Vec<String> = verb["flags"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|f| format!("{} {}", f["name"].as_str().unwrap_or(""), f["help"].as_str().unwrap_or("")))
            .collect();
        let body = format!(
            "{} {} {}",
            verb["verb"].as_str().unwrap_or("").replace('-', " "),
            verb["description"].as_str().unwrap_or(""),
            flags.join(" ")
        );
        writer.add_document(doc!(position => i as u64, text => body)).map_err(engine_error)?;
    }
    writer.commit().map_err(engine_error)?;
    let searcher = index.reader().map_err(engine_error)?.searcher();
    let (parsed, _) = QueryParser::for_index(&index, vec![text])
        .parse_query_lenient(&query.replace(['"', ':', '(', ')', '[', ']', '{', '}', '^', '~', '+', '-'], " "));
    let top = searcher.search(&parsed, &TopDocs::with_limit(limit).order_by_score()).map_err(engine_error)?;
    let mut ranked = Vec::new();
    for (score, address) in top {
        let document: TantivyDocument = searcher.doc(address).map_err(engine_error)?;
        let Some(i) = document.get_first(position).and_then(|v| v.as_u64()) else { continue };
        let mut verb = verbs[i as usize].clone();
        verb["score"] = json!((f64::from(score) * 1000.0).round() / 1000.0);
        ranked.push(verb);
    }
    Ok(json!({"query": query, "count": ranked.len(), "verbs": ranked}))
}
