//! Tests of a write's model: a lookup past a write's partial model is `Err(Overrun)`, and the
//! one place that meets it (`with_write_model`) plans the write again on the whole model.

// Fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeSet;

use crate::inventory::{Inventory, Overrun};
use crate::note::path::VaultPath;
use crate::store::{durable, layout};
use crate::vault::Vault;

fn note(title: &str) -> String {
    format!("---\ntype: Area\ntitle: {title}\ndescription: About {title}\ntimestamp: 2026-01-01T00:00:00Z\n---\nbody\n")
}

#[test]
fn a_lookup_past_the_partial_model_is_an_overrun_and_the_write_plans_again_on_the_whole_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    drop(Vault::init(root, Default::default()).expect("init"));
    std::fs::write(root.join("02_Areas/area.md"), note("Area")).expect("note");
    // Past the racy window: every file and folder reads as settled.
    std::thread::sleep(std::time::Duration::from_millis(50));
    let vault = Vault::open(root, Default::default()).expect("open");
    let index = layout::join(root, layout::INVENTORY_INDEX);
    vault
        .with_inventory(|whole| {
            durable::write_keyed_cache(root, &index, |t| crate::inventory_cache::keyed::fill(whole, &vault.policy().digest, t))
        })
        .expect("whole load")
        .expect("keyed copy filled");
    let expected = Inventory::load(root, vault.policy()).expect("whole load").direct_records("02_Areas").expect("a whole model answers");
    assert!(expected.iter().any(|path| path.as_str() == "02_Areas/area.md"), "{expected:?}");
    drop(vault);

    // A one-shot write into 01_Projects: its partial model does not hold 02_Areas.
    let one_shot = crate::state::VaultOptions { lifetime: crate::state::Lifetime::OneShot, ..Default::default() };
    let vault = Vault::open(root, one_shot).expect("open");
    let touched = VaultPath::parse("01_Projects/x.md").expect("path");
    let mut asked: Vec<(bool, Result<Vec<VaultPath>, Overrun>)> = Vec::new();
    let planned = vault
        .with_write_model(&[(touched, Some("x"))], BTreeSet::new, |inventory| {
            let answer = inventory.direct_records("02_Areas");
            asked.push((inventory.as_whole().is_none(), answer.clone()));
            answer
        })
        .expect("planned");
    assert_eq!(asked.len(), 2, "planned once on each model: {asked:?}");
    assert!(asked[0].0 && matches!(&asked[0].1, Err(Overrun { asked: what }) if what.contains("02_Areas")), "{asked:?}");
    assert!(!asked[1].0, "planned again on the whole model");
    assert_eq!(planned, expected, "the whole model's answer, as a whole load gives it");
}
