//! The reading side of search: it answers from published generations only — on-disk ones,
//! verified when opened, and tail ones derived from durable intent records — and writes no
//! segment, manifest, `ACTIVE` or arena file (a tail generation's segment lives in memory). It
//! never names the building side (`search::build`): `tidy::search_reading_never_names_the_building_side`
//! fails on such a path.
//!
//! `search` (modes, the envelope), `related` (`memory_context`, `suggest_related`), `generation`
//! (the manifest format, verifying and opening generations, the reader registries), `tail`
//! (generation `<active>+<seq>` built in memory), `dense` (the vector arena as read, the scan),
//! `query`, `modes`, `temporal`, and the stored-document helpers below, which the building side
//! also uses to read the generation it builds on.

pub mod bm25;
pub(crate) mod dense;
pub(crate) mod envelope;
pub(crate) mod generation;
mod modes;
pub mod query;
pub(crate) mod related;
pub(crate) mod tail;
pub(crate) mod temporal;
pub(crate) mod texts;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use tantivy::collector::{DocSetCollector, TopDocs};
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::{Searcher, TantivyDocument, Term};

use dense::model_mismatch;
use envelope::{
    ENVELOPE_SCHEMA, Envelope, HANDLING_INSTRUCTION, MAX_RESULTS_LIMIT, Provenance, ResultMetadata, ResultSource, SearchRequest,
    SearchResult, TemporalView,
};
use generation::OpenGeneration;
use temporal::{TemporalStatus, TemporalTable};

use chrono::NaiveDate;

use crate::error::{Error, Result};
use crate::inventory::FileStamp;
use crate::policy::{LoadedPolicy, SearchMode};
use crate::search::schema::{self, NoteEntry, TemporalFields};
use crate::store::beneath::FolderCursor;
use crate::store::layout;

const SNIPPET_CHARS: usize = 120;

pub(crate) fn stored_text(doc: &TantivyDocument, field: tantivy::schema::Field) -> String {
    doc.get_first(field).and_then(|v| v.as_str()).unwrap_or_default().to_string()
}

pub(crate) fn kind_query(g: &OpenGeneration, kind: &str) -> TermQuery {
    TermQuery::new(Term::from_field_text(g.fields.doc_kind, kind), IndexRecordOption::Basic)
}

/// Documents of `kind` whose untokenised `field` holds exactly `text`.
pub(crate) fn kind_and_term(g: &OpenGeneration, kind: &str, field: tantivy::schema::Field, text: &str) -> BooleanQuery {
    BooleanQuery::new(vec![
        (Occur::Must, Box::new(kind_query(g, kind)) as Box<dyn Query>),
        (Occur::Must, Box::new(TermQuery::new(Term::from_field_text(field, text), IndexRecordOption::Basic))),
    ])
}

/// The note document a generation stored for `path`.
pub(in crate::search) fn note_doc(g: &OpenGeneration, searcher: &Searcher, path: &str) -> Result<Option<TantivyDocument>> {
    let q = kind_and_term(g, schema::KIND_NOTE, g.fields.path, path);
    let top = searcher.search(&q, &TopDocs::with_limit(1).order_by_score()).map_err(search_err)?;
    match top.first() {
        Some((_, addr)) => Ok(Some(searcher.doc(*addr).map_err(search_err)?)),
        None => Ok(None),
    }
}

pub(crate) fn search_err(e: tantivy::TantivyError) -> Error {
    Error::SearchIndex { action: "searching", reason: e.to_string() }
}

/// The note entry a generation stored for `path` (read once per generation and process: a
/// generation never changes). A tail generation answers a note the tail touched from its own
/// documents, any other from its base (whose documents of that note it keeps), without its
/// tantivy segment.
pub(super) fn note_entry(g: &OpenGeneration, path: &str) -> Result<Option<Arc<NoteEntry>>> {
    if let Some(known) = generation::lock(&g.note_entries).get(path) {
        return Ok(known.clone());
    }
    let doc = match &g.tail_of {
        Some(tail) if !tail.touched.contains(path) => return note_entry(&tail.base, path),
        Some(tail) => tail
            .overlay
            .docs()
            .find(|d| stored_text(d, g.fields.doc_kind) == schema::KIND_NOTE && stored_text(d, g.fields.path) == path)
            .cloned(),
        None => note_doc(g, &g.searcher()?, path)?,
    };
    let entry = doc.and_then(|doc| serde_json::from_str::<NoteEntry>(&stored_text(&doc, g.fields.note_json)).ok()).map(Arc::new);
    let mut memo = generation::lock(&g.note_entries);
    if memo.len() >= NOTE_ENTRY_MEMO_MAX {
        memo.clear();
    }
    memo.insert(path.to_string(), entry.clone());
    Ok(entry)
}

/// Bound on the per-generation note-entry memo (entries are ~1 KB).
const NOTE_ENTRY_MEMO_MAX: usize = 4096;

fn normalise_target(target: &str) -> String {
    let t = target.trim().trim_start_matches("[[").trim_end_matches("]]");
    let t = t.split('|').next().unwrap_or(t).split('#').next().unwrap_or(t).trim();
    t.trim_start_matches('/').to_string()
}

/// The temporal table of `g`: derived from its base's for a tail generation, read from its
/// note documents otherwise.
pub(super) fn load_temporal(g: &OpenGeneration) -> TemporalTable {
    match &g.tail_of {
        Some(tail) => derive_temporal(g, tail.base.temporal.get_or_init(|| load_temporal(&tail.base)), tail),
        None => build_temporal(g),
    }
}

/// The temporal table of `g` from its note documents: every memory note, every `supersedes`
/// entry resolved.
pub(super) fn build_temporal(g: &OpenGeneration) -> TemporalTable {
    let mut table = TemporalTable::default();
    let Ok(searcher) = g.searcher() else { return table };
    let q = TermQuery::new(Term::from_field_text(g.fields.has_memory, "1"), IndexRecordOption::Basic);
    let Ok(docs) = searcher.search(&q, &DocSetCollector) else { return table };
    let mut notes = std::collections::BTreeMap::new();
    for addr in docs {
        let Ok(doc) = searcher.doc::<TantivyDocument>(addr) else { continue };
        let Ok(entry) = serde_json::from_str::<NoteEntry>(&stored_text(&doc, g.fields.note_json)) else { continue };
        let memory: TemporalFields = entry.memory.clone().unwrap_or_default();
        for target in &memory.supersedes {
            table.pending.push((entry.path.clone(), normalise_target(target)));
        }
        notes.insert(entry.path, memory);
    }
    table.base_notes = Arc::new(notes);
    resolve_edges(&mut table, |_| None, |target| resolve_target(g, &searcher, target));
    table
}

/// The temporal table of tail generation `g` from its base's (`base`) and the notes the tail
/// touches: theirs replace the base's, and a target keeps the base's resolution unless a
/// touched note is at its exact path or `<target>.md` or shares its link key (a note's link key
/// is its path's, so no other note can change how the target resolves). Reads no tantivy
/// segment of the tail: the touched notes' entries come from the tail's documents, a target is
/// resolved over the base's notes the tail keeps and the tail's own.
/// Equal to `build_temporal(g)` (`search::tests::a_tail_temporal_table_is_the_one_built_from_scratch`).
fn derive_temporal(g: &OpenGeneration, base: &TemporalTable, tail: &generation::TailOf) -> TemporalTable {
    let touched = &tail.touched;
    // The base's notes are shared, not copied: the touched notes' fields go in `changed` over
    // them (a base that is itself derived brings its own changes along).
    let mut table = TemporalTable {
        base_notes: base.base_notes.clone(),
        changed: base.changed.iter().filter(|(path, _)| !touched.contains(*path)).map(|(p, f)| (p.clone(), f.clone())).collect(),
        pending: base.pending.iter().filter(|(from, _)| !touched.contains(from)).cloned().collect(),
        ..TemporalTable::default()
    };
    for path in touched.iter() {
        let memory = match note_entry(g, path) {
            Ok(Some(entry)) => entry.memory.clone(),
            _ => None,
        };
        for target in memory.iter().flat_map(|m| &m.supersedes) {
            table.pending.push((path.clone(), normalise_target(target)));
        }
        table.changed.insert(path.clone(), memory);
    }
    let keys: std::collections::BTreeSet<String> = touched.iter().map(|p| crate::inventory::link_key(p)).collect();
    let may_change = |target: &str| {
        touched.contains(target) || touched.contains(&format!("{target}.md")) || keys.contains(&crate::inventory::link_key(target))
    };
    let base_searcher = tail.base.searcher().ok();
    resolve_edges(
        &mut table,
        |target| if may_change(target) { None } else { base.resolved.get(target).cloned() },
        |target| resolve_in_tail(g, tail, base_searcher.as_ref(), target),
    );
    table
}

/// Resolves every `pending` target of `table` into `resolved` and `edges`: `known` gives a
/// resolution already known to hold, `resolve` looks the others up.
fn resolve_edges(table: &mut TemporalTable, known: impl Fn(&str) -> Option<Option<String>>, resolve: impl Fn(&str) -> Option<String>) {
    for (from, target) in &table.pending {
        if !table.resolved.contains_key(target) {
            let resolution = known(target).unwrap_or_else(|| resolve(target));
            table.resolved.insert(target.clone(), resolution);
        }
        if let Some(Some(to)) = table.resolved.get(target) {
            table.edges.push((from.clone(), to.clone()));
        }
    }
}

/// The one note `target` names in `g` (its exact path, `<target>.md`, else the only note with
/// its link key), or `None`.
fn resolve_target(g: &OpenGeneration, searcher: &Searcher, target: &str) -> Option<String> {
    for candidate in [target.to_string(), format!("{target}.md")] {
        if let Ok(Some(doc)) = note_doc(g, searcher, &candidate)
            && serde_json::from_str::<NoteEntry>(&stored_text(&doc, g.fields.note_json)).is_ok()
        {
            return Some(candidate);
        }
    }
    let mut found: Vec<String> = Vec::new();
    let q = TermQuery::new(Term::from_field_text(g.fields.link_key, &crate::inventory::link_key(target)), IndexRecordOption::Basic);
    if let Ok(docs) = searcher.search(&q, &DocSetCollector) {
        for addr in docs {
            if let Ok(doc) = searcher.doc::<TantivyDocument>(addr) {
                found.push(stored_text(&doc, g.fields.path));
            }
        }
    }
    if found.len() == 1 { found.pop() } else { None }
}

/// `resolve_target` in tail generation `g`: the base's documents of notes the tail does not
/// touch (read with the base's searcher), and the tail's documents.
fn resolve_in_tail(g: &OpenGeneration, tail: &generation::TailOf, base: Option<&Searcher>, target: &str) -> Option<String> {
    for candidate in [target.to_string(), format!("{target}.md")] {
        if let Ok(Some(_)) = note_entry(g, &candidate) {
            return Some(candidate);
        }
    }
    let key = crate::inventory::link_key(target);
    let mut found: Vec<String> = Vec::new();
    let q = TermQuery::new(Term::from_field_text(g.fields.link_key, &key), IndexRecordOption::Basic);
    if let Some(searcher) = base
        && let Ok(docs) = searcher.search(&q, &DocSetCollector)
    {
        for addr in docs {
            if let Ok(doc) = searcher.doc::<TantivyDocument>(addr) {
                let path = stored_text(&doc, g.fields.path);
                if !tail.touched.contains(&path) {
                    found.push(path);
                }
            }
        }
    }
    for doc in tail.overlay.docs() {
        if doc.get_all(g.fields.link_key).any(|v| v.as_str() == Some(key.as_str())) {
            found.push(stored_text(doc, g.fields.path));
        }
    }
    if found.len() == 1 { found.pop() } else { None }
}

fn index_age_seconds(g: &OpenGeneration) -> i64 {
    chrono::DateTime::parse_from_rfc3339(&g.manifest.created_at)
        .map_or(0, |t| (crate::clock::machine_utc() - t.with_timezone(&chrono::Utc)).num_seconds().max(0))
}

/// A note hit: best chunk and how many chunks matched.
pub(in crate::search) struct NoteHit {
    pub(crate) path: String,
    pub(crate) score: f32,
    pub(crate) body: String,
    pub(crate) matches: usize,
}

fn in_domain(path: &str, domain: &Option<String>) -> bool {
    match domain {
        None => true,
        Some(d) => {
            let d = d.trim().trim_matches('/');
            d.is_empty() || path == d || path.starts_with(&format!("{d}/"))
        }
    }
}

/// Ranked note hits for an analysed query, filtered, at most `n`.
fn ranked_notes(
    g: &OpenGeneration,
    search_policy: &crate::policy::SearchPolicy,
    analysed: &query::Analysed,
    n: usize,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<NoteHit>> {
    ranked_notes_via(g, search_policy, analysed, n, keep, true)
}

/// `ranked_notes`; `overlay` false: a tail generation's through its tantivy segment (tests
/// compare the two).
pub(in crate::search) fn ranked_notes_via(
    g: &OpenGeneration,
    search_policy: &crate::policy::SearchPolicy,
    analysed: &query::Analysed,
    n: usize,
    keep: &dyn Fn(&str) -> bool,
    overlay: bool,
) -> Result<Vec<NoteHit>> {
    // A tail generation answers a query of words alone without its tantivy segment (a phrase
    // needs positions: tantivy's `PhraseQuery` reads them from the segment).
    if let Some(tail) = &g.tail_of
        && overlay
        && analysed.phrases.is_empty()
    {
        let Some(q) = query::bm25(&g.fields, search_policy, analysed) else { return Ok(Vec::new()) };
        return ranked_in_tail(g, tail, &q, n, keep);
    }
    let Some(q) = query::build(&g.fields, search_policy, analysed) else { return Ok(Vec::new()) };
    let searcher = g.searcher()?;
    let stats = query::Bm25Statistics::new(&searcher, &g.fields).map_err(search_err)?;
    // Chunks aggregate to notes by the `note_key` fast field (nanoseconds per hit); stored
    // documents are read only for the notes that are returned (or filtered out on the way).
    let mut columns: Vec<Option<tantivy::columnar::Column<u64>>> = Vec::new();
    for reader in searcher.segment_readers() {
        columns.push(reader.fast_fields().u64("note_key").ok());
    }
    let top = |limit: usize| -> Result<Vec<(f32, tantivy::DocAddress)>> {
        searcher.search_with_statistics_provider(&q, &TopDocs::with_limit(limit).order_by_score(), &stats).map_err(search_err)
    };
    let key =
        |addr: tantivy::DocAddress| columns.get(addr.segment_ord as usize).and_then(Option::as_ref).and_then(|c| c.first(addr.doc_id));
    let doc = |addr: tantivy::DocAddress| -> Result<(String, String)> {
        let doc: TantivyDocument = searcher.doc(addr).map_err(search_err)?;
        Ok((stored_text(&doc, g.fields.path), stored_text(&doc, g.fields.body)))
    };
    collect_notes(searcher.num_docs() as usize, n, keep, &top, &key, &doc)
}

/// `ranked_notes` of the words-only query `q` in tail generation `g`: the base's segments and
/// the tail's documents scored as `tail.overlay` lays them out (`Bm25Query::top_k`), with the
/// doc addresses the tail's tantivy commit gives.
fn ranked_in_tail(
    g: &OpenGeneration,
    tail: &generation::TailOf,
    q: &bm25::Bm25Query,
    n: usize,
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<NoteHit>> {
    let overlay = &tail.overlay;
    let searcher = tail.base.searcher()?;
    let readers = searcher.segment_readers();
    let columns: Vec<Option<tantivy::columnar::Column<u64>>> = readers.iter().map(|r| r.fast_fields().u64("note_key").ok()).collect();
    let tail_keys = overlay.memory.fast.get("note_key");
    let top = |limit: usize| tail_top(tail, &searcher, q, limit);
    let key = |addr: tantivy::DocAddress| match overlay.layout.get(addr.segment_ord as usize).copied().flatten() {
        Some(ord) => columns.get(ord as usize).and_then(Option::as_ref).and_then(|c| c.first(addr.doc_id)),
        None => tail_keys.and_then(|k| k.get(addr.doc_id as usize).copied().flatten()),
    };
    let doc = |addr: tantivy::DocAddress| -> Result<(String, String)> {
        match overlay.layout.get(addr.segment_ord as usize).copied().flatten() {
            Some(ord) => {
                let doc: TantivyDocument = searcher.doc(tantivy::DocAddress::new(ord, addr.doc_id)).map_err(search_err)?;
                Ok((stored_text(&doc, g.fields.path), stored_text(&doc, g.fields.body)))
            }
            None => {
                let doc = overlay
                    .doc(addr.doc_id)
                    .ok_or_else(|| search_err(tantivy::TantivyError::InvalidArgument("no such tail document".into())))?;
                Ok((stored_text(doc, g.fields.path), stored_text(doc, g.fields.body)))
            }
        }
    };
    collect_notes(overlay.num_docs as usize, n, keep, &top, &key, &doc)
}

/// The best `limit` documents for `q` in tail generation `tail` (`searcher`: its base's), with
/// the doc addresses the tail's tantivy commit gives: what
/// `TopDocs::with_limit(limit).order_by_score()` finds in the generation's tantivy index.
pub(in crate::search) fn tail_top(
    tail: &generation::TailOf,
    searcher: &Searcher,
    q: &bm25::Bm25Query,
    limit: usize,
) -> Result<Vec<(f32, tantivy::DocAddress)>> {
    let overlay = &tail.overlay;
    let readers = searcher.segment_readers();
    let dead: Vec<Box<dyn Fn(tantivy::DocId) -> bool + '_>> = overlay
        .doomed
        .iter()
        .zip(readers)
        .map(|(doomed, reader)| Box::new(move |doc| reader.is_deleted(doc) || doomed.contains(&doc)) as Box<dyn Fn(tantivy::DocId) -> bool>)
        .collect();
    let mut parts = Vec::with_capacity(overlay.layout.len());
    for slot in &overlay.layout {
        parts.push(match slot {
            Some(ord) => bm25::Part::Base { reader: &readers[*ord as usize], dead: dead[*ord as usize].as_ref() },
            None => bm25::Part::Memory(&overlay.memory),
        });
    }
    let top = q.top_k(&parts, limit).map_err(search_err)?;
    Ok(top.into_iter().map(|(score, part, doc)| (score, tantivy::DocAddress::new(part, doc))).collect())
}

/// Note hits from a ranked chunk list: `top(limit)` gives the best `limit` chunks, `key` a
/// chunk's note, `doc` its (path, body); `total` is the collection's live documents.
fn collect_notes(
    total: usize,
    n: usize,
    keep: &dyn Fn(&str) -> bool,
    top: &dyn Fn(usize) -> Result<Vec<(f32, tantivy::DocAddress)>>,
    key: &dyn Fn(tantivy::DocAddress) -> Option<u64>,
    doc: &dyn Fn(tantivy::DocAddress) -> Result<(String, String)>,
) -> Result<Vec<NoteHit>> {
    // A short first list keeps the block-max WAND threshold high; notes with many matching
    // chunks (or filtered out) grow it 4x per round.
    let mut limit = (n * 2).max(20);
    loop {
        let top = top(limit)?;
        // (score, best chunk, matching chunks) per note, best first.
        let mut order: Vec<(f32, tantivy::DocAddress, usize)> = Vec::new();
        let mut at: HashMap<u64, usize> = HashMap::new();
        for (score, addr) in &top {
            let slot = match key(*addr) {
                Some(key) => at.get(&key).copied().or_else(|| {
                    at.insert(key, order.len());
                    None
                }),
                None => None,
            };
            match slot {
                Some(i) => order[i].2 += 1,
                None => order.push((*score, *addr, 1)),
            }
        }
        let exhausted = top.len() < limit || limit >= total;
        let mut kept: Vec<NoteHit> = Vec::new();
        for (score, addr, matches) in order {
            let (path, body) = doc(addr)?;
            if keep(&path) {
                kept.push(NoteHit { path, score, body, matches });
                if kept.len() == n {
                    return Ok(kept);
                }
            }
        }
        if exhausted {
            return Ok(kept);
        }
        limit = (limit * 4).min(total.max(1));
    }
}

/// Collapses whitespace in a char window of `text` centred on byte offset `at`: `width`
/// chars starting `width / 3` chars before the first char at or after `at` (the window slides
/// back from the end of the text to stay `width` long; a text shorter than `width` is whole).
/// Returns (window, cut at the start, cut at the end). Walks the window's chars only, never
/// the whole text.
fn window(text: &str, at: usize, width: usize) -> (String, bool, bool) {
    // The centre: the first char starting at or after `at` (none past the last char: the start).
    let centre = (at..text.len()).find(|&b| text.is_char_boundary(b)).unwrap_or(0);
    let back = |from: usize, chars: usize| text[..from].char_indices().rev().take(chars).last().map_or(from, |(b, _)| b);
    let start = back(centre, width / 3);
    let mut forward = text[start..].char_indices().map(|(b, _)| start + b).skip(width);
    let (start, end) = match forward.next() {
        Some(end) => (start, end),
        // The text ends within `width` chars of the start: the window ends there instead.
        None => (back(text.len(), width), text.len()),
    };
    let slice = &text[start..end];
    let mut collapsed = String::with_capacity(slice.len());
    for part in slice.split(char::is_whitespace).filter(|p| !p.is_empty()) {
        if !collapsed.is_empty() {
            collapsed.push(' ');
        }
        collapsed.push_str(part);
    }
    (collapsed, start > 0, end < text.len())
}

/// (snippet, matched_text) from a chunk body, centred on the first query term found.
fn snippets(body: &str, analysed: &query::Analysed) -> (String, String) {
    let wanted = analysed.all_tokens();
    let mut locator = schema::locator();
    let at = schema::first_token(&mut locator, body, |t| wanted.contains(t)).map_or(0, |r| r.start);
    let (matched, _, _) = window(body, at, SNIPPET_CHARS);
    let (inner, cut_start, cut_end) = window(body, at, SNIPPET_CHARS - 2);
    let snippet = format!("{}{}{}", if cut_start { "…" } else { "" }, inner, if cut_end { "…" } else { "" });
    (snippet, matched)
}

/// First 16 hex of sha256(path \0 content_sha256).
pub(super) fn result_id(path: &str, content_sha256: &str) -> String {
    let mut bytes = Vec::with_capacity(path.len() + content_sha256.len() + 1);
    bytes.extend_from_slice(path.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(content_sha256.as_bytes());
    schema::sha256_hex(&bytes)[..16].to_string()
}

/// The sha256 of the note as it is on disk now (`None`: unreadable). Hashes are remembered per
/// (root, path) with the file's size, mtime, ctime and inode; a remembered hash is used only
/// while all four match and the mtime is more than two seconds older than when it was hashed
/// (so an edit within the timestamp granularity of the hashing instant is never missed —
/// git's racy-clean rule).
///
/// The note is stat'ed and opened through folder handles (never by path, so a folder swapped
/// for a link is never read through, and a link is never followed): a remembered hash costs a
/// stat relative to the note's folder, not an open; a note hashed again gets its stat identity
/// from the open file.
fn on_disk_sha256(cursor: &mut FolderCursor<'_>, root: &Path, path: &str) -> Option<String> {
    use std::io::Read;
    static SEEN: LazyLock<Mutex<HashMap<PathBuf, (FileStamp, String)>>> = LazyLock::new(|| Mutex::new(HashMap::new()));
    let file = layout::join(root, path);
    let now = FileStamp::of_stat(&cursor.stat_regular(path).ok()?);
    if let Some((known, hash)) = generation::lock(&SEEN).get(&file)
        && *known == now
    {
        return Some(hash.clone());
    }
    let mut opened = cursor.open_read(path).ok()?;
    let stamp = FileStamp::of(&opened.metadata().ok()?);
    let mut bytes = Vec::new();
    opened.read_to_end(&mut bytes).ok()?;
    let hash = schema::sha256_hex(&bytes);
    let settled = i128::from(crate::clock::machine_utc().timestamp()) - stamp.mtime_ns.div_euclid(1_000_000_000) > 2;
    let mut seen = generation::lock(&SEEN);
    if seen.len() >= 65_536 {
        seen.clear();
    }
    if settled {
        seen.insert(file, (stamp, hash.clone()));
    } else {
        seen.remove(&file);
    }
    Some(hash)
}

/// Characters of the cut text quoted in `query_truncated` (the rest is counted, not quoted).
const CUT_QUOTE_CHARS: usize = 80;

/// `text` cut to at most `max_chars` characters at the last whitespace within the bound (or at
/// the bound inside one over-long word), and, when anything was cut, the `query_truncated`
/// reason naming how much and how it began.
pub(super) fn cut_query(text: &str, max_chars: usize) -> (&str, Option<String>) {
    let Some((bound, _)) = text.char_indices().nth(max_chars) else { return (text, None) };
    let head = &text[..bound];
    let end = match head.rfind(char::is_whitespace) {
        Some(space) if space > 0 => space,
        _ => bound,
    };
    let (kept, rest) = (text[..end].trim_end(), text[end..].trim_start());
    let quoted: String = rest.chars().take(CUT_QUOTE_CHARS).collect();
    let ellipsis = if rest.chars().count() > CUT_QUOTE_CHARS { "…" } else { "" };
    let reason = format!(
        "query_truncated: the query has {} characters and search.query_chars_max is {max_chars}; the first {} were searched, the last {} were not (they begin \"{quoted}{ellipsis}\")",
        text.chars().count(),
        kept.chars().count(),
        rest.chars().count()
    );
    (kept, Some(reason))
}

/// Builds what the next search of `root` reads, so one that follows finds it built: the
/// generation `ACTIVE` names with the journal's tail after it (`generation::acquire`) and its
/// table of temporal statuses. Nothing is answered; the search itself checks it all again.
pub fn prepare(root: &Path, policy: &LoadedPolicy, as_of: NaiveDate) -> Result<()> {
    let g = generation::acquire(root, policy)?.generation;
    statuses_at(&g, as_of);
    Ok(())
}

/// The temporal statuses of `g`'s notes at `as_of` (notes not named are current): its table's,
/// remembered for the date last asked.
fn statuses_at(g: &OpenGeneration, as_of: NaiveDate) -> temporal::Statuses {
    let mut memo = generation::lock(&g.statuses);
    if let Some((date, statuses)) = memo.as_ref()
        && *date == as_of
    {
        return Arc::clone(statuses);
    }
    let statuses = Arc::new(g.temporal.get_or_init(|| load_temporal(g)).statuses(as_of));
    *memo = Some((as_of, Arc::clone(&statuses)));
    statuses
}

/// Full-text search over the published generation, answered as a retrieval envelope.
pub fn search(root: &Path, policy: &LoadedPolicy, request: SearchRequest) -> Result<Envelope> {
    search_with_chunks(root, policy, request).map(|(envelope, _)| envelope)
}

/// `search`, with the whole text of each result's matching chunk (the envelope carries only a
/// window of it), in result order: for surfaces whose contract answers chunks (ctxvault's
/// `query`).
pub(crate) fn search_with_chunks(root: &Path, policy: &LoadedPolicy, request: SearchRequest) -> Result<(Envelope, Vec<String>)> {
    let text = request.query.trim();
    if text.is_empty() {
        return Err(Error::SearchQueryInvalid { reason: "the query is empty".into() });
    }
    // A long query (a user's paragraph) is analysed up to the policy's bound, cut at the last
    // word boundary within it, and the envelope says what was left out instead of refusing it.
    let (text, truncated) = cut_query(text, policy.policy.search.query_chars_max);
    let cap = MAX_RESULTS_LIMIT.min(policy.policy.search.max_results_cap);
    if !(1..=cap).contains(&request.max_results) {
        return Err(Error::InvalidArgument { name: "max_results", reason: format!("must be in 1..={cap}") });
    }
    if let Some(d) = &request.domain
        && (d.split('/').any(|p| p == "..")
            || d.contains('\\')
            || d.contains('\0')
            || d.trim_start().starts_with('/')
            || d.as_bytes().get(1) == Some(&b':'))
    {
        return Err(Error::InvalidArgument { name: "domain", reason: "must be a vault-relative folder prefix".into() });
    }
    let acquired = generation::acquire(root, policy)?;
    let mut fallback_reason = acquired.fallback_reason.clone();
    if let Some(cut) = truncated {
        fallback_reason = Some(match fallback_reason {
            Some(r) => format!("{cut}; {r}"),
            None => cut,
        });
    }
    let g = acquired.generation;
    let as_of = request.as_of;
    let statuses = statuses_at(&g, as_of);
    let status_of = |p: &str| statuses.get(p).copied().unwrap_or(TemporalStatus::Current);
    let view = request.temporal_view;
    let keep = |p: &str| {
        in_domain(p, &request.domain)
            && match view {
                TemporalView::Current => status_of(p) == TemporalStatus::Current,
                TemporalView::Historical => status_of(p) == TemporalStatus::Historical,
                TemporalView::All => true,
            }
    };
    let analysed = query::analyse(text);
    let search_policy = &policy.policy.search;
    let dense_ready = || -> Result<(Arc<dense::DenseView>, Vec<f32>)> {
        let view = g.dense()?.ok_or_else(|| Error::DenseIndexUnavailable {
            reason: "the active generation has no dense index; run sync_vault with fts_only=false".into(),
        })?;
        let handle = crate::embed::vault_handle(&policy.policy, root);
        if let Some(mismatch) = model_mismatch(&view.manifest, &handle, policy.policy.embedding.max_tokens) {
            return Err(Error::DenseIndexUnavailable {
                reason: format!("{mismatch}; run sync_vault with fts_only=false and force_rebuild=true"),
            });
        }
        let vector = modes::query_vector(&handle, text)?;
        Ok((view, vector))
    };
    // `auto` with a domain tries the domain's search_priority in order: the first mode that can
    // run here runs as if asked for, and the skipped ones are named.
    let mut requested = request.search_mode;
    if requested == SearchMode::Auto && !request.auto_priority.is_empty() {
        let mut skipped = Vec::new();
        requested = SearchMode::Fts;
        for &mode in &request.auto_priority {
            let runnable = match mode {
                SearchMode::Auto | SearchMode::Fts => Ok(()),
                SearchMode::Reranked => crate::embed::cross_encoder::vault_handle(&policy.policy, root)
                    .model()
                    .map(|_| ())
                    .map_err(|e| format!("{}: {e}", e.code())),
                SearchMode::Vector | SearchMode::Hybrid | SearchMode::GraphAssisted if g.dense()?.is_none() => Ok(()),
                _ => dense_ready().map(|_| ()).map_err(|e| format!("{}: {e}", e.code())),
            };
            match runnable {
                Ok(()) => {
                    requested = if mode == SearchMode::Auto { SearchMode::Fts } else { mode };
                    break;
                }
                Err(reason) => skipped.push(format!("{} ({reason})", mode.name())),
            }
        }
        if !skipped.is_empty() {
            let reason = format!("domain search_priority: skipped {}; ran {}", skipped.join(", "), requested.name());
            fallback_reason = Some(match fallback_reason {
                Some(r) => format!("{reason}; {r}"),
                None => reason,
            });
        }
    }
    let (mode, dense) = match requested {
        SearchMode::Fts => (SearchMode::Fts, None),
        SearchMode::Auto => match dense_ready() {
            Ok(ready) => (SearchMode::parse(&search_policy.auto_dense_mode)?, Some(ready)),
            Err(e) => {
                let reason = format!("{}: {e}", e.code());
                fallback_reason = Some(match fallback_reason {
                    Some(r) => format!("{reason}; {r}"),
                    None => reason,
                });
                (SearchMode::Fts, None)
            }
        },
        // P.O.W.E.R. serves these three lexically (reference §6.3): without dense vectors they
        // answer from BM25 alone and say so; with them they keep their dense meaning.
        lexical @ (SearchMode::Vector | SearchMode::Hybrid | SearchMode::GraphAssisted | SearchMode::Reranked) if g.dense()?.is_none() => {
            let ran = match lexical {
                SearchMode::GraphAssisted => "graph_assisted expanded BM25 anchors along stored links (no dense list to fuse)",
                SearchMode::Reranked => "the cross-encoder reranked the BM25 candidates (no dense list to fuse)",
                _ => "answered with BM25 full-text ranking (actual_mode fts)",
            };
            let reason = format!("dense_index_unavailable: the active generation has no dense vectors; {ran}");
            fallback_reason = Some(match fallback_reason {
                Some(r) => format!("{reason}; {r}"),
                None => reason,
            });
            (lexical, None)
        }
        other => (other, Some(dense_ready()?)),
    };
    if let Some((view, _)) = &dense
        && !view.manifest.owed.is_empty()
    {
        let owed = format!(
            "vectors_owed: {} notes written without the embedding model have no vectors yet; the dense list cannot include them (`paravault sync --dense` embeds them)",
            view.manifest.owed.len()
        );
        fallback_reason = Some(match fallback_reason {
            Some(r) => format!("{r}; {owed}"),
            None => owed,
        });
    }
    if dense.is_some()
        && let Some(cut) = modes::embedding_cut(&crate::embed::vault_handle(&policy.policy, root), text)?
    {
        fallback_reason = Some(match fallback_reason {
            Some(r) => format!("{r}; {cut}"),
            None => cut,
        });
    }
    let n = request.max_results;
    let depth = search_policy.fusion_depth.max(n);
    let rrf_k = search_policy.rrf_k as f32;
    // Reranked fails closed before any work when its model cannot be loaded.
    let reranker =
        if mode == SearchMode::Reranked { Some(crate::embed::cross_encoder::vault_handle(&policy.policy, root).model()?) } else { None };
    let (hits, label) = match (mode, &dense) {
        (SearchMode::Semantic | SearchMode::Vector, Some((view, q))) => (modes::dense_notes(&g, view, q, n, &keep)?, "semantic"),
        (SearchMode::Reranked, _) => {
            let policy_r = &policy.policy.reranker;
            let pool = policy_r.candidates.max(n);
            let candidates = match &dense {
                Some((view, q)) => {
                    let mut lists = Vec::with_capacity(2);
                    if let Some(fts_query) = query::build(&g.fields, search_policy, &analysed) {
                        lists.push(modes::fts_candidates(&g, fts_query.as_ref(), depth.max(pool))?);
                    }
                    lists.push(modes::dense_candidates(view, q, depth.max(pool)));
                    modes::materialize(&g, &modes::fuse_candidates(lists, rrf_k), pool, &keep)?
                }
                None => ranked_notes(&g, search_policy, &analysed, pool, &keep)?,
            };
            let model = reranker.as_ref().ok_or_else(|| Error::RerankerUnavailable { reason: "the reranker was not loaded".into() })?;
            let deadline = std::time::Instant::now() + std::time::Duration::from_millis(policy_r.time_budget_ms);
            match modes::rerank(model, text, candidates, deadline)? {
                Ok(reranked) => (reranked.into_iter().take(n).collect(), "reranked"),
                Err(fused) => {
                    let reason = format!(
                        "reranker_time_budget: reranking {} candidates did not finish within reranker.time_budget_ms {} ms; returned the fused order",
                        fused.len(),
                        policy_r.time_budget_ms
                    );
                    fallback_reason = Some(match fallback_reason {
                        Some(r) => format!("{reason}; {r}"),
                        None => reason,
                    });
                    (fused.into_iter().take(n).collect(), "reranked")
                }
            }
        }
        (SearchMode::Hybrid | SearchMode::GraphAssisted, Some((view, q))) => {
            // Both lists are `fusion_depth` notes deep and fused by note key; stored documents
            // are read only for the notes returned.
            let mut lists = Vec::with_capacity(2);
            if let Some(fts_query) = query::build(&g.fields, search_policy, &analysed) {
                lists.push(modes::fts_candidates(&g, fts_query.as_ref(), depth)?);
            }
            lists.push(modes::dense_candidates(view, q, depth));
            let fused = modes::fuse_candidates(lists, rrf_k);
            let anchors = modes::materialize(&g, &fused, n, &keep)?;
            if mode == SearchMode::Hybrid {
                (anchors, "hybrid")
            } else {
                let decay = search_policy.graph_decay as f32;
                (modes::graph_expand(&g, anchors, search_policy.graph_hops, decay, n, &keep)?, "graph_assisted")
            }
        }
        (SearchMode::GraphAssisted, None) => {
            let anchors = ranked_notes(&g, search_policy, &analysed, n, &keep)?;
            let decay = search_policy.graph_decay as f32;
            (modes::graph_expand(&g, anchors, search_policy.graph_hops, decay, n, &keep)?, "graph_assisted")
        }
        _ => (ranked_notes(&g, search_policy, &analysed, n, &keep)?, "fts"),
    };
    let age = index_age_seconds(&g);
    let mut results = Vec::new();
    let mut chunks = Vec::new();
    let mut cursor = FolderCursor::new(root);
    for hit in hits {
        let entry = note_entry(&g, &hit.path)?.unwrap_or_default();
        let stale = on_disk_sha256(&mut cursor, root, &hit.path).as_deref() != Some(entry.content_sha256.as_str());
        let (snippet, matched_text) = snippets(&hit.body, &analysed);
        chunks.push(hit.body.clone());
        results.push(SearchResult {
            result_id: result_id(&hit.path, &entry.content_sha256),
            trust: "untrusted",
            source: ResultSource { path: hit.path.clone(), content_sha256: entry.content_sha256.clone(), stale },
            metadata: ResultMetadata {
                title: entry.title.clone(),
                description: entry.description.clone(),
                note_type: entry.note_type.clone(),
                tags: entry.tags.clone(),
                retrieval_contract: label,
                actual_mode: label,
                fallback_reason: fallback_reason.clone(),
                index_age_seconds: age,
                temporal_status: status_of(&hit.path),
            },
            score: f64::from(hit.score),
            match_count: hit.matches,
            snippet,
            matched_text,
        });
    }
    let envelope = Envelope {
        schema_version: ENVELOPE_SCHEMA,
        trust: "untrusted",
        data_only: true,
        handling_instruction: HANDLING_INSTRUCTION,
        query: text.to_string(),
        mode: request.search_mode,
        actual_mode: label,
        fallback_reason,
        index_age_seconds: age,
        temporal_view: view,
        as_of: as_of.to_string(),
        index_provenance: Provenance {
            kind: "immutable_generation",
            generation_id: g.id().to_string(),
            source_snapshot_hash: g.manifest.source_snapshot_hash.clone(),
        },
        result_count: results.len(),
        results,
        replica: None,
    };
    Ok((envelope, chunks))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// The window as it was first written: every char of the text collected, then sliced.
    fn window_by_collecting(text: &str, at: usize, width: usize) -> (String, bool, bool) {
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let centre = chars.iter().position(|(b, _)| *b >= at).unwrap_or(0);
        let start = centre.saturating_sub(width / 3);
        let end = (start + width).min(chars.len());
        let start = end.saturating_sub(width).min(start);
        let slice: String = chars[start..end].iter().map(|(_, c)| if c.is_whitespace() { ' ' } else { *c }).collect();
        let collapsed = slice.split(' ').filter(|p| !p.is_empty()).collect::<Vec<_>>().join(" ");
        (collapsed, start > 0, end < chars.len())
    }

    proptest! {
        /// The snippet window walks only its own chars, and cuts what collecting every char
        /// cut: any text (multi-byte chars, every kind of whitespace), any offset (inside a
        /// char, past the end), any width.
        #[test]
        fn the_window_is_the_one_cut_from_every_char(
            text in "[a-zé€😀 \t\n\u{a0}\u{2003}]{0,80}",
            at in 0usize..100,
            width in 0usize..40,
        ) {
            prop_assert_eq!(crate::search::read::window(&text, at, width), window_by_collecting(&text, at, width));
        }
    }
}
