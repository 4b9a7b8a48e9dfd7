//! Whole-vault reads answered from the model or through folder handles: the health report
//! (`lint`) and what it was computed from, the Markdown style check, and bounded note slices
//! (`read_note`). *Invariant: read-only; a note is read through folder handles, never through
//! a link, and never past the policy's size limits.*

use super::{MarkdownReport, NoteSlice, VaultState};
use crate::error::{Error, Result};
use crate::inventory;
use crate::lint::{self, LintReport};
use crate::note::frontmatter;
use crate::note::path::VaultPath;

impl VaultState {
    /// The vault-wide health report.
    pub fn lint(&self) -> Result<LintReport> {
        let today = self.today();
        let mut report = self.with_inventory(|inv| lint::health_report(inv, &self.policy, today))?;
        report.computed_from = Some(self.computed_from()?);
        Ok(report)
    }

    /// What a report computed now is computed from: the active generation and the model state.
    pub fn computed_from(&self) -> Result<inventory::ComputedFrom> {
        let generation = crate::search::generation::read_active(&self.root).ok().flatten();
        let (source_snapshot_hash, notes) = self.with_inventory(|inv| (inv.snapshot.hash(), inv.counts.notes))?;
        let freshness = self.freshness();
        Ok(inventory::ComputedFrom {
            generation,
            source_snapshot_hash,
            notes,
            observed_at: freshness.observed_at,
            disk_watch: freshness.mode,
        })
    }

    /// Markdown style checks over every in-scope note (never blocking by default).
    pub fn check_markdown(&self) -> Result<MarkdownReport> {
        let paths: Vec<VaultPath> = self.with_inventory(|inv| inv.notes().map(|r| r.path.clone()).collect())?;
        let (bytes_max, findings_max) = (self.policy.policy.limits.note_bytes_max, self.policy.policy.limits.report_findings_max);
        let (mut findings, mut counts, mut total) = (Vec::new(), std::collections::BTreeMap::new(), 0usize);
        let mut skipped_too_large = Vec::new();
        // Each note opened through folder handles, each folder once for its run of notes (never
        // by path, so a folder swapped for a link is never read through); its size is the open
        // file's, checked before a byte is read.
        let mut cursor = crate::store::beneath::FolderCursor::new(&self.root);
        for path in &paths {
            let Ok(mut file) = cursor.open_read(path.as_str()) else { continue };
            match file.metadata() {
                Ok(meta) if meta.is_file() && meta.len() <= bytes_max => {}
                Ok(meta) if meta.is_file() => {
                    skipped_too_large.push(path.to_string());
                    continue;
                }
                _ => continue,
            }
            // Never more than the limit, even when the note grows after its size was taken.
            let mut bytes = Vec::new();
            if std::io::Read::read_to_end(&mut std::io::Read::take(&mut file, bytes_max.saturating_add(1)), &mut bytes).is_err() {
                continue;
            }
            if bytes.len() as u64 > bytes_max {
                skipped_too_large.push(path.to_string());
                continue;
            }
            let Ok(text) = String::from_utf8(bytes) else { continue };
            let (body, first_line) = match frontmatter::split(&text) {
                Ok(split) => (split.body, split.body_first_line),
                Err(_) => (text.as_str(), 1),
            };
            for finding in lint::style_report(&self.policy, path, body, first_line) {
                *counts.entry(finding.rule).or_default() += 1;
                total += 1;
                if findings.len() < findings_max {
                    findings.push(finding);
                }
            }
        }
        Ok(MarkdownReport {
            files_checked: paths.len() - skipped_too_large.len(),
            counts,
            findings_truncated: total > findings.len(),
            findings,
            findings_total: total,
            skipped_too_large,
        })
    }

    /// Reads at most `max_bytes` of an in-scope Markdown page from byte `offset`. The slice never
    /// splits a UTF-8 character: its end moves down to a character boundary, and an `offset`
    /// inside a character is refused. `max_bytes` is bounded by `limits.read_note_bytes_max`.
    pub fn read_note(&self, raw: &str, offset: usize, max_bytes: usize) -> Result<NoteSlice> {
        let limit = self.policy.policy.limits.read_note_bytes_max;
        if max_bytes == 0 || max_bytes > limit {
            return Err(Error::InvalidArgument { name: "max_bytes", reason: format!("must be between 1 and {limit}") });
        }
        let path = VaultPath::parse(raw)?;
        if crate::scan::classify(&self.policy, &path).is_none() {
            return Err(Error::NoteUnreadable { path: path.to_string(), reason: "not an in-scope Markdown page of the vault".into() });
        }
        crate::store::nofollow::resolve_safe(&self.root, path.as_str())?;
        // Read through folder handles: a folder swapped for a link after the check is never followed.
        let bytes = crate::store::beneath::read(&self.root, path.as_str())?
            .ok_or_else(|| Error::NoteUnreadable { path: path.to_string(), reason: "no such note".into() })?;
        let text = std::str::from_utf8(&bytes).map_err(|_| Error::NoteUnreadable { path: path.to_string(), reason: "not UTF-8".into() })?;
        let total = text.len();
        if offset > total || !text.is_char_boundary(offset) {
            return Err(Error::InvalidArgument {
                name: "offset",
                reason: format!("must be a character boundary between 0 and {total} (use offset + bytes_returned of the previous slice)"),
            });
        }
        let mut end = offset.saturating_add(max_bytes).min(total);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if end == offset && offset < total {
            return Err(Error::InvalidArgument { name: "max_bytes", reason: "is smaller than the character at offset".into() });
        }
        Ok(NoteSlice {
            path: path.to_string(),
            offset,
            bytes_returned: end - offset,
            total_bytes: total,
            sha256: crate::hex::sha256_hex(&bytes),
            content: text[offset..end].to_string(),
            eof: end == total,
        })
    }
}
