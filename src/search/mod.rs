//! Search over immutable generations, in two halves: `build` (sync, `publish_changes`, publish,
//! GC, the fold, dense arena appends: every writer of a search file) and `read` (search, modes,
//! the envelope, related, temporal status, opening and verifying generations, the tail built in
//! memory, dense reading). The reading side never names the building side (a tidy test checks
//! it); both share the document format (`schema`, `stemming`) and `segment_commit`, which writes
//! only into the directory it is given. This file keeps the paths the rest of the crate uses.
//!
//! Modes: `fts` (one-field BM25 over the body, which carries title, description, tags and
//! section: Lucene's formula with the policy's k1 and b and exact lengths, N and average length
//! over chunk documents, the reference's token rules, stop words and stemmer; see
//! docs/retrieval.md); `semantic`/`vector`, `hybrid` and `graph_assisted` over the generation's
//! dense index; `reranked` = the policy's pinned cross-encoder over hybrid's (or BM25's) top
//! candidates, `reranker_unavailable` without it. A query past `search.query_chars_max` is cut
//! there and says so (`query_truncated`). Without dense vectors `semantic` is a typed `dense_index_unavailable` error, while
//! `vector` and `hybrid` answer with BM25 and `graph_assisted` expands BM25 anchors, each
//! saying so in `actual_mode` and `fallback_reason` (P.O.W.E.R. serves them lexically);
//! `auto` = the domain's or the policy's dense mode, or fts with the reason.

mod build;
mod read;
pub mod schema;
mod segment_commit;
mod stemming;
pub(crate) mod words;

pub use crate::policy::SearchMode;
pub use build::publish::GenerationInfo;
pub use build::stage::{Staging, UnderLock};
pub use build::{
    Progress, SyncOptions, SyncReport, embeds_on_write, publish_changes, publish_changes_in_view, snapshot_hash, sync, sync_with_progress,
};
pub use read::envelope::{
    ENVELOPE_SCHEMA, Envelope, HANDLING_INSTRUCTION, MAX_RESULTS_LIMIT, NoteRef, Provenance, Related, RelatedHits, RelatedMethod,
    ReplicaFreshness, ResultMetadata, ResultSource, SearchRequest, SearchResult, TemporalView,
};
pub use read::generation::{Counts, Exclusion};
pub use read::related::{memory_context, suggest_related};
pub(crate) use read::search_with_chunks;
pub use read::temporal::TemporalStatus;
pub use read::texts::rank_texts;
pub use read::{bm25, query};
pub use read::{prepare, search};

/// Search generations as the rest of the crate names them: reading (`read::generation`) and
/// the result of a publish.
pub mod generation {
    pub use super::build::publish::GenerationInfo;
    pub(crate) use super::read::generation::manifest_path;
    pub use super::read::generation::{Acquired, Counts, Exclusion, Manifest, OpenGeneration, acquire, read_active, read_manifest};
}

/// Dense vectors as the rest of the crate names them: the arena's format and scan
/// (`read::dense`) and its appends (`build::arena`).
pub mod dense {
    pub use super::build::arena::{ArenaWriter, set_building_arena};
    pub use super::read::dense::{DenseManifest, content_key, dot, note_key};
}

/// The journal's tail as the rest of the crate names it: served in memory (`read::tail`) and
/// folded on disk (`build::fold`).
pub mod tail {
    pub(crate) use super::build::fold::fold;
    pub(crate) use super::read::tail::{count_after, count_heads_after, generation_id, intents_after, servable};
}

#[cfg(test)]
mod tests;
