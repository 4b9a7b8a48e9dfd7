//! The fuzz targets' assertions, shared with `tests/it/fuzz_corpus.rs` (which includes this file
//! with `#[path]`), so the committed seed corpora are replayed by `cargo test` on stable.
//!
//! Each check takes the raw fuzzer bytes and panics when an invariant breaks.

use paravault::note::frontmatter::{self, Frontmatter};
use paravault::note::path::VaultPath;

/// Bytes as text: valid UTF-8 as is, anything else lossily (so binary input still exercises
/// the parsers instead of being skipped).
fn text_of(data: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(data)
}

/// `split` and `parse` never panic; whatever parses renders back byte-identically; and a
/// brand-new note rendered from the parsed mapping parses back to the same mapping.
pub fn check_frontmatter(data: &[u8]) {
    let text = text_of(data);
    let Ok(split) = frontmatter::split(&text) else { return };
    // The split is a partition of the input.
    let bom = if split.bom { "\u{feff}" } else { "" };
    assert_eq!(format!("{bom}{}{}{}{}", split.open, split.yaml, split.close, split.body), *text, "split lost bytes");
    let Ok(parsed) = frontmatter::parse(&split) else { return };
    let rendered = frontmatter::render(&split, &parsed).expect("an unchanged parse always renders");
    assert_eq!(rendered, *text, "an unchanged parse did not render byte-identically");

    // serde_yaml cannot emit some mappings (a mapping key `{a: 1}: 2`), and writes some tags it
    // cannot read back (`!%5bt` as `![t`): `from_mapping` must then refuse with a typed problem,
    // never render an empty block or unreadable YAML; it refuses nothing that round-trips.
    let fresh = match Frontmatter::from_mapping(parsed.mapping.clone()) {
        Ok(fresh) => fresh,
        Err(problem) => {
            // A frontmatter block ends in `\n` before its closing `---`: what round-trips is
            // the emitter's text so ended (under keep chomping after a U+2028 / U+2029, that
            // `\n` is one more line break of the value, and the mapping cannot be written).
            let ended = |mut text: String| {
                if !text.ends_with('\n') {
                    text.push('\n');
                }
                text
            };
            let round_trips = serde_yaml::to_string(&parsed.mapping)
                .ok()
                .map(ended)
                .and_then(|text| serde_yaml::from_str::<serde_yaml::Value>(&text).ok())
                .is_some_and(|back| back == serde_yaml::Value::Mapping(parsed.mapping.clone()));
            assert!(!round_trips, "from_mapping refused a mapping that round-trips: {problem}");
            return;
        }
    };
    let note = frontmatter::render_new(&fresh, split.body).expect("a mapping from_mapping accepted renders");
    let resplit = frontmatter::split(&note).unwrap_or_else(|p| panic!("render_new output does not split ({p}): {note:?}"));
    let reparsed = frontmatter::parse(&resplit).unwrap_or_else(|p| panic!("render_new output does not parse ({p}): {note:?}"));
    assert_eq!(reparsed.mapping, parsed.mapping, "render_new(from_mapping(m)) did not parse back to m: {note:?}");
    assert_eq!(resplit.body, split.body, "render_new changed the body");
}

/// `VaultPath::parse` never panics; an accepted path is relative, has no '.', '..' or empty
/// component, no backslash or control character, and (without '%') parses to itself.
pub fn check_note_path(data: &[u8]) {
    let text = text_of(data);
    let Ok(path) = VaultPath::parse(&text) else { return };
    let s = path.as_str();
    assert!(!s.is_empty(), "accepted an empty path from {text:?}");
    assert!(!s.starts_with('/'), "accepted an absolute path {s:?} from {text:?}");
    assert!(!s.split('/').any(|c| c.is_empty() || c == "." || c == ".."), "accepted {s:?} from {text:?}");
    assert!(!s.contains('\\'), "accepted a backslash in {s:?} from {text:?}");
    assert!(!s.chars().any(char::is_control), "accepted a control character in {s:?} from {text:?}");
    let b = s.as_bytes();
    assert!(!(b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':'), "accepted a drive letter in {s:?}");
    assert!(s.len() <= 1024, "accepted a path of {} bytes", s.len());
    // Lexically, joining onto a root never leaves it.
    let root = std::path::Path::new("/vault-root");
    let joined = path.under(root);
    assert!(joined.starts_with(root) && joined != root, "{s:?} joins to {joined:?}");
    assert!(joined.components().skip(2).all(|c| matches!(c, std::path::Component::Normal(_))), "{s:?} joins to {joined:?}");
    if !s.contains('%') {
        let again = VaultPath::parse(s).unwrap_or_else(|e| panic!("{s:?} was accepted but does not re-parse: {e}"));
        assert_eq!(again, path, "parse is not idempotent on {s:?}");
    }
}

/// Splits fuzzer bytes into pieces at 0xFF (a byte that never occurs in UTF-8 text).
fn pieces(data: &[u8]) -> Vec<&[u8]> {
    data.split(|&b| b == 0xFF).collect()
}

/// User query text: `clauses`/`analyse`/`build` never panic, every word clause is a run of
/// letters or digits, every phrase is trimmed and non-empty, `build` is `None` exactly when
/// nothing searchable remains, and the query runs against a real (in-memory) index of the
/// engine's schema without an error.
pub fn check_query(data: &[u8]) {
    use paravault::search::query::{self, Clause};
    let text = text_of(data);
    for clause in query::clauses(&text) {
        match clause {
            Clause::Word(w) => {
                assert!(!w.is_empty() && w.chars().all(|c| c.is_alphanumeric() || c == '_'), "word clause {w:?} from {text:?}")
            }
            Clause::Phrase(p) => assert!(!p.is_empty() && p.trim() == p, "phrase clause {p:?} from {text:?}"),
        }
    }
    let analysed = query::analyse(&text);
    for phrase in &analysed.phrases {
        assert!(phrase.len() >= 2, "a phrase of fewer than two tokens: {phrase:?}");
        assert!(phrase.windows(2).all(|w| w[0].0 < w[1].0), "phrase positions not increasing: {phrase:?}");
    }
    let (index, searcher) = query_index();
    let fields = paravault::search::schema::Fields::of(&index.schema()).expect("the engine's schema has its fields");
    let boosts = paravault::policy::Boosts { title: 2.0, tags: 1.0, description: 1.0, section: 0.5, body: 1.0 };
    let search = paravault::policy::SearchPolicy { boosts, bm25_k1: 0.9, bm25_b: 0.4, bm25_lengths: "exact".into(), ..Default::default() };
    let built = query::build(&fields, &search, &analysed);
    assert_eq!(built.is_none(), analysed.is_empty(), "build and is_empty disagree on {text:?}");
    if let Some(q) = built {
        searcher.search(&q, &tantivy::collector::TopDocs::with_limit(5).order_by_score()).expect("a built query always runs");
    }
}

/// A small index of the engine's schema and a searcher of it, built once per process (a reader
/// per input cost most of each execution).
fn query_index() -> &'static (tantivy::Index, tantivy::Searcher) {
    static INDEX: std::sync::OnceLock<(tantivy::Index, tantivy::Searcher)> = std::sync::OnceLock::new();
    INDEX.get_or_init(|| {
        use paravault::search::schema;
        let index = tantivy::Index::create_in_ram(schema::build_schema());
        schema::register(&index);
        let fields = schema::Fields::of(&index.schema()).expect("fields");
        let mut writer: tantivy::IndexWriter = index.writer_with_num_threads(1, 15_000_000).expect("writer");
        for (title, body) in [
            ("Rust ownership", "Borrowing and lifetimes keep memory safe without a garbage collector."),
            ("Search engines", "An inverted index maps each term to the documents that contain it; BM25 ranks them."),
            ("Notes", "Quoted \"phrases\" and words: the quick brown fox jumps over the lazy dog."),
        ] {
            let mut doc = tantivy::TantivyDocument::default();
            doc.add_text(fields.title, title);
            doc.add_text(fields.body, body);
            writer.add_document(doc).expect("add");
        }
        writer.commit().expect("commit");
        let searcher = index.reader().expect("reader").searcher();
        (index, searcher)
    })
}

/// A proposal map handed back to `apply_memory_change`: `check_proposal` never panics, and
/// what it accepts is internally consistent. A structured half builds a correct proposal from
/// the input (accepted exactly when its path is a vault path) and one with a changed byte of
/// content (always refused).
pub fn check_proposal(data: &[u8]) {
    use paravault::hex::sha256_hex;
    use paravault::write::operations::{Proposal, check_proposal, proposal_id};
    use serde_json::Value;
    let _ = serde_json::from_slice::<Proposal>(data);
    if let Ok(map) = serde_json::from_slice::<std::collections::BTreeMap<String, Value>>(data)
        && let Ok(checked) = check_proposal(&map)
    {
        assert_eq!(sha256_hex(checked.content.as_bytes()), checked.after_sha256);
        assert_eq!(proposal_id(&checked.path, &checked.before_sha256, &checked.after_sha256, &checked.content), checked.proposal_id);
        assert!(VaultPath::parse(&checked.path).is_ok());
    }
    let parts = pieces(data);
    let [path, content, before, ..] = parts.as_slice() else { return };
    let (path, content) = (text_of(path).into_owned(), text_of(content).into_owned());
    let before = sha256_hex(before);
    let after = sha256_hex(content.as_bytes());
    let id = proposal_id(&path, &before, &after, &content);
    let map = |content: &str| -> std::collections::BTreeMap<String, Value> {
        [("path", &path), ("content", &content.to_string()), ("before_sha256", &before), ("after_sha256", &after), ("proposal_id", &id)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.clone())))
            .collect()
    };
    match check_proposal(&map(&content)) {
        Ok(checked) => {
            assert!(VaultPath::parse(&path).is_ok(), "accepted a proposal for a path that does not parse: {path:?}");
            assert_eq!((checked.path.as_str(), checked.content.as_str()), (path.as_str(), content.as_str()));
        }
        Err(e) => assert!(VaultPath::parse(&path).is_err(), "refused a well-formed proposal for {path:?}: {e}"),
    }
    let tampered = format!("{content}x");
    assert!(check_proposal(&map(&tampered)).is_err(), "accepted content that does not match after_sha256");
}

/// A directory catalog rendered from notes the fuzzer writes: never panics; each page fits
/// its budget, is owned by the engine (`is_owned`), has frontmatter that parses, and the
/// landing page declares the page count; every note is exactly one `### ` row (no title,
/// description or tag can inject a row or a heading) and its link target stays inside `<…>`.
/// `is_owned` and `declared_pages` never panic on the raw bytes either.
pub fn check_catalog(data: &[u8]) {
    use paravault::catalog::{self, render};
    use paravault::inventory::{NoteRecord, analyse_bytes};
    use paravault::scan::PageKind;
    let _ = catalog::is_owned(data);
    let _ = catalog::declared_pages(data);
    let Some((&knobs, rest)) = data.split_first() else { return };
    let policy = catalog_policy();
    let dir = "03_Resources/fuzz";
    let mut records = Vec::new();
    for piece in pieces(rest).into_iter().take(64) {
        let (name, bytes) = match piece.iter().position(|&b| b == b'\n') {
            Some(at) => (&piece[..at], &piece[at + 1..]),
            None => (piece, &b""[..]),
        };
        let Ok(path) = VaultPath::parse(&format!("{dir}/{}.md", text_of(name))) else { continue };
        if path.parent() != dir || records.iter().any(|r: &NoteRecord| r.path == path) {
            continue;
        }
        let mut record = NoteRecord::empty(path, PageKind::Note);
        analyse_bytes(&mut record, bytes, policy);
        records.push(record);
    }
    let page_bytes_max = 1024 + usize::from(knobs & 0x0F) * 1024;
    let description_chars = 8 + usize::from(knobs >> 4) * 16;
    let entries = render::DirEntries::new(dir, [], records.iter(), description_chars, &render::RowMemo::default());
    let Ok(pages) = render::render_dir(&render::DirInput { dir, entries: &entries }, page_bytes_max) else { return };
    assert!(!pages.is_empty());
    assert_eq!(catalog::declared_pages(pages[0].as_bytes()), Ok(pages.len()), "landing page count");
    let mut rows = 0;
    let mut targets = Vec::new();
    for page in &pages {
        assert!(page.len() <= page_bytes_max, "a page of {} bytes over {page_bytes_max}", page.len());
        assert!(catalog::is_owned(page.as_bytes()), "a rendered page is not owned: {page:?}");
        let split = frontmatter::split(page).unwrap_or_else(|p| panic!("a rendered page does not split ({p}): {page:?}"));
        frontmatter::parse(&split).unwrap_or_else(|p| panic!("a rendered page's frontmatter does not parse ({p}): {page:?}"));
        for line in page.lines() {
            if line.starts_with("### ") {
                rows += 1;
            }
            if line.starts_with("- Path: ") {
                // The row's link, read by the engine's own Markdown parser, is one link to a
                // note of this folder.
                let links = paravault::note::body::links(line, 1);
                assert_eq!(links.len(), 1, "a path row that is not exactly one link: {line:?} -> {links:?}");
                let target = links[0].target.strip_prefix("./").unwrap_or_else(|| panic!("a row link outside ./: {line:?}"));
                targets.push(target.to_string());
            }
        }
        assert!(!page.lines().any(|l| l.starts_with("## ") && l != "## Notes" && l != "## Folders"), "an injected heading: {page:?}");
    }
    assert_eq!(rows, records.len(), "note rows in the catalog");
    let mut names: Vec<String> = records.iter().map(|r| r.path.file_name().to_string()).collect();
    names.sort();
    targets.sort();
    assert_eq!(targets, names, "row links name exactly the folder's notes");
}

fn catalog_policy() -> &'static paravault::policy::LoadedPolicy {
    static POLICY: std::sync::OnceLock<paravault::policy::LoadedPolicy> = std::sync::OnceLock::new();
    POLICY.get_or_init(|| paravault::policy::LoadedPolicy::from_texts(None).expect("the embedded policy loads"))
}

/// The MCP server's stdio framing fed raw bytes: every non-blank line is either forwarded to
/// rmcp byte for byte or answered here with exactly one JSON-RPC error (-32700 for a line
/// that is not JSON, -32600 for JSON that is not an object, -32602 for `tools/call` arguments
/// that are not an object, with the request's id), in order.
pub fn check_mcp_framing(data: &[u8]) {
    use serde_json::Value;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let input = data.to_vec();
    let (forwarded, answered) = framing_runtime().block_on(async move {
        let (stdout, mut stdout_reader) = tokio::io::duplex(1 << 22);
        let ((mut to_rmcp, mut from_rmcp), framing) = paravault::mcp::framing::framed(std::io::Cursor::new(input), stdout, || {});
        // Played as rmcp does: read requests to the end of input, then close its output
        // (which ends the framing once every answer queued before it is written).
        let mut forwarded = Vec::new();
        to_rmcp.read_to_end(&mut forwarded).await.expect("read what reached rmcp");
        from_rmcp.shutdown().await.expect("close rmcp's writer");
        framing.drain(std::time::Duration::from_secs(10)).await;
        let mut answered = Vec::new();
        stdout_reader.read_to_end(&mut answered).await.expect("read stdout");
        (forwarded, answered)
    });
    let mut expected_forward = Vec::new();
    let mut expected_answers: Vec<(Value, i64)> = Vec::new();
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let whole = if data.ends_with(b"\n") { &lines[..lines.len() - 1] } else { &lines[..] };
    for line in whole {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Value>(line) {
            Err(_) => expected_answers.push((Value::Null, -32700)),
            Ok(Value::Object(m)) => {
                let bad_arguments = m.get("method").and_then(Value::as_str) == Some("tools/call")
                    && m.get("params").and_then(|p| p.get("arguments")).is_some_and(|a| !(a.is_object() || a.is_null()));
                if bad_arguments {
                    expected_answers.push((m.get("id").cloned().unwrap_or(Value::Null), -32602));
                } else {
                    expected_forward.extend_from_slice(line);
                    expected_forward.push(b'\n');
                }
            }
            Ok(_) => expected_answers.push((Value::Null, -32600)),
        }
    }
    assert_eq!(forwarded, expected_forward, "lines forwarded to rmcp");
    let answers: Vec<(Value, i64)> = answered
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let v: Value = serde_json::from_slice(l).unwrap_or_else(|e| panic!("an answer that is not JSON ({e}): {l:?}"));
            assert_eq!(v["jsonrpc"], "2.0");
            (v["id"].clone(), v["error"]["code"].as_i64().expect("an error code"))
        })
        .collect();
    // serde_json parses a float with up to one unit in the last place of error, so a
    // fractional or huge numeric id (which JSON-RPC says SHOULD NOT be used) can come back one
    // ulp away after the framing's parse and print; every other id comes back exactly.
    assert_eq!(answers.len(), expected_answers.len(), "answers written by the framing: {answers:?} vs {expected_answers:?}");
    for ((id, code), (want_id, want_code)) in answers.iter().zip(&expected_answers) {
        assert!(code == want_code && same_id(id, want_id), "answers written by the framing: {answers:?} vs {expected_answers:?}");
    }
}

/// Whether two echoed ids are the same: exactly, except that serde_json parses a float with up
/// to one unit in the last place of error, so a fractional or huge numeric id (which JSON-RPC
/// says SHOULD NOT be used) can come back a few ulps away after the framing's parse and print.
fn same_id(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap_or(f64::NAN), y.as_f64().unwrap_or(f64::NAN));
            x == y || (x - y).abs() <= x.abs().max(y.abs()) * 4.0 * f64::EPSILON
        }
        (Value::Object(x), Value::Object(y)) => x.len() == y.len() && x.iter().zip(y).all(|((k, v), (l, w))| k == l && same_id(v, w)),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same_id(v, w)),
        _ => a == b,
    }
}

fn framing_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a tokio runtime"))
}
