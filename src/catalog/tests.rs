//! Unit tests for catalog planning and paging.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::{CatalogState, DirState, partial_tree, tree};
use crate::inventory::{Inventory, NoteRecord};
use crate::note::path::VaultPath;
use crate::policy::LoadedPolicy;
use crate::scan::PageKind;

/// (children as (name, notes), note paths) of `dir` in a tree.
fn view(tree: &super::CatalogTree<'_>, dir: &str) -> (Vec<(String, usize)>, Vec<String>, Option<usize>) {
    let input = tree.input(dir);
    (
        input.children.iter().map(|c| (c.name.clone(), c.notes)).collect(),
        input.notes.iter().map(|r| r.path.as_str().to_string()).collect(),
        tree.counts.get(dir).copied(),
    )
}

fn record(path: &str, valid: bool) -> NoteRecord {
    let mut record = NoteRecord::empty(VaultPath::parse_walked(path).unwrap(), PageKind::Note);
    record.valid = valid;
    record
}

proptest! {
    /// The write path's partial tree (one seek per child subtree, counts kept by the
    /// inventory) shows every directory exactly as the full tree does, after inserts and
    /// removals of valid and invalid notes at any depth.
    #[test]
    fn partial_tree_equals_the_full_tree(
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
        for d in &dirs {
            let partial = partial_tree(&inventory, &BTreeSet::from([d.clone()]));
            prop_assert_eq!(view(&partial, d), view(&full, d), "{}", d);
        }
    }
}

#[test]
fn a_partial_state_merges_into_the_whole() {
    let state = |dirs: &[(&str, &str)], root: &str| CatalogState {
        renderer: super::render::RENDERER_VERSION,
        dirs: dirs
            .iter()
            .map(|(d, digest)| (d.to_string(), DirState { input_digest: digest.to_string(), page_hashes: vec![digest.to_string()] }))
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
