//! A directory's catalog entries, read from the model (`scan`) or, in a long-lived process,
//! kept beside the whole model and caught up by the paths it changed (`CatalogMemo`): a write
//! into a folder of 2,500 folders takes the one row it changed, instead of building 2,500 rows
//! again (issue 52). What is kept is a derivative of the model: brought up to it through the
//! model's change log (`Inventory::catch_up_from`) before every use, and equal to a scan of it
//! (`catalog::tests::kept_entries_are_the_scanned_ones`).

use std::collections::HashMap;
use std::ops::Bound;

use super::is_catalogued;
use super::render::{ChildEntry, DirEntries, NoteEntry, RowMemo};
use crate::inventory::{CatchUp, Inventory, ModelView, NoteRecord};
use crate::note::path::VaultPath;

/// The entries of `dir` as the model holds them: its subfolders holding a valid note, from
/// the subtree counters (no record below a child is consulted: a write's partial model holds
/// none), and its own catalogued notes, by a range scan that skips each child subtree with one
/// seek. O(entries directly in `dir`), never O(subtree).
pub(crate) fn scan(inventory: &dyn ModelView, dir: &str, description_chars: usize, rows: &RowMemo) -> DirEntries {
    let Some(total) = inventory.counts().valid_per_dir.get(dir) else { return DirEntries::default() };
    let children: Vec<(&str, usize)> = inventory.counts().valid_children(dir).collect();
    // Valid notes directly in the directory: its subtree's less its children's. With none the
    // scan is skipped: it would seek past every child subtree to find nothing.
    let below: usize = children.iter().map(|(_, notes)| notes).sum();
    let prefix_len = dir.len() + 1;
    let end = VaultPath::bound(format!("{dir}0"));
    let mut from = Bound::Included(VaultPath::bound(format!("{dir}/")));
    let mut notes: Vec<&NoteRecord> = Vec::new();
    while *total > below
        && let Some((path, record)) = inventory.records().range((from.clone(), Bound::Excluded(end.clone()))).next()
    {
        match path.as_str()[prefix_len..].split_once('/') {
            None => {
                if is_catalogued(record) {
                    notes.push(record);
                }
                from = Bound::Excluded(record.path.clone());
            }
            // Skip the child's whole subtree: its next sibling key starts after `child/…`.
            Some((child, _)) => from = Bound::Included(VaultPath::bound(format!("{}0", &path.as_str()[..prefix_len + child.len()]))),
        }
    }
    let names = children.into_iter().map(|(child, notes)| (&child[prefix_len..], notes));
    DirEntries::new(dir, names, notes, description_chars, rows)
}

/// Rows a long-lived process keeps in its directories' entries before it starts over: as
/// many as the note rows it memoises.
const ENTRIES_KEPT: usize = super::render::ROW_MEMO_MAX;

/// What the catalog planner keeps between a process's plans: rendered note rows, and the
/// entries of each directory a write planned, caught up with the whole model before each use.
#[derive(Debug, Default)]
pub struct CatalogMemo {
    pub(crate) rows: RowMemo,
    kept: std::sync::Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    /// The model version every kept directory is current with.
    key: Option<(u64, u64)>,
    /// The description cut the note rows were rendered with.
    description_chars: usize,
    dirs: HashMap<String, DirEntries>,
    /// Rows held in `dirs`.
    rows_held: usize,
}

impl CatalogMemo {
    /// The kept entries, caught up with `inventory` (the whole model): call once per plan,
    /// then `entries` for each directory.
    pub(crate) fn caught_up<'m>(&'m self, inventory: &'m Inventory, description_chars: usize) -> KeptEntries<'m> {
        let mut kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if kept.description_chars != description_chars {
            kept.forget();
            kept.description_chars = description_chars;
        }
        match inventory.catch_up_from(kept.key) {
            CatchUp::Current => {}
            CatchUp::Whole => kept.forget(),
            CatchUp::Changed(paths) => {
                for path in paths {
                    kept.refresh(inventory, path, &self.rows);
                }
            }
        }
        kept.key = Some(inventory.key());
        KeptEntries { kept, memo: self, inventory }
    }
}

/// The kept entries of a plan, current with the model they were caught up with.
pub(crate) struct KeptEntries<'m> {
    kept: std::sync::MutexGuard<'m, Kept>,
    memo: &'m CatalogMemo,
    inventory: &'m Inventory,
}

impl KeptEntries<'_> {
    /// The entries of `dir`, read from the model the first time.
    pub(crate) fn entries(&mut self, dir: &str) -> &DirEntries {
        let kept = &mut *self.kept;
        if !kept.dirs.contains_key(dir) {
            let entries = scan(self.inventory, dir, kept.description_chars, &self.memo.rows);
            if kept.rows_held + entries.len() > ENTRIES_KEPT {
                kept.dirs.clear();
                kept.rows_held = 0;
            }
            kept.rows_held += entries.len();
            kept.dirs.insert(dir.to_string(), entries);
        }
        &kept.dirs[dir]
    }
}

impl Kept {
    fn forget(&mut self) {
        self.dirs.clear();
        self.rows_held = 0;
    }

    /// Brings every kept directory holding `path` up to the model: the row of `path` in its
    /// own folder, and the folder row of the subfolder holding it in each folder above.
    fn refresh(&mut self, inventory: &Inventory, path: &VaultPath, rows: &RowMemo) {
        for dir in path.folders() {
            let Some(entries) = self.dirs.get_mut(dir) else { continue };
            let below = &path.as_str()[dir.len() + 1..];
            let change = match below.split_once('/') {
                None => {
                    let record = inventory.records().get(path).filter(|r| is_catalogued(r));
                    refresh_note(entries, path, record, self.description_chars, rows)
                }
                Some((child, _)) => {
                    let notes = inventory.counts().valid_per_dir.get(&path.as_str()[..dir.len() + 1 + child.len()]).copied();
                    refresh_child(entries, dir, child, notes.unwrap_or(0))
                }
            };
            self.rows_held = self.rows_held.saturating_add_signed(change);
        }
    }
}

/// Puts subfolder `name`'s row in place (`notes` valid notes below it; none: no row).
/// Returns the change in rows.
fn refresh_child(entries: &mut DirEntries, dir: &str, name: &str, notes: usize) -> isize {
    match entries.children.binary_search_by(|child| child.name.as_str().cmp(name)) {
        Ok(i) if notes == 0 => {
            entries.children.remove(i);
            -1
        }
        Ok(i) => {
            if entries.children[i].notes != notes {
                entries.children[i] = ChildEntry::new(dir, name, notes);
            }
            0
        }
        Err(_) if notes == 0 => 0,
        Err(i) => {
            entries.children.insert(i, ChildEntry::new(dir, name, notes));
            1
        }
    }
}

/// Puts note `path`'s row in place (`record`: the catalogued note now; none: no row).
/// Returns the change in rows.
fn refresh_note(
    entries: &mut DirEntries,
    path: &VaultPath,
    record: Option<&NoteRecord>,
    description_chars: usize,
    rows: &RowMemo,
) -> isize {
    let mut change = 0;
    if let Some(i) = entries.notes.iter().position(|note| note.path == *path) {
        entries.notes.remove(i);
        change -= 1;
    }
    if let Some(record) = record {
        let entry = NoteEntry::new(record, description_chars, rows);
        let at = entries.notes.partition_point(|note| note.order() < entry.order());
        entries.notes.insert(at, entry);
        change += 1;
    }
    change
}
