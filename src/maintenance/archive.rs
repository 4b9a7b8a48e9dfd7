//! `archive_notes`: move notes with `status: archived` or a past expiry into the archive folder
//! (keeping their path below it), set `status: archived`, and keep every link to them
//! resolving — links that would break are rewritten in the same transaction, or the note is
//! refused with a named reason. Dry run by default; a live run needs approval.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use crate::approvals::Operation;
use crate::error::{Error, Result};
use crate::inventory::{Inventory, Resolution, join_lexical};
use crate::note::body::{Link, LinkKind};
use crate::note::frontmatter;
use crate::note::path::VaultPath;
use crate::note::yaml_edit;
use crate::vault::Vault;
use crate::write::{NoteChange, sha256_hex};

/// `archive_notes` parameters (dry_run defaults to true).
pub type ArchiveRequest = super::RunRequest;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LinkRewrite {
    pub note: String,
    pub line: usize,
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ArchiveMove {
    pub from: String,
    pub to: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Refusal {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ArchiveReport {
    pub dry_run: bool,
    pub moves: Vec<ArchiveMove>,
    pub link_rewrites: Vec<LinkRewrite>,
    pub refused: Vec<Refusal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<Value>,
}

/// Relative path from directory `from_dir` to file `to`.
fn relative(from_dir: &str, to: &str) -> String {
    let a: Vec<&str> = from_dir.split('/').filter(|s| !s.is_empty()).collect();
    let b: Vec<&str> = to.split('/').collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".to_string(); a.len() - common];
    parts.extend(b[common..].iter().map(|s| s.to_string()));
    parts.join("/")
}

/// The new link target text for `link` in a note in `source_dir`, pointing at `to`.
fn new_target(link: &Link, source_dir: &str, to: &VaultPath) -> String {
    match link.kind {
        LinkKind::Markdown => relative(source_dir, to.as_str()).replace(' ', "%20"),
        LinkKind::Wiki | LinkKind::Embed => to.as_str().strip_suffix(".md").unwrap_or(to.as_str()).to_string(),
    }
}

/// Rewrites the first occurrence of `link`'s target on its line; `None` if it cannot be found.
fn rewrite_line(text: &str, link: &Link, first_line: usize, replacement: &str) -> Option<String> {
    let index = link.line.checked_sub(first_line)?;
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    let line = *lines.get(index)?;
    let encoded = link.target.replace(' ', "%20");
    let patterns: Vec<(String, String)> = match link.kind {
        LinkKind::Wiki | LinkKind::Embed => vec![(format!("[[{}", link.target), format!("[[{replacement}"))],
        LinkKind::Markdown => vec![
            (format!("](<{}", link.target), format!("](<{}", replacement.replace("%20", " "))),
            (format!("]({}", link.target), format!("]({replacement}")),
            (format!("]({encoded}"), format!("]({replacement}")),
        ],
    };
    for (from, to) in patterns {
        if let Some(at) = line.find(&from) {
            let changed = format!("{}{}{}", &line[..at], to, &line[at + from.len()..]);
            let owned: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            let mut owned = owned;
            owned[index] = changed;
            lines.clear();
            return Some(owned.concat());
        }
    }
    None
}

/// Sets `status: archived` keeping every other key's text.
fn with_archived_status(text: &str, status: &str) -> Result<String> {
    let split = frontmatter::split(text).map_err(|p| Error::InvalidContent { path: String::new(), reason: p.to_string() })?;
    let yaml = yaml_edit::set_entry(split.yaml, "status", &format!("status: {status}"));
    Ok(format!("{}{}{}{}{}", if split.bom { "\u{feff}" } else { "" }, split.open, yaml, split.close, split.body))
}

fn candidates(inventory: &Inventory, vault: &Vault) -> Vec<(VaultPath, String)> {
    let policy = &vault.policy().policy;
    let today = vault.today();
    inventory
        .notes()
        .filter(|r| r.path.top_folder() != policy.layout.archive_folder && r.path.as_str().contains('/'))
        .filter_map(|r| {
            if r.meta.status.as_deref() == Some(policy.metadata.archived_status.as_str()) {
                Some((r.path.clone(), "status archived".to_string()))
            } else {
                r.meta.expiry.filter(|e| *e < today).map(|e| (r.path.clone(), format!("expired on {e}")))
            }
        })
        .collect()
}

impl Vault {
    /// Plans (dry run) or performs (approved live run) the archive.
    pub fn archive_notes(&self, request: &ArchiveRequest) -> Result<ArchiveReport> {
        self.archive_notes_with_progress(request, &super::unwatched)
    }

    /// [`Vault::archive_notes`], reporting `planning` (every note's links checked against the
    /// moves) and `writing` (the one transaction) to `progress`.
    pub fn archive_notes_with_progress(&self, request: &ArchiveRequest, progress: super::Progress<'_>) -> Result<ArchiveReport> {
        request.check_approved("archive_notes")?;
        let policy = self.policy().clone();
        let archive = policy.policy.layout.archive_folder.clone();
        let status = policy.policy.metadata.archived_status.clone();
        let (moves, mut refused, mutation_notes, rewrites) = self.with_inventory(|inventory| {
            let mut moves = Vec::new();
            let mut refused = Vec::new();
            let mut targets: BTreeMap<VaultPath, VaultPath> = BTreeMap::new();
            for (from, reason) in candidates(inventory, self) {
                // Looked up through folder handles: a folder swapped for a link is never asked.
                let on_disk = |to: &VaultPath| crate::store::beneath::exists(self.root(), to.as_str());
                match VaultPath::parse_walked(&format!("{archive}/{from}")) {
                    Ok(to) if inventory.files.contains(&to) => {
                        refused.push(Refusal { path: from.to_string(), reason: format!("'{to}' already exists") })
                    }
                    Ok(to) => match on_disk(&to) {
                        Ok(false) => {
                            targets.insert(from.clone(), to.clone());
                            moves.push(ArchiveMove { from: from.to_string(), to: to.to_string(), reason });
                        }
                        Ok(true) => refused.push(Refusal { path: from.to_string(), reason: format!("'{to}' already exists") }),
                        Err(e) => refused.push(Refusal { path: from.to_string(), reason: format!("cannot look up '{to}': {e}") }),
                    },
                    Err(_) => refused.push(Refusal { path: from.to_string(), reason: "the archive path is not valid".into() }),
                }
            }
            // Every note this run reads, read once through folder handles (never by path: a
            // folder swapped for a link is never read through), its bytes kept for the hash.
            let mut cursor = crate::store::beneath::FolderCursor::new(self.root());
            let mut originals: BTreeMap<VaultPath, Option<Vec<u8>>> = BTreeMap::new();
            let mut original = |path: &VaultPath| -> Option<Vec<u8>> {
                originals.entry(path.clone()).or_insert_with(|| cursor.read(path.as_str()).ok().flatten()).clone()
            };
            // Every link that resolves to a moved note now; rewrite those that would not after.
            let mut texts: BTreeMap<VaultPath, String> = BTreeMap::new();
            let mut rewrites = Vec::new();
            let notes_total = inventory.records.values().filter(|r| r.is_note()).count();
            for (done, record) in inventory.records.values().filter(|r| r.is_note()).enumerate() {
                super::report(progress, "planning", done, notes_total);
                for link in &record.links {
                    let Resolution::Resolved(target) = inventory.resolve(&record.path, link, &policy) else { continue };
                    let Some(to) = targets.get(&target) else { continue };
                    let source_now = targets.get(&record.path).unwrap_or(&record.path);
                    if resolves_after(inventory, &targets, source_now, link, to, &policy) {
                        continue;
                    }
                    let text = match texts.get(&record.path) {
                        Some(t) => t.clone(),
                        None => match original(&record.path).map(String::from_utf8) {
                            Some(Ok(t)) => t,
                            _ => {
                                refused
                                    .push(Refusal { path: record.path.to_string(), reason: "cannot read it to rewrite its links".into() });
                                continue;
                            }
                        },
                    };
                    let replacement = new_target(link, source_now.parent(), to);
                    match rewrite_line(&text, link, 1, &replacement) {
                        Some(updated) => {
                            rewrites.push(LinkRewrite {
                                note: record.path.to_string(),
                                line: link.line,
                                from: link.target.clone(),
                                to: replacement,
                            });
                            texts.insert(record.path.clone(), updated);
                        }
                        None => refused.push(Refusal {
                            path: target.to_string(),
                            reason: format!("the link '{}' in {} line {} cannot be rewritten", link.target, record.path, link.line),
                        }),
                    }
                }
            }
            progress("planning", notes_total, notes_total);
            let mut notes = Vec::new();
            let mut handled: BTreeSet<VaultPath> = BTreeSet::new();
            for (from, to) in &targets {
                let text = match texts.get(from) {
                    Some(t) => t.clone(),
                    None => original(from).and_then(|bytes| String::from_utf8(bytes).ok()).unwrap_or_default(),
                };
                let before = sha256_hex(&original(from).unwrap_or_default());
                match with_archived_status(&text, &status) {
                    Ok(moved) => {
                        notes.push(NoteChange { path: from.clone(), content: None, require_absent: false, expected_sha256: Some(before) });
                        notes.push(NoteChange { path: to.clone(), content: Some(moved), require_absent: true, expected_sha256: None });
                    }
                    Err(e) => refused.push(Refusal { path: from.to_string(), reason: e.to_string() }),
                }
                handled.insert(from.clone());
            }
            for (path, text) in texts.into_iter().filter(|(p, _)| !handled.contains(p)) {
                let before = sha256_hex(&original(&path).unwrap_or_default());
                notes.push(NoteChange { path, content: Some(text), require_absent: false, expected_sha256: Some(before) });
            }
            (moves, refused, notes, rewrites)
        })?;
        let blocked: BTreeSet<String> = refused.iter().map(|r| r.path.clone()).collect();
        if !blocked.is_empty() && !request.dry_run {
            refused.sort_by(|a, b| a.path.cmp(&b.path));
            return Err(Error::InvalidArgument {
                name: "archive",
                reason: format!("refused: {}", refused.iter().map(|r| format!("{} ({})", r.path, r.reason)).collect::<Vec<_>>().join("; ")),
            });
        }
        let mut report = ArchiveReport { dry_run: request.dry_run, moves, link_rewrites: rewrites, refused, receipt: None };
        if request.dry_run || mutation_notes.is_empty() {
            return Ok(report);
        }
        let log_entry = format!("\n## [{}] archive | Archived {} notes\n- Action: archive_notes\n", self.today(), report.moves.len());
        let writing = mutation_notes.len();
        progress("writing", 0, writing);
        let receipt = super::write_governed(self, Operation::Archive, "maintenance.archive", mutation_notes, Some(log_entry), true)?;
        progress("writing", writing, writing);
        report.receipt = Some(receipt);
        Ok(report)
    }
}

/// Whether `link` (in a note now at `source`) resolves to `to` once every move has happened.
fn resolves_after(
    inventory: &Inventory,
    targets: &BTreeMap<VaultPath, VaultPath>,
    source: &VaultPath,
    link: &Link,
    to: &VaultPath,
    policy: &crate::policy::LoadedPolicy,
) -> bool {
    // Only two shapes survive a move unchanged: a name that is unique vault-wide (basename
    // resolution) and nothing else; relative and root paths point at the old place.
    if link.kind == LinkKind::Markdown || link.target.contains('/') {
        return false;
    }
    let _ = policy;
    let name = to.file_name().to_lowercase();
    let wanted =
        if link.target.to_lowercase().ends_with(".md") { link.target.to_lowercase() } else { format!("{}.md", link.target.to_lowercase()) };
    if name != wanted {
        return false;
    }
    // Relative resolution from the (new) source directory must not hit another file first.
    let relative_hit =
        join_lexical(source.parent(), &wanted).is_some_and(|p| inventory.files.contains(&p) && &p != to && !targets.contains_key(&p));
    let unique = inventory.by_name.get(&name).is_some_and(|list| list.len() == 1);
    unique && !relative_hit
}
