//! Documents (ctxvault's semantic vaults): text an agent saves for later retrieval, one note
//! each under `<documents_folder>/`, the text kept verbatim as the body; `query` is the vault's
//! search scoped to that folder, answering chunks with their source files in the untrusted
//! envelope.
//!
//! Note names keep the caller's file name: `a/b.md` → `<folder>/a/b.md`, `a/b.txt` →
//! `<folder>/a/b.txt.md` (so `b.md` and `b.txt` stay two documents). A `.docx` arrives as the
//! base64 of its bytes and is stored converted to Markdown (`docx`), the conversion reported and
//! the source's SHA-256 kept in the `document:` block; what cannot be converted is refused with
//! `unsupported_document` before anything is written.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::docx::ConversionReport;
use super::{Committed, MemoryVault, ProposedChange, ReceiptSummary, Untrusted, fresh_id};
use crate::error::{Error, Result};
use crate::note::path::VaultPath;
use crate::write::sha256_hex;

/// The `document:` block of a document note.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DocumentRecord {
    pub file_path: String,
    pub format: String,
    pub generated_by: String,
    /// For a converted `.docx`: `sha256:<hex>` of the file the caller sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_sha256: Option<String>,
}

/// `write_doc`'s answer: the document as stored, and its receipt (or, for a caller with
/// `propose` authority, the proposal that holds it).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocumentWritten {
    /// The document's name as the caller gave it (trimmed).
    pub file_path: String,
    /// Its format: `md`, `txt` or `docx`.
    pub format: String,
    /// Who produced the content.
    pub generated_by: String,
    /// The document note's vault path.
    pub path: String,
    /// Whether an existing document was replaced (`overwrite`).
    pub overwritten: bool,
    /// Whether the content was converted (a .docx is stored as Markdown).
    pub converted: bool,
    /// What the conversion kept and dropped (null when nothing was converted).
    pub conversion: Option<ConversionReport>,
    /// The write's receipt (absent when the change is proposed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<ReceiptSummary>,
    /// The proposal holding the change (only for a caller with `propose` authority).
    #[serde(flatten)]
    pub proposed: Option<ProposedChange>,
}

/// `list_docs`'s answer: every document note, by file path.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocumentList {
    /// The documents, ordered by file path.
    pub documents: Vec<DocumentEntry>,
    /// How many documents are listed.
    pub count: usize,
    /// The untrusted-data marks (names and provenance are note text).
    #[serde(flatten)]
    pub untrusted: Untrusted,
}

/// One document of `list_docs`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocumentEntry {
    /// The document's name as written (for a note without a `document:` block, its path
    /// inside the documents folder).
    pub file_path: String,
    /// The same name under ctxvault 0.8.1's field name.
    pub source: String,
    /// Its format: `md`, `txt` or `docx`.
    pub format: String,
    /// The format as ctxvault 0.8.1 names it: `.md`, `.txt` or `.docx`.
    pub filetype: String,
    /// Who produced it (null for a note without a `document:` block).
    pub generated_by: Option<String>,
    /// The document note's vault path.
    pub path: String,
    /// The note's size in bytes.
    pub size_bytes: u64,
}

/// `query`'s answer: the chunks of the vault's documents that match, best first, in the
/// untrusted envelope.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocumentHits {
    /// The query as searched.
    pub query: String,
    /// The matching chunks, best first.
    pub results: Vec<DocumentHit>,
    /// How many chunks are returned.
    pub result_count: usize,
    /// The search mode that answered (`hybrid`, `fts`, …).
    pub actual_mode: String,
    /// Why the search fell back to another mode than asked (null when it did not).
    pub fallback_reason: Option<String>,
    /// The untrusted-data marks (the chunks are note text).
    #[serde(flatten)]
    pub untrusted: Untrusted,
}

/// One matching chunk of `query`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DocumentHit {
    /// The matching chunk's whole text (a section of the document), cut at a word boundary only
    /// past the policy's `limits.read_note_bytes_max` (`text_truncated` then says so).
    pub text: String,
    /// Whether `text` was cut at the policy's bound.
    pub text_truncated: bool,
    /// A short excerpt around the match.
    pub snippet: String,
    /// The source document as `list_docs` names it (its `file_path`): what `write_doc` takes to
    /// update it.
    pub source: String,
    /// The source document's title.
    pub title: String,
    /// The document note's vault path.
    pub path: String,
    /// ctxvault's direction: a distance, lower is closer (`1 / (1 + relevance)`, in (0, 1]).
    pub score: f64,
    /// The engine's own score, higher is better (BM25, or the fused rank score of a hybrid
    /// search); results are ordered by it.
    pub relevance: f64,
    /// Always `untrusted`.
    pub trust: String,
}

/// The name `list_docs` gives the document note at `path`: its `document:` block's file path,
/// else its path inside the documents folder.
fn document_name(folder: &str, path: &str, record: Option<&DocumentRecord>) -> String {
    record.map_or_else(|| path.strip_prefix(&format!("{folder}/")).unwrap_or(path).to_string(), |r| r.file_path.clone())
}

/// `text` whole when it has at most `bound` bytes, else cut at the last whitespace (or character
/// boundary) within them; and whether it was cut.
fn bounded_text(text: &str, bound: usize) -> (String, bool) {
    if text.len() <= bound {
        return (text.to_string(), false);
    }
    let mut end = bound;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let cut = text[..end].rfind(char::is_whitespace).filter(|&at| at > 0).unwrap_or(end);
    (text[..cut].trim_end().to_string(), true)
}

/// The formats `write_doc` accepts.
pub(crate) const FORMATS: [&str; 3] = ["md", "txt", "docx"];

/// The note path of a document `file_path` and its format: refused, like every writer's path,
/// in a hidden folder, a folder the policy excludes or under a name the engine owns.
fn note_path(folder: &str, file_path: &str, excluded_dirs: &[String]) -> Result<(VaultPath, String)> {
    let invalid = |reason: &str| Error::InvalidArgument { name: "file_path", reason: reason.to_string() };
    let trimmed = file_path.trim();
    let (stem, ext) = trimmed.rsplit_once('.').ok_or_else(|| invalid("needs an extension: .md, .txt or .docx"))?;
    let ext = ext.to_ascii_lowercase();
    if !FORMATS.contains(&ext.as_str()) {
        return Err(Error::UnsupportedDocument {
            file: trimmed.chars().take(200).collect(),
            reason: format!("'.{ext}' is not one of .txt, .md, .docx"),
        });
    }
    if stem.is_empty() {
        return Err(invalid("needs a file name before the extension"));
    }
    let rel = match ext.as_str() {
        "md" => format!("{stem}.md"),
        other => format!("{stem}.{other}.md"),
    };
    let path = VaultPath::parse(&format!("{}/{rel}", folder.trim_end_matches('/')))?;
    crate::note::path::refuse_reserved(&path, excluded_dirs)?;
    Ok((path, ext))
}

fn render(note_type: &str, record: &DocumentRecord, content: &str, now: chrono::DateTime<chrono::Utc>) -> Result<String> {
    let body = if content.starts_with('\n') { content.to_string() } else { format!("\n{content}") };
    let body = if body.ends_with('\n') { body } else { format!("{body}\n") };
    let block = super::frontmatter_block("document", record, "document")?;
    let quote = crate::note::yaml_edit::quoted;
    let first_line: String = content.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("").chars().take(150).collect();
    let title: String = record.file_path.rsplit('/').next().unwrap_or(&record.file_path).chars().take(200).collect();
    Ok(format!(
        "---\ntype: {}\ntitle: {}\ndescription: {}\ntags: [\"document\"]\nokf_version: \"0.2\"\nmemory:\n  kind: semantic\n  sources: [{}]\n  evidence: [{}]\n  write_policy: agent-proposed\n{block}timestamp: {}\n---\n{body}",
        quote(note_type),
        quote(&title),
        quote(if first_line.is_empty() { &title } else { &first_line }),
        quote(&format!("paravault://mcp/ctxvault/write_doc?generated_by={}", record.generated_by)),
        quote(&format!("sha256:{}", sha256_hex(body.as_bytes()))),
        now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    ))
}

fn parse_record(text: &str) -> Option<DocumentRecord> {
    let split = crate::note::frontmatter::split(text).ok()?;
    #[derive(Deserialize)]
    struct Front {
        document: DocumentRecord,
    }
    serde_yaml::from_str::<Front>(split.yaml).ok().map(|f| f.document)
}

impl MemoryVault {
    fn documents_folder(&self) -> String {
        self.vault.policy().policy.agent_memory.documents_folder.trim_end_matches('/').to_string()
    }

    /// `write_doc`: stores `content` as a document note; an existing one is replaced only with
    /// `overwrite`.
    pub fn write_doc(&self, file_path: &str, content: &str, generated_by: &str, overwrite: bool) -> Result<DocumentWritten> {
        let (path, format) = note_path(&self.documents_folder(), file_path, &self.vault.policy().policy.layout.excluded_dirs)?;
        if content.trim().is_empty() {
            return Err(Error::InvalidArgument { name: "content", reason: "must not be empty".into() });
        }
        let refused = |reason: String| Error::UnsupportedDocument { file: file_path.trim().chars().take(200).collect(), reason };
        let (body, conversion, source_sha256) = if format == "docx" {
            let bytes = super::docx::decode_content(content).map_err(refused)?;
            let converted = super::docx::to_markdown(&bytes).map_err(refused)?;
            (converted.markdown, Some(converted.report), Some(format!("sha256:{}", sha256_hex(&bytes))))
        } else {
            (content.to_string(), None, None)
        };
        let generated_by = generated_by.trim();
        if generated_by.is_empty() || generated_by.chars().count() > 200 || generated_by.chars().any(char::is_control) {
            return Err(Error::InvalidArgument { name: "generated_by", reason: "1-200 characters, without control characters".into() });
        }
        let existing = crate::store::beneath::read(self.vault.root(), path.as_str())?.map(|b| sha256_hex(&b));
        if existing.is_some() && !overwrite {
            return Err(Error::AlreadyExists { path: path.to_string() });
        }
        let record = DocumentRecord {
            file_path: file_path.trim().to_string(),
            format: format.clone(),
            generated_by: generated_by.to_string(),
            source_sha256,
        };
        let text = render(&self.vault.policy().policy.agent_memory.document_note_type, &record, &body, self.vault.now())?;
        let committed = self.commit("ctxvault.write_doc", &fresh_id(16), vec![(path.clone(), text, existing.clone())])?;
        let (receipt, proposed) = match committed {
            Committed::Written(receipt) => (Some(ReceiptSummary::of(&receipt)), None),
            Committed::Proposed(proposal) => (None, Some(proposal)),
        };
        Ok(DocumentWritten {
            file_path: record.file_path,
            format,
            generated_by: record.generated_by,
            path: path.to_string(),
            overwritten: existing.is_some(),
            converted: conversion.is_some(),
            conversion,
            receipt,
            proposed,
        })
    }

    /// `list_docs`: every document note, by file path.
    pub fn list_docs(&self) -> Result<DocumentList> {
        let folder = self.documents_folder();
        let records: Vec<(VaultPath, u64)> = self
            .vault
            .with_inventory(|inv| inv.subtree(&folder).filter(|r| r.is_note()).map(|r| (r.path.clone(), r.size_bytes)).collect())?;
        let mut docs = Vec::new();
        for (path, size) in records {
            let Some(bytes) = crate::store::beneath::read(self.vault.root(), path.as_str())? else { continue };
            let text = String::from_utf8_lossy(&bytes);
            let record = parse_record(&text);
            let file_path = document_name(&folder, path.as_str(), record.as_ref());
            let format = record.as_ref().map_or("md", |r| r.format.as_str()).to_string();
            docs.push(DocumentEntry {
                source: file_path.clone(),
                file_path,
                filetype: format!(".{format}"),
                format,
                generated_by: record.as_ref().map(|r| r.generated_by.clone()),
                path: path.to_string(),
                size_bytes: size,
            });
        }
        docs.sort_by(|a, b| a.file_path.cmp(&b.file_path));
        Ok(DocumentList { count: docs.len(), documents: docs, untrusted: Untrusted::marks() })
    }

    /// `query`: the vault's search (`auto`) scoped to the documents folder.
    pub(crate) fn query_documents(&self, query: &str) -> Result<DocumentHits> {
        let policy = self.vault.policy();
        let request = crate::search::SearchRequest {
            query: query.to_string(),
            max_results: policy.policy.search.max_results_cap.min(10),
            search_mode: crate::search::SearchMode::Auto,
            temporal_view: crate::search::TemporalView::Current,
            as_of: self.vault.today(),
            domain: Some(self.documents_folder()),
            auto_priority: Vec::new(),
        };
        let (envelope, chunks) = crate::search::search_with_chunks(self.vault.root(), policy, request)?;
        let (folder, bound) = (self.documents_folder(), policy.policy.limits.read_note_bytes_max);
        let mut results = Vec::with_capacity(chunks.len());
        for (r, chunk) in envelope.results.into_iter().zip(chunks) {
            // The name list_docs gives the document (its `document:` block, read again: the
            // index keeps the title, not the caller's file name).
            let record = crate::store::beneath::read(self.vault.root(), &r.source.path)?
                .and_then(|bytes| parse_record(&String::from_utf8_lossy(&bytes)));
            let (text, text_truncated) = bounded_text(&chunk, bound);
            results.push(DocumentHit {
                text,
                text_truncated,
                snippet: r.snippet,
                source: document_name(&folder, &r.source.path, record.as_ref()),
                title: r.metadata.title,
                path: r.source.path,
                score: 1.0 / (1.0 + r.score.max(0.0)),
                relevance: r.score,
                trust: r.trust.to_string(),
            });
        }
        Ok(DocumentHits {
            query: envelope.query,
            result_count: results.len(),
            results,
            actual_mode: envelope.actual_mode.to_string(),
            fallback_reason: envelope.fallback_reason,
            untrusted: Untrusted {
                trust: envelope.trust.to_string(),
                data_only: envelope.data_only,
                handling_instruction: envelope.handling_instruction.to_string(),
            },
        })
    }
}
