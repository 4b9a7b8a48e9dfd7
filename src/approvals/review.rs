//! What a person reviews before deciding: each proposed note change's before- and after-image,
//! a line diff between them, and the lint gate's verdict on the after-images (read-only).

use serde::Serialize;

use super::{Governed, load};
use crate::error::Result;
use crate::finding::Finding;
use crate::note::path::VaultPath;
use crate::store::nofollow;
use crate::vault::Vault;
use crate::write::sha256_hex;

/// Where a change's before-image comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BeforeImage {
    /// The note does not exist and the proposal creates it.
    Absent,
    /// The note on disk still holds the version the proposal was based on.
    Current,
    /// The note changed since (or the proposal already applied), and the proposal's record
    /// holds the version it was based on (kept when it was proposed; its sha256 checked
    /// against the proposal's and the applying receipt's pre-image).
    Kept,
    /// The note changed since (or the proposal already applied) and the proposal's record
    /// keeps no copy of the version it was based on (stored before such copies were kept), so
    /// no before-image can be shown.
    Unavailable,
}

/// One line of a diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiffLine {
    /// `' '` kept, `'-'` removed, `'+'` added.
    pub tag: char,
    pub text: String,
}

/// One note change of a proposal as a reviewer sees it.
#[derive(Debug, Clone, Serialize)]
pub struct ReviewedChange {
    pub path: String,
    pub before: BeforeImage,
    pub before_text: Option<String>,
    /// None: the change removes the note.
    pub after_text: Option<String>,
    /// Before → after, line by line (empty when no before-image is available).
    pub diff: Vec<DiffLine>,
}

/// A proposal's changes and the gate's verdict on them.
#[derive(Debug, Clone, Serialize)]
pub struct ProposalReview {
    pub changes: Vec<ReviewedChange>,
    /// The lint gate's blocking findings on the after-images (empty: the gate would pass).
    pub gate_blocking: Vec<Finding>,
    pub gate_warnings: Vec<Finding>,
}

/// Line diff of `before` → `after` (the `similar` crate's Myers diff).
pub(crate) fn line_diff(before: &str, after: &str) -> Vec<DiffLine> {
    similar::TextDiff::from_lines(before, after)
        .iter_all_changes()
        .map(|change| DiffLine {
            tag: match change.tag() {
                similar::ChangeTag::Equal => ' ',
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
            },
            text: change.value().trim_end_matches('\n').to_string(),
        })
        .collect()
}

fn read_current(vault: &Vault, path: &str) -> Result<Option<Vec<u8>>> {
    let note = VaultPath::parse(path)?;
    // Through folder handles: a folder swapped for a link is never read through.
    crate::store::beneath::read(vault.root(), note.as_str())
}

/// `kept`: the version the change was based on, when its proposal's record holds it.
fn reviewed(vault: &Vault, path: &str, based_on: Option<&str>, kept: Option<String>, after_text: Option<String>) -> Result<ReviewedChange> {
    let current = read_current(vault, path)?;
    let (before, before_text) = match (based_on, current) {
        (None, _) => (BeforeImage::Absent, None),
        (Some(expected), Some(bytes)) if sha256_hex(&bytes) == expected => {
            (BeforeImage::Current, Some(String::from_utf8_lossy(&bytes).into_owned()))
        }
        (Some(_), _) => match kept {
            Some(text) => (BeforeImage::Kept, Some(text)),
            None => (BeforeImage::Unavailable, None),
        },
    };
    let diff = match (before, &before_text) {
        (BeforeImage::Unavailable, _) => Vec::new(),
        (_, before_text) => line_diff(before_text.as_deref().unwrap_or(""), after_text.as_deref().unwrap_or("")),
    };
    Ok(ReviewedChange { path: path.to_string(), before, before_text, after_text, diff })
}

impl Vault {
    /// The review of a stored proposal (either kind): before → after per note and the lint
    /// gate's verdict on the after-images. Reads only.
    pub(crate) fn review_proposal(&self, proposal_id: &str) -> Result<ProposalReview> {
        super::check_id(proposal_id)?;
        nofollow::refuse_symlinked_state(self.root())?;
        let empty = sha256_hex(b"");
        let changes = match load(self.root(), proposal_id)? {
            Governed::Apply(p) => {
                let based_on = (p.before_sha256 != empty).then_some(p.before_sha256.as_str());
                let kept = super::replaced_text(self.root(), &p)?;
                vec![reviewed(self, &p.path, based_on, kept, Some(p.content.clone()))?]
            }
            Governed::Batch(b) => b
                .changes
                .iter()
                .map(|c| {
                    let based_on = if c.require_absent { None } else { c.expected_sha256.as_deref() };
                    reviewed(self, &c.path, based_on, None, c.content.clone())
                })
                .collect::<Result<_>>()?,
            // An action (link-rot egress, replication) changes no note: nothing to diff.
            Governed::Action(_) => Vec::new(),
        };
        let images: Vec<(VaultPath, Option<&str>)> =
            changes.iter().map(|c| Ok((VaultPath::parse(&c.path)?, c.after_text.as_deref()))).collect::<Result<_>>()?;
        let gate = crate::write::gate_preview(self, &images)?;
        Ok(ProposalReview { changes, gate_blocking: gate.blocking, gate_warnings: gate.warnings })
    }
}
