//! The core write operations with P.O.W.E.R.'s names: each is built by `write::operations`
//! (validated into a `Mutation`, or a stored proposal) and run with this vault's writer.

use super::Vault;
use crate::error::Result;
use crate::write::operations::{self, IngestRequest, Proposal, SynthesizeRequest};
use crate::write::receipts::Receipt;

impl Vault {
    /// Creates one new note (the target must not exist) through the write transaction.
    pub fn ingest_note(&self, request: &IngestRequest) -> Result<Receipt> {
        operations::ingest_note(&self.state, &self.writer, request)
    }

    /// Creates one synthesis note (Daily Log by default, episodic memory) through the transaction.
    pub fn synthesize_session(&self, request: &SynthesizeRequest) -> Result<Receipt> {
        operations::synthesize_session(&self.state, &self.writer, request)
    }

    /// Validates and stores a content-addressed proposal; never writes the note.
    /// `expected_sha256` names the version the edit was based on; a different current version is
    /// a typed conflict (optimistic concurrency).
    pub fn propose_memory_change(
        &self,
        path: &str,
        content: &str,
        idempotency_key: Option<&str>,
        expected_sha256: Option<&str>,
    ) -> Result<Proposal> {
        operations::propose_memory_change(&self.state, &self.writer, path, content, idempotency_key, expected_sha256)
    }
}
