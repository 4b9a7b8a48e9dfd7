//! Unit tests for catalog planning and paging.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::{CatalogState, DirState, tree};
use crate::inventory::{Inventory, NoteRecord};
use crate::note::path::VaultPath;
use crate::policy::LoadedPolicy;
use crate::scan::PageKind;

/// A directory's entries as (children as (name, notes), note paths in order).
fn view(entries: &render::DirEntries) -> (Vec<(String, usize)>, Vec<String>) {
    (
        entries.children.iter().map(|c| (c.name.clone(), c.notes)).collect(),
        entries.notes.iter().map(|n| n.path.as_str().to_string()).collect(),
    )
}

fn record(path: &str, valid: bool) -> NoteRecord {
    let mut record = NoteRecord::empty(VaultPath::parse_walked(path).unwrap(), PageKind::Note);
    record.valid = valid;
    record
}

proptest! {
    /// A write's scan of a directory's entries (one seek per child subtree, counts kept by the
    /// inventory) shows every directory exactly as the full tree does, after inserts and
    /// removals of valid and invalid notes at any depth.
    #[test]
    fn scanned_entries_equal_the_full_trees(
        notes in proptest::collection::vec((proptest::collection::vec(0u8..3, 0..4), 0u8..4, any::<bool>()), 1..40),
        removed in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let policy = LoadedPolicy::load(dir.path()).unwrap();
        let mut inventory = Inventory::default();
        let mut paths = Vec::new();
        for (dirs, name, valid) in &notes {
            let mut path = String::from("01_Projects");
            for d in dirs {
                path.push_str(&format!("/d{d}"));
            }
            path.push_str(&format!("/n{name}.md"));
            inventory.upsert(record(&path, *valid));
            paths.push(path);
        }
        for index in &removed {
            inventory.remove(&VaultPath::parse_walked(index.get(&paths).as_str()).unwrap());
        }
        let full = tree(&inventory, &policy);
        let mut dirs: BTreeSet<String> = full.dirs();
        dirs.extend(["01_Projects/d0/d1".to_string(), "01_Projects/d2/d2/d2".to_string()]);
        let rows = RowMemo::default();
        for d in &dirs {
            let scanned = super::entries::scan(&inventory, d, 150, &rows);
            prop_assert_eq!(view(&scanned), view(&full.entries(d, 150, &rows)), "{}", d);
            prop_assert_eq!(inventory.counts.valid_per_dir.get(d.as_str()), full.counts.get(d.as_str()), "{}", d);
        }
    }

    /// The entries a long-lived process keeps beside the whole model, caught up by the paths
    /// changed since its last plan, are the ones a scan of the model reads: every row, its
    /// text and key score, in order, after random batches of notes added (valid or not, at
    /// any depth, titled so that they sort anywhere), edited, removed and moved, catalog pages
    /// written, and a reload of the model.
    #[test]
    fn kept_entries_are_the_scanned_ones(
        batches in proptest::collection::vec(proptest::collection::vec((0u8..5, (proptest::collection::vec(0u8..3, 0..3), 0u8..6), any::<u8>(), any::<prop::sample::Index>()), 1..6), 1..14),
        reload_at in 0usize..20,
    ) {
        let memo = super::CatalogMemo::default();
        let mut inventory = Inventory::default();
        let path_of = |(dirs, name): &(Vec<u8>, u8)| {
            let mut path = String::from("03_Resources");
            for d in dirs {
                path.push_str(&format!("/d{d}"));
            }
            path.push_str(&format!("/n{name}.md"));
            path
        };
        let titled = |path: &str, t: u8, valid: bool| {
            let mut record = record(path, valid);
            record.meta.title = Some(format!("{} {t}", if t.is_multiple_of(3) { "Alpha" } else { "beta" }));
            record.meta.description = Some("d".repeat(usize::from(t)));
            record.content_hash = *blake3::hash(format!("{path}\0{t}\0{valid}").as_bytes()).as_bytes();
            record
        };
        let dirs = ["03_Resources", "03_Resources/d0", "03_Resources/d1", "03_Resources/d1/d2", "03_Resources/d2/d0", "03_Resources/d0/d0"];
        for (round, batch) in batches.iter().enumerate() {
            for (op, at, t, pick) in batch {
                let path = path_of(at);
                let known: Vec<VaultPath> = inventory.records.keys().cloned().collect();
                match op {
                    0 | 1 => {
                        inventory.upsert(titled(&path, *t, *op == 0 || t % 5 != 0));
                    }
                    2 if !known.is_empty() => {
                        inventory.remove(pick.get(&known));
                    }
                    3 if !known.is_empty() => {
                        let mut moved = inventory.remove(pick.get(&known)).unwrap();
                        moved.path = VaultPath::parse_walked(&path).unwrap();
                        inventory.upsert(moved);
                    }
                    _ => {
                        let page = VaultPath::parse_walked(&format!("{}/_index.md", VaultPath::parse_walked(&path).unwrap().parent())).unwrap();
                        inventory.upsert(NoteRecord::empty(page, PageKind::Catalog));
                    }
                }
            }
            if round == reload_at {
                // A reload is a new model: nothing kept may be taken from the old one.
                let records: Vec<NoteRecord> = inventory.records.values().cloned().collect();
                inventory = Inventory::default();
                inventory.origin = crate::inventory::changes::next_origin();
                for record in records {
                    inventory.upsert(record);
                }
            }
            let mut kept = memo.caught_up(&inventory, 150);
            for d in dirs {
                if !inventory.counts.valid_per_dir.contains_key(d) && round % 2 == 0 {
                    continue;
                }
                let scanned = super::entries::scan(&inventory, d, 150, &RowMemo::default());
                let kept = kept.entries(d);
                prop_assert_eq!(format!("{kept:?}"), format!("{scanned:?}"), "{} after round {}", d, round);
            }
        }
    }
}

#[test]
fn a_partial_state_merges_into_the_whole() {
    let state = |dirs: &[(&str, &str)], root: &str| CatalogState {
        renderer: super::render::LAYOUT_VERSION,
        dirs: dirs
            .iter()
            .map(|(d, digest)| {
                (d.to_string(), DirState { input_digest: digest.to_string(), page_hashes: vec![digest.to_string()], ..Default::default() })
            })
            .collect(),
        root_digest: root.into(),
    };
    let mut whole = state(&[("a", "1"), ("a/b", "2"), ("c", "3")], "r1");
    // "a/b" was planned and now has no catalog; "a" was re-rendered; "c" was not planned.
    whole.merge(state(&[("a", "9")], "r2"), &BTreeSet::from(["a".to_string(), "a/b".to_string()]));
    assert_eq!(whole, state(&[("a", "9"), ("c", "3")], "r2"));
    // A partial state of another renderer version replaces everything.
    let mut newer = state(&[("x", "5")], "r3");
    newer.renderer += 1;
    whole.merge(newer.clone(), &BTreeSet::from(["x".to_string()]));
    assert_eq!(whole, newer);
}

// ---- Page boundaries (issue 52): stable, deterministic, every page within the budget ----

use super::render::{self, DirEntries, DirInput, RowMemo};

const PAGE_MAX: usize = 32 * 1024;

/// splitmix64: a seeded generator, so every run tries the same positions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A folder name of 6 to 30 characters.
    fn name(&mut self) -> String {
        let len = 6 + self.below(25);
        (0..len).map(|_| (b'a' + self.below(26) as u8) as char).collect()
    }
}

fn children(names: &[String]) -> impl Iterator<Item = (&str, usize)> {
    names.iter().map(|name| (name.as_str(), 1 + name.len() * 7 % 97))
}

fn note(dir: &str, name: &str, description: &str) -> NoteRecord {
    let mut record = record(&format!("{dir}/{name}.md"), true);
    record.meta.title = Some(name.to_string());
    record.meta.note_type = Some("Resource".into());
    record.meta.description = Some(description.to_string());
    record.meta.tags = vec!["alpha".into(), "beta".into()];
    record
}

fn render(dir: &str, names: &[String], notes: &[&NoteRecord]) -> Vec<String> {
    let entries = DirEntries::new(dir, children(names), notes.iter().copied(), 150, &RowMemo::default());
    render::render_dir(&DirInput { dir, entries: &entries }, PAGE_MAX).unwrap()
}

/// The rows of a page in order (folder rows and note headings), without its header.
fn rows(page: &str) -> Vec<&str> {
    page.lines().filter(|l| l.starts_with("- [") || l.starts_with("### ")).collect()
}

fn sorted_names(rng: &mut Rng, n: usize) -> Vec<String> {
    let names: BTreeSet<String> = (0..n).map(|_| rng.name()).collect();
    names.into_iter().collect()
}

/// Two renders of the same entries give the same bytes; every page is within the budget, the
/// pages hold every entry once and in order, and say which page of how many they are.
#[test]
fn pages_are_deterministic_within_the_budget_and_hold_every_entry_in_order() {
    let mut rng = Rng(52);
    let names = sorted_names(&mut rng, 2_500);
    let dir = "03_Resources";
    let descriptions: Vec<String> = (0..300).map(|i| format!("Note {i} {}", "x".repeat(rng.below(150)))).collect();
    let records: Vec<NoteRecord> = (0..300).map(|i| note(dir, &format!("n{i:04}"), &descriptions[i])).collect();
    let refs: Vec<&NoteRecord> = records.iter().collect();
    let pages = render(dir, &names, &refs);
    assert_eq!(pages, render(dir, &names, &refs), "the same entries render the same bytes");
    assert!(pages.len() > 2, "{} pages", pages.len());
    for (n, page) in pages.iter().enumerate() {
        assert!(page.len() <= PAGE_MAX, "page {} is {} bytes", n + 1, page.len());
        assert!(page.contains(&format!("x-index-page: {}\nx-index-pages: {}\n", n + 1, pages.len())), "{page}");
    }
    let all: Vec<&str> = pages.iter().flat_map(|p| rows(p)).collect();
    let entries = DirEntries::new(dir, children(&names), refs.iter().copied(), 150, &RowMemo::default());
    let one_page = render::render_dir(&DirInput { dir, entries: &entries }, usize::MAX / 2).unwrap();
    assert_eq!(one_page.len(), 1);
    assert_eq!(all, rows(&one_page[0]), "every entry once, in order");
}

/// A directory that fits one page is one page (as greedy filling made it); one row more than
/// fits makes two or more pages; an empty directory is one page that says so.
#[test]
fn a_directory_that_fits_is_one_page() {
    let mut rng = Rng(7);
    let names = sorted_names(&mut rng, 2_000);
    let dir = "03_Resources";
    // The largest prefix of the names that fits one page.
    let fits = |n: usize| render(dir, &names[..n], &[]).len() == 1;
    let (mut lo, mut hi) = (1, names.len());
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if fits(mid) { lo = mid } else { hi = mid }
    }
    let page = &render(dir, &names[..lo], &[])[0];
    assert!(page.contains("x-index-pages: 1\n") && !page.contains("Next:"), "{page}");
    assert_eq!(rows(page).len(), lo);
    // Nearly full: the one page holds close to the budget (no early cut).
    assert!(page.len() > PAGE_MAX - 200, "{} bytes", page.len());
    assert!(render(dir, &names[..lo + 1], &[]).len() >= 2);
    let empty = render(dir, &[], &[]);
    assert_eq!(empty.len(), 1);
    assert!(empty[0].contains("_This folder has no catalogued notes._\n"));
}

/// The pages of `before` and `after` with the same page count: how many differ.
fn changed_pages(before: &[String], after: &[String]) -> Option<usize> {
    (before.len() == after.len()).then(|| before.iter().zip(after).filter(|(a, b)| a != b).count())
}

/// Issue 52: a folder row inserted into or removed from a folder of 2,500 folders changes
/// exactly one page's bytes whenever the page count stays (greedy filling rewrote every page
/// after the row), at many positions from a seeded generator.
#[test]
fn one_folder_in_or_out_of_2500_changes_one_page() {
    let mut rng = Rng(2_500);
    let names = sorted_names(&mut rng, 2_500);
    let dir = "03_Resources";
    let base = render(dir, &names, &[]);
    assert!(base.len() >= 6, "{} pages", base.len());
    let (mut same_count, mut recounted) = (0, 0);
    for trial in 0..400 {
        let mut changed = names.clone();
        if trial % 2 == 0 {
            let name = rng.name();
            let at = changed.binary_search(&name).unwrap_or_else(|i| i);
            changed.insert(at, name);
        } else {
            changed.remove(rng.below(changed.len()));
        }
        let after = render(dir, &changed, &[]);
        assert!(after.iter().all(|p| p.len() <= PAGE_MAX));
        match changed_pages(&base, &after) {
            Some(n) => {
                assert_eq!(n, 1, "trial {trial}: {n} pages changed");
                same_count += 1;
            }
            None => recounted += 1,
        }
    }
    // The page count rarely moves (then every page's x-index-pages does).
    assert!(recounted * 20 < same_count, "{recounted} of 400 changes moved the page count");
}

/// The same for notes: a note in or out of a folder of 2,500 notes, and an edited description
/// (a row's bytes change, its key does not) changes only its own page.
#[test]
fn one_note_in_or_out_or_edited_changes_one_page() {
    let mut rng = Rng(4);
    let dir = "02_Areas/big";
    let make = |rng: &mut Rng, i: usize| note(dir, &format!("{}-{i}", rng.name()), &"d".repeat(rng.below(150)));
    let mut records: Vec<NoteRecord> = (0..2_500).map(|i| make(&mut rng, i)).collect();
    records.sort_by(|a, b| a.path.cmp(&b.path));
    let refs: Vec<&NoteRecord> = records.iter().collect();
    let base = render(dir, &[], &refs);
    assert!(base.len() > 10, "{} pages", base.len());
    let (mut same_count, mut recounted) = (0, 0);
    for trial in 0..150 {
        let extra = make(&mut rng, 10_000 + trial);
        let mut edited = records[rng.below(records.len())].clone();
        edited.meta.description = Some("e".repeat(rng.below(150)));
        let mut changed = refs.clone();
        match trial % 3 {
            0 => {
                let at = changed.binary_search_by(|r| r.path.cmp(&extra.path)).unwrap_or_else(|i| i);
                changed.insert(at, &extra);
            }
            1 => {
                changed.remove(rng.below(changed.len()));
            }
            _ => {
                let at = changed.binary_search_by(|r| r.path.cmp(&edited.path)).unwrap();
                changed[at] = &edited;
            }
        }
        let after = render(dir, &[], &changed);
        assert!(after.iter().all(|p| p.len() <= PAGE_MAX));
        match changed_pages(&base, &after) {
            Some(n) => {
                assert!(n == 1 || (trial % 3 == 2 && n == 0), "trial {trial}: {n} pages changed");
                same_count += 1;
            }
            None => recounted += 1,
        }
    }
    assert!(recounted * 10 < same_count, "{recounted} of 150 changes moved the page count");
}

proptest! {
    /// Over random row sizes and key scores: the pages partition the entries in order, each
    /// within the budget; one page exactly when everything fits; and a change that keeps the
    /// rung keeps every page but the one it touches (removing a row, or changing a row's size:
    /// the boundaries are the rung's, and only the touched row's own can come or go).
    #[test]
    fn page_starts_partition_within_the_budget_and_move_locally(
        rows in proptest::collection::vec((1usize..4_000, any::<u64>(), any::<bool>()), 0..400),
        budget in 4_000usize..40_000,
        touched in any::<prop::sample::Index>(),
        new_size in 1usize..4_000,
    ) {
        let sizes: Vec<usize> = rows.iter().map(|r| r.0).collect();
        let scores: Vec<(u64, u32)> = rows.iter().map(|r| (r.1, if r.2 { render::NOTE_WEIGHT } else { render::FOLDER_WEIGHT })).collect();
        let pages = |sizes: &[usize], scores: &[(u64, u32)]| -> Vec<std::ops::Range<usize>> {
            let starts = render::page_starts(sizes, scores, budget);
            starts.iter().enumerate().map(|(n, &s)| s..starts.get(n + 1).copied().unwrap_or(sizes.len())).collect()
        };
        let base = pages(&sizes, &scores);
        prop_assert_eq!(base[0].start, 0);
        prop_assert_eq!(base.last().unwrap().end, sizes.len());
        for pair in base.windows(2) {
            prop_assert!(pair[0].end == pair[1].start && pair[0].start < pair[0].end);
        }
        for page in &base {
            prop_assert!(sizes[page.clone()].iter().sum::<usize>() <= budget || page.len() == 1);
        }
        let total: usize = sizes.iter().sum();
        prop_assert_eq!(base.len() == 1, total <= budget || sizes.len() <= 1);
        if sizes.is_empty() {
            return Ok(());
        }
        let rung = render::page_rung(&sizes, &scores, budget);
        let i = touched.index(sizes.len());
        // The entries of each page, by original index.
        let key = |ranges: &[std::ops::Range<usize>], map: &dyn Fn(usize) -> usize| -> Vec<Vec<usize>> {
            ranges.iter().map(|r| r.clone().map(map).collect()).collect()
        };
        let before = key(&base, &|j| j);
        // Removing row i.
        let (mut s2, mut c2) = (sizes.clone(), scores.clone());
        s2.remove(i);
        c2.remove(i);
        if s2.iter().all(|s| *s <= budget) {
            let after = key(&pages(&s2, &c2), &|j| if j >= i { j + 1 } else { j });
            if after.len() == before.len() && render::page_rung(&s2, &c2, budget) == rung && !s2.is_empty() {
                let differ = before.iter().zip(&after).filter(|(a, b)| a != b).count();
                prop_assert_eq!(differ, 1);
            }
        }
        // Changing row i's size (its text), never its key.
        if new_size <= budget {
            let mut s3 = sizes.clone();
            s3[i] = new_size;
            let after3 = pages(&s3, &scores);
            if after3.len() == base.len() {
                prop_assert_eq!(after3, base);
            }
        }
    }
}

// ---- A write's plan renders only the pages whose entries changed (issue 52) ----

/// A change to the model: a note added, removed, edited in place (its title and description,
/// so its row's size changes and it may sort elsewhere) or moved.
#[derive(Debug, Clone)]
enum Change {
    Add(Place, u8, u8),
    Remove(prop::sample::Index),
    Edit(prop::sample::Index, u8, u8),
    Move(prop::sample::Index, Place),
}

/// Where a note lives: `03_Resources` itself, `03_Resources/t{k}` or `03_Resources/t{k}/u{m}`.
#[derive(Debug, Clone)]
struct Place(Option<(u8, Option<u8>)>, u16);

impl Place {
    fn path(&self) -> String {
        let dir = match self.0 {
            None => "03_Resources".to_string(),
            Some((k, None)) => format!("03_Resources/t{k}"),
            Some((k, Some(m))) => format!("03_Resources/t{k}/u{m}"),
        };
        format!("{dir}/n{}.md", self.1)
    }
}

fn place() -> impl Strategy<Value = Place> {
    (proptest::option::weighted(0.8, (0u8..90, proptest::option::weighted(0.2, 0u8..3))), 0u16..400).prop_map(|(at, name)| Place(at, name))
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => (place(), any::<u8>(), any::<u8>()).prop_map(|(p, t, d)| Change::Add(p, t, d)),
        2 => any::<prop::sample::Index>().prop_map(Change::Remove),
        2 => (any::<prop::sample::Index>(), any::<u8>(), any::<u8>()).prop_map(|(i, t, d)| Change::Edit(i, t, d)),
        1 => (any::<prop::sample::Index>(), place()).prop_map(|(i, p)| Change::Move(i, p)),
    ]
}

/// A valid note whose row shows title `t` and a description of `d` characters; its content
/// hash follows both, as a real note's does.
fn titled(path: &str, t: u8, d: u8) -> NoteRecord {
    let mut record = record(path, true);
    record.meta.title = Some(format!("Title {t}"));
    record.meta.description = Some("d".repeat(usize::from(d) % 160));
    record.content_hash = *blake3::hash(format!("{path}\0{t}\0{d}").as_bytes()).as_bytes();
    record
}

type Disk = std::collections::BTreeMap<VaultPath, Vec<u8>>;

fn apply(disk: &mut Disk, plan: &super::CatalogPlan) {
    for (path, bytes) in &plan.writes {
        disk.insert(path.clone(), bytes.clone());
    }
    for path in &plan.deletes {
        disk.remove(path);
    }
}

/// A plan's page writes (path and bytes, sorted), deletions and conflicts.
type Effects = (Vec<(VaultPath, Vec<u8>)>, Vec<VaultPath>, Vec<VaultPath>);

fn effects(plan: &super::CatalogPlan) -> Effects {
    let mut writes = plan.writes.clone();
    writes.sort();
    let mut deletes = plan.deletes.clone();
    deletes.sort();
    (writes, deletes, plan.conflicts.clone())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    /// Over random folder trees and change sequences, a write's plan in a long-lived process
    /// (the remembered state of its earlier plans merged in, so pages whose fingerprints are
    /// unchanged are neither rendered nor read) makes exactly the page writes, deletions and
    /// conflicts of a plan that renders every page of the folders and compares each with the
    /// disk: also when a boundary moves or the page count changes. After each, a full
    /// regeneration from nothing finds nothing to write: the disk holds the full render.
    #[test]
    fn a_plan_of_the_changed_pages_writes_what_the_full_render_writes(
        initial in proptest::collection::vec((place(), any::<u8>(), any::<u8>()), 20..160),
        changes in proptest::collection::vec(change(), 1..25),
        page_max in 4_096usize..9_000,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut policy = LoadedPolicy::load(dir.path()).unwrap();
        policy.policy.limits.catalog_page_bytes_max = page_max;
        let memo = super::CatalogMemo::default();
        let mut inventory = Inventory::default();
        for (at, t, d) in &initial {
            inventory.upsert(titled(&at.path(), *t, *d));
        }
        let mut disk = Disk::new();
        let first = super::plan(&inventory, &policy, &CatalogState::default(), None, &|p| disk.get(p).cloned(), &memo).unwrap();
        apply(&mut disk, &first);
        let mut state = first.state;
        let (mut rendered, mut rendered_full) = (0, 0);
        for change in changes {
            let notes: Vec<VaultPath> = inventory.records.keys().cloned().collect();
            let mut touched = Vec::new();
            match change.clone() {
                Change::Add(at, t, d) => {
                    let record = titled(&at.path(), t, d);
                    touched.push(record.path.clone());
                    inventory.upsert(record);
                }
                Change::Remove(i) if !notes.is_empty() => {
                    let path = i.get(&notes).clone();
                    inventory.remove(&path);
                    touched.push(path);
                }
                Change::Edit(i, t, d) if !notes.is_empty() => {
                    let path = i.get(&notes).clone();
                    inventory.upsert(titled(path.as_str(), t, d));
                    touched.push(path);
                }
                Change::Move(i, to) if !notes.is_empty() => {
                    let mut moved = inventory.remove(i.get(&notes)).unwrap();
                    touched.push(moved.path.clone());
                    moved.path = VaultPath::parse_walked(&to.path()).unwrap();
                    touched.push(moved.path.clone());
                    inventory.upsert(moved);
                }
                _ => {}
            }
            let dirs: BTreeSet<String> = touched.iter().flat_map(super::affected_dirs).collect();
            let incremental = super::plan(&inventory, &policy, &state, Some(&dirs), &|p| disk.get(p).cloned(), &memo).unwrap();
            let full = super::plan(&inventory, &policy, &CatalogState::default(), Some(&dirs), &|p| disk.get(p).cloned(), &super::CatalogMemo::default()).unwrap();
            prop_assert_eq!(effects(&incremental), effects(&full), "{:?} in {:?}", change, dirs);
            rendered += incremental.pages_rendered;
            rendered_full += full.pages_rendered;
            apply(&mut disk, &incremental);
            state.merge(incremental.state, &dirs);
            let again = super::plan(&inventory, &policy, &CatalogState::default(), None, &|p| disk.get(p).cloned(), &super::CatalogMemo::default()).unwrap();
            prop_assert!(again.writes.is_empty() && again.deletes.is_empty(), "{:?}: {:?} {:?}", change, again.writes.iter().map(|w| &w.0).collect::<Vec<_>>(), again.deletes);
        }
        prop_assert!(rendered <= rendered_full, "{} of {} pages rendered", rendered, rendered_full);
    }
}

/// The plan above is not vacuous: a note in a new folder among 300 renders and compares only
/// the page its row lands in (or every page, where the page count moved), and writes what the
/// full render writes.
#[test]
fn a_new_folder_among_300_renders_only_its_page() {
    let dir = tempfile::tempdir().unwrap();
    let mut policy = LoadedPolicy::load(dir.path()).unwrap();
    policy.policy.limits.catalog_page_bytes_max = 4_096;
    let memo = super::CatalogMemo::default();
    let mut inventory = Inventory::default();
    for k in 0..300 {
        inventory.upsert(titled(&format!("03_Resources/t{k}/n0.md"), 1, 1));
    }
    let mut disk = Disk::new();
    let first = super::plan(&inventory, &policy, &CatalogState::default(), None, &|p| disk.get(p).cloned(), &memo).unwrap();
    apply(&mut disk, &first);
    let mut state = first.state;
    let pages = state.dirs["03_Resources"].page_hashes.len();
    assert!(pages >= 4, "{pages} pages");
    let (mut one_page, mut recounted) = (0, 0);
    for k in 300..340 {
        let record = titled(&format!("03_Resources/t{k}/n0.md"), 1, 1);
        let dirs = super::affected_dirs(&record.path);
        inventory.upsert(record);
        let incremental = super::plan(&inventory, &policy, &state, Some(&dirs), &|p| disk.get(p).cloned(), &memo).unwrap();
        let full = super::plan(
            &inventory,
            &policy,
            &CatalogState::default(),
            Some(&dirs),
            &|p| disk.get(p).cloned(),
            &super::CatalogMemo::default(),
        )
        .unwrap();
        assert_eq!(effects(&incremental), effects(&full), "t{k}");
        let now = incremental.state.dirs["03_Resources"].page_hashes.len();
        // The new folder's own page, and `03_Resources`'s: one, or all where the count moved.
        if now == state.dirs["03_Resources"].page_hashes.len() {
            assert_eq!(incremental.pages_rendered, 2, "t{k}");
            one_page += 1;
        } else {
            assert_eq!(incremental.pages_rendered, 1 + now, "t{k}");
            recounted += 1;
        }
        apply(&mut disk, &incremental);
        state.merge(incremental.state, &dirs);
    }
    assert!(one_page > recounted * 3, "{one_page} writes kept the page count, {recounted} moved it");
}

/// The input digest is persisted in `catalog-state.json`: its bytes are those it was always
/// computed from (an update per field; now one buffer), so a kept state stays valid.
#[test]
fn the_input_digest_is_the_one_persisted_states_hold() {
    let records: Vec<NoteRecord> = (0..30).map(|i| titled(&format!("03_Resources/n{i}.md"), i, i * 7)).collect();
    let mut names: Vec<String> = (0..40).map(|i| format!("topic{i}")).collect();
    names.sort();
    let entries = DirEntries::new("03_Resources", children(&names), records.iter(), 150, &RowMemo::default());
    let mut hasher = blake3::Hasher::new();
    hasher.update(&render::RENDERER_VERSION.to_le_bytes());
    hasher.update(&render::LAYOUT_VERSION.to_le_bytes());
    hasher.update(b"03_Resources");
    for child in &entries.children {
        hasher.update(format!("\0d{}\0{}", child.name, child.notes).as_bytes());
    }
    for note in &entries.notes {
        hasher.update(b"\0n");
        hasher.update(note.path.as_str().as_bytes());
        hasher.update(note.content_hash());
    }
    let input = DirInput { dir: "03_Resources", entries: &entries };
    assert_eq!(super::input_digest(&input), crate::hex::encode(hasher.finalize().as_bytes()));
}

/// No page passes the budget, whatever the budget: a middle page (links to the page before
/// and after) included. Layout 2 reserved a last page's header and let a middle page pass by
/// one link at some budgets.
#[test]
fn no_page_passes_the_budget_whatever_it_is() {
    let mut rng = Rng(3);
    let names = sorted_names(&mut rng, 120);
    let dir = "03_Resources";
    let records: Vec<NoteRecord> = (0..60).map(|i| note(dir, &format!("n{i:03}"), &"x".repeat(rng.below(150)))).collect();
    let entries = DirEntries::new(dir, children(&names), records.iter(), 150, &RowMemo::default());
    let mut middle_pages = 0;
    for budget in (1_200..6_000).step_by(7) {
        let pages = render::render_dir(&DirInput { dir, entries: &entries }, budget).unwrap();
        middle_pages += pages.len().saturating_sub(2);
        for (n, page) in pages.iter().enumerate() {
            assert!(page.len() <= budget, "page {} of {} is {} bytes, over {budget}", n + 1, pages.len(), page.len());
        }
    }
    assert!(middle_pages > 1_000, "{middle_pages} middle pages");
}
