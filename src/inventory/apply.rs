//! The one way the model learns what changed on disk: `Inventory::apply` brings it up to a
//! `ChangeSet`, whichever evidence source told it (a walk's `Unknown`, folders whose stamps
//! moved, the watcher's paths, other processes' receipts, a write's re-check).
//!
//! A whole folder is listed again (its files added, forgotten or read again when their stat
//! identity moved, a new subfolder listed whole, a vanished one forgotten with its parent
//! listed again); an entry is looked at alone (a stat, a read only when it moved); anything an
//! entry cannot settle (a folder that held notes, a name no vault path may hold, an ignore file)
//! and `Unknown` are a walk of the vault. A write's partial model (`PartialModel::apply`) only
//! looks at entries and never walks nor lists: asked to, it keeps that as past its view
//! (`Partial::past_view`), and `ModelView::apply_in_view` answers it as `Err(Overrun)`: the
//! write plans again on the whole model. Both share the look at an entry (`look_at`).

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use super::changes::{ChangeSet, Changes};
use super::{FileStamp, Inventory, Model, NoteRecord, PartialModel, Reach, Reread, list_folder, now_ns, parent_dir, read_all, stamp_now};
use crate::error::Result;
use crate::note::path::VaultPath;
use crate::policy::LoadedPolicy;
use crate::scan::{self, PageKind};
use crate::store::layout;

/// What `Inventory::apply` did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Pages read again or forgotten.
    pub reread: usize,
    /// Pages read again whose bytes were those their records were analysed from (the engine's
    /// own writes): not parsed again.
    pub confirmed: usize,
    /// Folders listed again.
    pub relisted: usize,
    /// A catalog page (or the root index) changed, appeared or vanished, or a walk ran.
    pub catalog_changed: bool,
    /// Why the vault was walked, when the changes asked for it.
    pub walked: Option<String>,
}

/// What looking at one entry found.
enum Looked {
    /// Its stat identity had not moved: nothing was read.
    Unchanged,
    /// It was read and held the very bytes its record was analysed from: only the record's
    /// stat identity was taken, nothing parsed.
    Confirmed,
    /// It was read again (or forgotten); `catalog_changed`: a catalog page changed.
    Reread { catalog_changed: bool },
    /// Only a walk of the vault can say what changed (why).
    Walk(String),
}

/// What listing folders again found, for the caller to finish (pages are read in bulk).
#[derive(Debug, Default)]
pub(super) struct Relisting {
    /// Pages whose identity moved, new or racy: read by the caller.
    pub to_read: Vec<(VaultPath, PageKind)>,
    /// Temporary files the listings found.
    pub temps: Vec<PathBuf>,
    /// Pages forgotten (their files gone, out of scope, or in a vanished folder).
    pub forgotten: usize,
    /// Folders listed.
    pub listed: usize,
}

/// One folder's listing against what a model held of that folder: the listing step
/// `Inventory::relist` and a write's keyed load (`inventory_cache::keyed`) share.
#[derive(Debug, Default)]
pub struct ListingChanges {
    /// Pages new to the model, or whose stat identity moved (or is racy), in listing order.
    pub to_read: Vec<(VaultPath, PageKind)>,
    /// Files the model held that the listing lacks, in path order.
    pub gone: Vec<VaultPath>,
    /// Listed files the model did not hold, in path order.
    pub new: Vec<VaultPath>,
}

/// Compares the files of one folder's listing (`list_folder`) with `held`, the files a model
/// holds directly in that folder, whose records `record` gives: a stat of each listed page the
/// model holds a record of, and nothing else read.
pub fn compare_listing<'r>(
    root: &Path,
    files: &[(VaultPath, Option<PageKind>)],
    held: &BTreeSet<VaultPath>,
    record: impl Fn(&VaultPath) -> Option<&'r NoteRecord>,
) -> ListingChanges {
    let mut changes = ListingChanges::default();
    let mut listed: BTreeSet<&VaultPath> = BTreeSet::new();
    for (path, kind) in files {
        if let Some(kind) = *kind
            && !record(path).is_some_and(|r| r.is_current(kind, stamp_now(root, path)))
        {
            changes.to_read.push((path.clone(), kind));
        }
        listed.insert(path);
    }
    changes.gone = held.iter().filter(|path| !listed.contains(path)).cloned().collect();
    changes.new = listed.into_iter().filter(|path| !held.contains(*path)).cloned().collect();
    changes
}

/// Whether a page of this kind is a catalog page (the root index or a folder's).
fn is_page(kind: PageKind) -> bool {
    matches!(kind, PageKind::Catalog | PageKind::RootIndex)
}

impl Inventory {
    /// Brings the whole model up to `changes`: a walk of the vault for `Unknown` (and for an
    /// entry only a walk can settle), each whole folder listed again, each entry looked at.
    pub fn apply(&mut self, root: &Path, policy: &LoadedPolicy, changes: &ChangeSet) -> Result<Applied> {
        let changes = match changes {
            ChangeSet::Unknown(reason) => return self.walk_for(root, policy, reason.clone()),
            ChangeSet::Known(changes) => changes,
        };
        let mut applied = Applied::default();
        let whole: Vec<String> = changes.whole_folders().map(str::to_string).collect();
        if !whole.is_empty() {
            // A folder new to the model changes its parent's listing too.
            let new: Vec<String> = whole.iter().filter(|folder| !folder.is_empty() && !self.dirs.contains_key(*folder)).cloned().collect();
            for folder in &new {
                self.listing_changed(parent_dir(folder));
            }
            let mut relisting = Relisting::default();
            if self.relist(root, policy, whole, &mut relisting).is_err() {
                return self.walk_for(root, policy, "a folder could not be listed".into());
            }
            applied.relisted = relisting.listed;
            applied.reread = relisting.forgotten;
            applied.catalog_changed = relisting.forgotten > 0;
            // Files the model holds a record of (the engine's own note and pages, written into
            // a new folder) are compared by their bytes first, as an entry is; the rest are
            // read in bulk.
            let (held, to_read): (Vec<_>, Vec<_>) = relisting.to_read.into_iter().partition(|(path, _)| self.records.contains_key(path));
            for (path, kind) in held {
                match self.reread_held(root, policy, &path, kind) {
                    Looked::Confirmed => applied.confirmed += 1,
                    Looked::Reread { catalog_changed } => {
                        applied.reread += 1;
                        applied.catalog_changed |= catalog_changed;
                    }
                    Looked::Unchanged | Looked::Walk(_) => {}
                }
            }
            applied.reread += to_read.len();
            applied.catalog_changed |= to_read.iter().any(|(_, kind)| is_page(*kind));
            for record in read_all(root, policy, &to_read) {
                self.upsert(record);
            }
        }
        if let Some(reason) = self.look_at_entries(root, policy, changes, &mut applied) {
            let walked = self.walk_for(root, policy, reason)?;
            applied.reread += walked.reread;
            applied.catalog_changed = true;
            applied.walked = walked.walked;
        }
        Ok(applied)
    }

    /// `apply` of `Unknown(reason)`: a stat walk.
    fn walk_for(&mut self, root: &Path, policy: &LoadedPolicy, reason: String) -> Result<Applied> {
        let reread = self.walk_again(root, policy)?;
        Ok(Applied { reread, relisted: 0, catalog_changed: true, walked: Some(reason), ..Applied::default() })
    }

    /// A full stat walk: re-reads every page whose stat identity moved (or is racy), adds and
    /// forgets files, and refreshes the symlink list. Returns how many pages it re-read.
    fn walk_again(&mut self, root: &Path, policy: &LoadedPolicy) -> Result<usize> {
        let walk_started = now_ns();
        let scan = scan::scan(root, policy)?;
        let pages: std::collections::BTreeMap<&VaultPath, PageKind> = scan.pages.iter().map(|(p, k)| (p, *k)).collect();
        let files: BTreeSet<&VaultPath> = scan.files.iter().collect();
        let gone: Vec<VaultPath> = self
            .files
            .iter()
            .filter(|p| !files.contains(p))
            .chain(self.records.keys().filter(|p| !pages.contains_key(p)))
            .cloned()
            .collect();
        for path in &gone {
            self.remove(path);
        }
        let mut changed = Vec::new();
        for (path, kind) in &scan.pages {
            if !self.records.get(path).is_some_and(|r| r.is_current(*kind, stamp_now(root, path))) {
                changed.push((path.clone(), *kind));
            }
        }
        for path in &scan.files {
            if !pages.contains_key(path) && !self.files.contains(path) {
                self.add_attachment(path.clone());
            }
        }
        let reread = changed.len();
        for record in read_all(root, policy, &changed) {
            self.upsert(record);
        }
        self.symlinked_notes = scan.symlinked_notes;
        self.unusable_names = scan.unusable_names;
        self.set_listed_dirs(root, &scan.dirs, walk_started);
        self.files_checked = true;
        self.ignore_files = scan.ignore_files;
        Ok(reread)
    }

    /// Lists `folders` again (and every new subfolder they hold, whole): their files added or
    /// forgotten, the pages whose identity moved left in `out.to_read`, a vanished folder
    /// forgotten with its parent listed again, each listed folder's identity recorded. `Err`
    /// when a folder cannot be listed (an ignore file, an unreadable folder): only a walk can
    /// then say what the disk holds.
    pub(super) fn relist(
        &mut self,
        root: &Path,
        policy: &LoadedPolicy,
        folders: Vec<String>,
        out: &mut Relisting,
    ) -> std::result::Result<(), ()> {
        let mut queue: VecDeque<String> = folders.into();
        let mut listed_already = BTreeSet::new();
        while let Some(dir) = queue.pop_front() {
            if !listed_already.insert(dir.clone()) {
                continue;
            }
            let seen_at = now_ns();
            let Some(stamp) = super::dir_stamp(root, &dir) else {
                if dir.is_empty() {
                    return Err(());
                }
                // Vanished: its subtree is forgotten, and its parent's listing moved with it.
                out.forgotten += self.forget_subtree(&dir);
                let parent = parent_dir(&dir).to_string();
                if !listed_already.contains(&parent) {
                    self.dirs.insert(parent.clone(), None);
                    queue.push_back(parent);
                }
                continue;
            };
            out.listed += 1;
            let Ok(listing) = list_folder(root, policy, &dir) else { return Err(()) };
            for sub in &listing.subfolders {
                if !self.dirs.contains_key(sub) {
                    self.dirs.insert(sub.clone(), None);
                    queue.push_back(sub.clone());
                }
            }
            let listed_dirs: BTreeSet<String> = listing.subfolders.into_iter().collect();
            out.temps.extend(listing.temps);
            let symlinks = listing.symlinked_pages;
            let held: BTreeSet<VaultPath> = self.direct_files(&dir).into_iter().collect();
            let found = compare_listing(root, &listing.files, &held, |path| self.records.get(path));
            out.to_read.extend(found.to_read);
            for (path, kind) in listing.files {
                if kind.is_none() && self.records.contains_key(&path) {
                    self.remove(&path);
                    out.forgotten += 1;
                }
                self.add_file(path);
            }
            for path in found.gone {
                self.remove(&path);
                out.forgotten += 1;
            }
            // Only the folders under `dir` can be its subfolders: a range, not every folder.
            let under: Box<dyn Iterator<Item = &String>> = if dir.is_empty() {
                Box::new(self.dirs.keys())
            } else {
                Box::new(self.dirs.range(format!("{dir}/")..format!("{dir}0")).map(|(d, _)| d))
            };
            let vanished: Vec<String> =
                under.filter(|d| !d.is_empty() && parent_dir(d) == dir && !listed_dirs.contains(*d)).cloned().collect();
            for sub in vanished {
                out.forgotten += self.forget_subtree(&sub);
            }
            self.symlinked_notes.retain(|p| p.parent() != dir);
            self.symlinked_notes.extend(symlinks);
            self.symlinked_notes.sort();
            self.set_unusable_names_of(&dir, listing.unusable);
            self.dirs.insert(dir, Some((stamp, seen_at)));
        }
        Ok(())
    }
}

impl PartialModel {
    /// Brings a write's partial model up to `changes`: it only looks at entries. Anything more
    /// (a walk, a folder to list again) is past its view, kept for `in_view` to answer.
    pub fn apply(&mut self, root: &Path, policy: &LoadedPolicy, changes: &ChangeSet) -> Applied {
        let changes = match changes {
            ChangeSet::Unknown(reason) => {
                self.view.went_past(|| format!("a walk of the vault ({reason})"));
                return Applied::default();
            }
            ChangeSet::Known(changes) => changes,
        };
        let mut applied = Applied::default();
        let whole: Vec<String> = changes.whole_folders().map(str::to_string).collect();
        if !whole.is_empty() {
            self.view.went_past(|| format!("the listings of folders {whole:?}"));
            return applied;
        }
        if let Some(reason) = self.look_at_entries(root, policy, changes, &mut applied) {
            self.view.went_past(|| format!("a walk of the vault ({reason})"));
        }
        applied
    }
}

impl<V: Reach> Model<V> {
    /// Looks at each entry `changes` names (`look_at`), counting what it read into `applied`;
    /// at the first entry only a walk can settle, stops with the reason (the walk settles the
    /// rest).
    fn look_at_entries(&mut self, root: &Path, policy: &LoadedPolicy, changes: &Changes, applied: &mut Applied) -> Option<String> {
        for rel in changes.entries() {
            match self.look_at(root, policy, &rel) {
                Looked::Unchanged => {}
                Looked::Confirmed => applied.confirmed += 1,
                Looked::Reread { catalog_changed } => {
                    applied.reread += 1;
                    applied.catalog_changed |= catalog_changed;
                }
                Looked::Walk(reason) => return Some(reason),
            }
        }
        None
    }

    /// Re-reads one entry (vault-relative `rel`) when its stat identity moved. `Walk` when only
    /// a walk can tell: the entry was a folder holding known files (moved or removed) or is
    /// one, a name no vault path may hold (the walk judges where it is and what it hides; lint
    /// names it), or an ignore file (what it hides changed). Whatever the walk lists as a file
    /// is a file here too: a FIFO, socket or device that replaced a note stays a page (read as
    /// `note-unreadable`, as a fresh walk reports it) instead of vanishing from the model.
    fn look_at(&mut self, root: &Path, policy: &LoadedPolicy, rel: &str) -> Looked {
        let Ok(path) = VaultPath::parse_walked(rel) else { return Looked::Walk(format!("{rel:?} is a name no vault path may hold")) };
        if layout::IGNORE_FILES.contains(&path.file_name()) {
            return Looked::Walk(format!("{rel} is an ignore file"));
        }
        let meta = std::fs::symlink_metadata(path.under(root)).ok();
        if meta.as_ref().is_some_and(std::fs::Metadata::is_dir) || (meta.is_none() && self.has_under(rel)) {
            return Looked::Walk(format!("{rel} held a folder of the vault"));
        }
        // A file the model holds was walked when it came (its folder is not excluded, nothing
        // ignores it: an ignore file's change is a walk); only a new one is asked.
        let known = self.files.contains(&path) || self.records.contains_key(&path);
        let walked = meta.as_ref().is_some_and(scan::listed_as_file) && (known || scan::walked(root, policy, &path));
        let kind = scan::classify(policy, &path).filter(|_| walked);
        let symlink = meta.as_ref().is_some_and(|m| m.file_type().is_symlink());
        self.set_symlinked(&path, symlink && scan::classify(policy, &path).is_some());
        match kind {
            Some(kind) => {
                if self.records.get(&path).is_some_and(|r| r.is_current(kind, meta.as_ref().map(FileStamp::of))) {
                    return Looked::Unchanged;
                }
                self.reread_held(root, policy, &path, kind)
            }
            None if walked => {
                if self.files.contains(&path) && !self.records.contains_key(&path) {
                    // An attachment the model holds as one: nothing of it is read.
                    return Looked::Unchanged;
                }
                let previous = self.remove(&path);
                self.add_attachment(path);
                Looked::Reread { catalog_changed: previous.is_some_and(|p| matches!(p.kind, PageKind::Catalog | PageKind::RootIndex)) }
            }
            None => {
                let previous = self.remove(&path);
                if previous.is_none() && !known {
                    return Looked::Unchanged;
                }
                let catalog_page = previous.as_ref().is_some_and(|p| matches!(p.kind, PageKind::Catalog | PageKind::RootIndex));
                Looked::Reread { catalog_changed: catalog_page }
            }
        }
    }

    /// Reads `path` again against the record the model holds of it, if any: `Confirmed` when
    /// its bytes are those the record was analysed from (the engine's own page after a write:
    /// its stamp alone is new, nothing is parsed), else the record replaced by a full read.
    fn reread_held(&mut self, root: &Path, policy: &LoadedPolicy, path: &VaultPath, kind: PageKind) -> Looked {
        match super::reread_record(root, path, kind, policy, self.records.get(path)) {
            Reread::Same(stamp) => {
                if let Some(held) = self.records.get_mut(path) {
                    held.stamp = Some(stamp);
                }
                Looked::Confirmed
            }
            Reread::Read(record) => {
                let hash = record.content_hash;
                let previous = self.upsert(*record);
                Looked::Reread { catalog_changed: is_page(kind) && previous.is_none_or(|p| p.content_hash != hash) }
            }
        }
    }
}

#[cfg(test)]
mod tests;
