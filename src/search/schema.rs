//! The search index schema, its English analyzer, and how a note becomes documents: one
//! `note` document (per-note data the generation answers from: hashes, metadata, temporal
//! fields) plus one `chunk` document per H2/H3 section (or one for a short note).

use rustc_hash::FxHashMap;

use serde::{Deserialize, Serialize};
use tantivy::schema::{FAST, Field, INDEXED, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, TokenStream};
use tantivy::{Index, TantivyDocument};

use crate::inventory::NoteRecord;
use crate::note::body;
use crate::note::frontmatter;

/// Name the analyzer is registered under.
pub(crate) const ANALYZER: &str = "pv_en";
/// Chunker identity recorded in every manifest.
pub(crate) const CHUNKER: &str = "paravault-sections/v1";
/// Version of this schema (documents and fields); bump forces a rebuild.
pub(crate) const INDEX_SCHEMA_VERSION: u32 = 6;
/// How many keywords `suggest_related` takes from a note.
pub(crate) const KEYWORDS_PER_NOTE: usize = 16;

pub(crate) const KIND_NOTE: &str = "note";
pub(crate) const KIND_CHUNK: &str = "chunk";

/// Bytes past which a token is dropped (before lower-casing): far above any word, so that the
/// analyzer drops only what tantivy could not index anyway (it refuses terms over 65,530 bytes)
/// and the exact length counted by `token_count` is the one tantivy records.
const TOKEN_BYTES_MAX: usize = 4096;

/// The reference's English analysis (bm25s with PyStemmer): runs of two or more word
/// characters (`words::WordTokenizer`), lower-cased, its 33 stop words removed, Snowball
/// English stems.
pub(crate) fn analyzer() -> TextAnalyzer {
    // Built once: the stop-word set is shared by the clones (a query built it anew each time).
    static ANALYZER: std::sync::LazyLock<TextAnalyzer> = std::sync::LazyLock::new(build_analyzer);
    ANALYZER.clone()
}

fn build_analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(super::words::WordTokenizer::default())
        .filter(RemoveLongFilter::limit(TOKEN_BYTES_MAX))
        .filter(LowerCaser)
        .filter(StopWordFilter::remove(super::words::STOP_WORDS.iter().map(|w| w.to_string())))
        .filter(super::stemming::CachedEnglishStemmer)
        .build()
}

/// How many tokens `analyzer` makes of `text`, as tantivy counts them for the field's length
/// (BM25's dl), without building them: every run of two or more word characters up to
/// `TOKEN_BYTES_MAX` bytes that is not a stop word once lower-cased. Every stop word is ASCII
/// and at most five letters, and no non-ASCII run lower-cases to one, so only short ASCII runs
/// are compared. Equal to the analyzer's count (`search::tests::the_length_count_is_the_analyzers`).
pub(crate) fn token_count(text: &str) -> u64 {
    let mut n = 0;
    let mut rest = text;
    while let Some(start) = rest.find(super::words::is_word_char) {
        let run = &rest[start..];
        let len = run.find(|c: char| !super::words::is_word_char(c)).unwrap_or(run.len());
        let word = &run[..len];
        rest = &run[len..];
        if word.len() >= TOKEN_BYTES_MAX || word.chars().nth(1).is_none() {
            continue;
        }
        if word.len() <= 5 && word.is_ascii() {
            let mut lower = [0u8; 5];
            lower[..word.len()].copy_from_slice(word.as_bytes());
            lower[..word.len()].make_ascii_lowercase();
            let lower = std::str::from_utf8(&lower[..word.len()]).unwrap_or("");
            if super::words::STOP_WORDS.contains(&lower) {
                continue;
            }
        }
        n += 1;
    }
    n
}

/// Like `analyzer` but keeping stop words: used to locate query terms in snippets.
pub(crate) fn locator() -> TextAnalyzer {
    static LOCATOR: std::sync::LazyLock<TextAnalyzer> = std::sync::LazyLock::new(|| {
        TextAnalyzer::builder(super::words::WordTokenizer::default()).filter(LowerCaser).filter(Stemmer::new(Language::English)).build()
    });
    LOCATOR.clone()
}

/// The fast field holding a chunk's exact body length in tokens (BM25's dl).
pub(crate) const BODY_LEN: &str = "body_len";

/// Runs `analyzer` over `text`: (position, token text, byte range).
pub(crate) fn tokens(analyzer: &mut TextAnalyzer, text: &str) -> Vec<(usize, String, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut stream = analyzer.token_stream(text);
    while stream.advance() {
        let t = stream.token();
        out.push((t.position, t.text.clone(), t.offset_from..t.offset_to));
    }
    out
}

/// Byte range of the first token of `text` (as `analyzer` produces it) that `wanted` accepts;
/// stops at that token instead of analysing the whole text.
pub(crate) fn first_token(analyzer: &mut TextAnalyzer, text: &str, wanted: impl Fn(&str) -> bool) -> Option<std::ops::Range<usize>> {
    let mut stream = analyzer.token_stream(text);
    while stream.advance() {
        let t = stream.token();
        if wanted(&t.text) {
            return Some(t.offset_from..t.offset_to);
        }
    }
    None
}

/// The schema's fields.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    pub doc_kind: Field,
    pub path: Field,
    pub link_key: Field,
    pub has_memory: Field,
    pub title: Field,
    pub description: Field,
    pub tags: Field,
    pub note_type: Field,
    pub status: Field,
    pub folder: Field,
    pub timestamp: Field,
    pub body: Field,
    pub section: Field,
    pub content_sha256: Field,
    pub content_blake3: Field,
    pub note_json: Field,
    /// Chunk documents: the dense arena row of the chunk's vector (absent without a dense index).
    pub vec_row: Field,
    /// Chunk documents: `dense::note_key(path)`, to aggregate chunk scores per note.
    pub note_key: Field,
    /// Note documents: the link key of every wikilink/Markdown link and `related` entry.
    pub links_to: Field,
    /// Chunk documents: the body's exact length in tokens (`BODY_LEN`).
    pub body_len: Field,
}

pub fn build_schema() -> Schema {
    let mut b = Schema::builder();
    let text_indexing = TextFieldIndexing::default().set_tokenizer(ANALYZER).set_index_option(IndexRecordOption::WithFreqsAndPositions);
    // Short context fields keep frequencies but no positions: phrases are matched in the title
    // and the body (which also carries the title and the section heading), see `query::build`.
    let context_indexing = TextFieldIndexing::default().set_tokenizer(ANALYZER).set_index_option(IndexRecordOption::WithFreqs);
    let text = TextOptions::default().set_indexing_options(text_indexing.clone());
    let context = TextOptions::default().set_indexing_options(context_indexing.clone());
    let context_stored = TextOptions::default().set_indexing_options(context_indexing).set_stored();
    let text_stored = TextOptions::default().set_indexing_options(text_indexing).set_stored();
    b.add_text_field("doc_kind", STRING);
    b.add_text_field("path", STRING | STORED);
    b.add_text_field("link_key", STRING);
    b.add_text_field("has_memory", STRING);
    b.add_text_field("title", text);
    b.add_text_field("description", context.clone());
    b.add_text_field("tags", context);
    b.add_text_field("note_type", STRING | STORED);
    b.add_text_field("status", STRING);
    b.add_text_field("folder", STRING);
    b.add_i64_field("timestamp", INDEXED | STORED);
    b.add_text_field("body", text_stored);
    b.add_text_field("section", context_stored);
    // Read back as stored values only (never searched): indexing 64-hex-digit unique terms
    // cost ~10 % of a full sync in term-dictionary building.
    b.add_text_field("content_sha256", STORED);
    b.add_text_field("content_blake3", STORED);
    b.add_text_field("note_json", STORED);
    b.add_u64_field("vec_row", FAST);
    b.add_u64_field("note_key", FAST);
    b.add_text_field("links_to", STRING | STORED);
    b.add_u64_field(BODY_LEN, FAST);
    b.build()
}

impl Fields {
    pub fn of(schema: &Schema) -> Result<Fields, tantivy::TantivyError> {
        let f = |name: &str| schema.get_field(name);
        Ok(Fields {
            doc_kind: f("doc_kind")?,
            path: f("path")?,
            link_key: f("link_key")?,
            has_memory: f("has_memory")?,
            title: f("title")?,
            description: f("description")?,
            tags: f("tags")?,
            note_type: f("note_type")?,
            status: f("status")?,
            folder: f("folder")?,
            timestamp: f("timestamp")?,
            body: f("body")?,
            section: f("section")?,
            content_sha256: f("content_sha256")?,
            content_blake3: f("content_blake3")?,
            note_json: f("note_json")?,
            vec_row: f("vec_row")?,
            note_key: f("note_key")?,
            links_to: f("links_to")?,
            body_len: f(BODY_LEN)?,
        })
    }
}

/// Registers the analyzer on an index (writer and every reader).
pub fn register(index: &Index) {
    index.tokenizers().register(ANALYZER, analyzer());
}

/// The memory fields that decide temporal status.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct TemporalFields {
    pub valid_from: Option<String>,
    pub valid_until: Option<String>,
    pub supersedes: Vec<String>,
}

/// Per-note data stored in the generation (no re-reading the vault to answer).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct NoteEntry {
    pub path: String,
    pub title: String,
    pub description: String,
    pub note_type: Option<String>,
    pub tags: Vec<String>,
    pub status: Option<String>,
    pub timestamp: Option<String>,
    pub memory: Option<TemporalFields>,
    pub content_blake3: String,
    pub content_sha256: String,
}

pub(crate) use crate::hex::{encode as hex, sha256_hex};

/// One chunk of a note's body.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Chunk {
    pub section: String,
    pub text: String,
}

/// Splits a body: short notes are one chunk; long ones split at H2/H3 with a preamble chunk.
pub(crate) fn chunk_body(body_text: &str, chunk_min_words: usize) -> Vec<Chunk> {
    if body_text.split_whitespace().take(chunk_min_words).count() < chunk_min_words {
        return vec![Chunk { section: String::new(), text: body_text.trim().to_string() }];
    }
    let cuts: Vec<(usize, String)> = body::headings(body_text)
        .into_iter()
        .filter(|(level, _, _)| *level == 2 || *level == 3)
        .map(|(_, text, offset)| (offset, text))
        .collect();
    let mut out = Vec::new();
    let first = cuts.first().map_or(body_text.len(), |(offset, _)| *offset);
    let preamble = body_text.get(..first).unwrap_or("").trim();
    if !preamble.is_empty() {
        out.push(Chunk { section: if cuts.is_empty() { String::new() } else { "(preamble)".into() }, text: preamble.to_string() });
    }
    for (i, (offset, heading)) in cuts.iter().enumerate() {
        let end = cuts.get(i + 1).map_or(body_text.len(), |(next, _)| *next);
        let text = body_text.get(*offset..end).unwrap_or("").trim();
        out.push(Chunk { section: heading.trim().to_string(), text: text.to_string() });
    }
    if out.is_empty() {
        out.push(Chunk { section: String::new(), text: String::new() });
    }
    out
}

/// The most frequent content terms of a text (stemmed), for `suggest_related`.
pub(crate) fn keywords(text: &str) -> Vec<String> {
    // Count each distinct word-character run (exactly the index tokenizer's tokens) by borrowing
    // it, then run only the distinct words through the index analyzer: the same stems as
    // analysing every token, without a String, a lower-casing and a stemming per occurrence.
    let mut words: FxHashMap<&str, usize> = FxHashMap::default();
    for word in text.split(|c: char| !super::words::is_word_char(c)).filter(|w| !w.is_empty()) {
        *words.entry(word).or_default() += 1;
    }
    let mut analyzer = analyzer();
    let mut counts: FxHashMap<String, usize> = FxHashMap::default();
    for (word, n) in words {
        let mut stream = analyzer.token_stream(word);
        while stream.advance() {
            let token = &stream.token().text;
            if token.chars().count() >= 3 && !token.chars().all(|c| c.is_ascii_digit()) {
                *counts.entry(token.clone()).or_default() += n;
            }
        }
    }
    let mut ranked: Vec<(String, usize)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked.into_iter().take(KEYWORDS_PER_NOTE).map(|(t, _)| t).collect()
}

/// A note's documents, with the text each chunk document is embedded from.
#[derive(Debug, Default, Clone)]
pub struct NoteDocuments {
    pub path: String,
    pub docs: Vec<TantivyDocument>,
    /// (index into `docs`, embedding text) for every chunk document.
    pub embed_texts: Vec<(usize, String)>,
}

/// Builds the documents for one valid note from its file bytes.
pub fn note_documents(fields: &Fields, record: &NoteRecord, bytes: &[u8], chunk_min_words: usize) -> NoteDocuments {
    let text = String::from_utf8_lossy(bytes);
    let body_text = match frontmatter::split(&text) {
        Ok(split) => split.body.to_string(),
        Err(_) => text.to_string(),
    };
    let meta = &record.meta;
    let path = record.path.as_str();
    let title = meta.title.clone().unwrap_or_else(|| record.path.file_name().trim_end_matches(".md").to_string());
    let description = meta.description.clone().unwrap_or_default();
    let sha256 = sha256_hex(bytes);
    let blake = hex(&record.content_hash);
    let entry = NoteEntry {
        path: path.to_string(),
        title: title.clone(),
        description: description.clone(),
        note_type: meta.note_type.clone(),
        tags: meta.tags.clone(),
        status: meta.status.clone(),
        timestamp: meta.timestamp.map(|t| t.to_rfc3339()),
        memory: meta.memory.as_ref().map(|m| TemporalFields {
            valid_from: m.valid_from.map(|d| d.to_string()),
            valid_until: m.valid_until.map(|d| d.to_string()),
            supersedes: m.supersedes.clone(),
        }),
        content_blake3: blake.clone(),
        content_sha256: sha256.clone(),
    };
    let mut docs = Vec::new();
    let mut note = TantivyDocument::default();
    note.add_text(fields.doc_kind, KIND_NOTE);
    note.add_text(fields.path, path);
    note.add_text(fields.link_key, crate::inventory::link_key(path));
    if entry.memory.is_some() {
        note.add_text(fields.has_memory, "1");
    }
    if let Some(t) = &meta.note_type {
        note.add_text(fields.note_type, t);
    }
    note.add_text(fields.content_sha256, &sha256);
    note.add_text(fields.content_blake3, &blake);
    // Every document has a length (the note document's body is empty): the column is then
    // dense, and BM25 reads a chunk's length without an optional-index lookup.
    note.add_u64(fields.body_len, 0);
    note.add_text(fields.note_json, serde_json::to_string(&entry).unwrap_or_default());
    let mut link_keys: Vec<String> = record
        .links
        .iter()
        .map(|l| crate::inventory::link_key(l.target.split('#').next().unwrap_or(&l.target).trim()))
        .chain(meta.related.iter().map(|r| crate::inventory::link_key(r.trim().trim_start_matches("[[").trim_end_matches("]]"))))
        .filter(|k| !k.is_empty())
        .collect();
    link_keys.sort();
    link_keys.dedup();
    for key in &link_keys {
        note.add_text(fields.links_to, key);
    }
    docs.push(note);
    let mut embed_texts = Vec::new();
    let key = crate::search::dense::note_key(path);
    let tags = meta.tags.join(" ");
    for chunk in chunk_body(&body_text, chunk_min_words) {
        let mut doc = TantivyDocument::default();
        doc.add_text(fields.doc_kind, KIND_CHUNK);
        doc.add_text(fields.path, path);
        doc.add_text(fields.title, &title);
        doc.add_text(fields.description, &description);
        doc.add_text(fields.tags, &tags);
        if let Some(t) = &meta.note_type {
            doc.add_text(fields.note_type, t);
        }
        if let Some(s) = &meta.status {
            doc.add_text(fields.status, s);
        }
        doc.add_text(fields.folder, record.path.top_folder());
        if let Some(ts) = meta.timestamp {
            doc.add_i64(fields.timestamp, ts.timestamp());
        }
        doc.add_text(fields.section, &chunk.section);
        // First value: the chunk text (stored, for snippets). Second value: the note's context
        // (title, description, tags, section), so the body is the one BM25 field holding every
        // word the note is about (the policy's default boosts score the body alone).
        let context = format!("{title}\n{description}\n{tags}\n{}", chunk.section);
        doc.add_u64(fields.body_len, token_count(&chunk.text) + token_count(&context));
        doc.add_text(fields.body, &chunk.text);
        doc.add_text(fields.body, context);
        doc.add_text(fields.content_sha256, &sha256);
        doc.add_u64(fields.note_key, key);
        embed_texts.push((docs.len(), super::read::dense::embed_text(&title, &description, &chunk.section, &chunk.text)));
        docs.push(doc);
    }
    NoteDocuments { path: path.to_string(), docs, embed_texts }
}
