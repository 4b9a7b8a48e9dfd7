//! Unit tests of the specdocs core: blob hashes, references, the envelope, plan editing
//! (with property tests: IDs unique, never reused, display paths consistent) and ledger rows.

use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::envelope::{BatchStatus, ItemOutcome, envelope};
use super::ledger::canonical_row;
use super::plan::{PlanBody, PlanEditOperation, Tier, apply_edit, guard};
use super::{blob_hash, reference_stem};

#[test]
fn blob_hash_is_the_git_object_id() {
    // `printf 'hello\n' | git hash-object --stdin` and the empty blob.
    assert_eq!(blob_hash(b"hello\n"), "ce013625030ba8dba906f756967f9e9ca394464a");
    assert_eq!(blob_hash(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
}

#[test]
fn references_name_a_stem_in_every_form() {
    for form in [
        "2026-07-11-a-research",
        "2026-07-11-a-research.md",
        "x/y/2026-07-11-a-research.md",
        "[[2026-07-11-a-research]]",
        "[[2026-07-11-a-research|alias]]",
    ] {
        assert_eq!(reference_stem(form), "2026-07-11-a-research", "{form}");
    }
}

#[test]
fn envelope_counts_exactly_and_samples_failures_first() {
    let mut items: Vec<ItemOutcome<Value>> = (0..30).map(|i| ItemOutcome::success("created", json!({"index": i}), false)).collect();
    items.push(ItemOutcome::failure(json!({"index": 30})));
    let out = serde_json::to_value(envelope(items, 5)).unwrap();
    assert_eq!(out["status"], "mixed");
    assert_eq!(out["counts"], json!({"created": 30, "failed": 1}));
    assert_eq!(out["submitted"], 31);
    assert_eq!(out["items_omitted"], 25);
    assert_eq!(out["items"].as_array().map(Vec::len), Some(6));
    assert!(out["items"].as_array().is_some_and(|i| i.iter().any(|r| r["index"] == 30)));
    assert_eq!(envelope(vec![ItemOutcome::failure(json!({}))], 5).status, BatchStatus::Failed);
    assert_eq!(envelope(vec![ItemOutcome::success("updated", json!({}), false)], 5).status, BatchStatus::Ok);
}

fn l1() -> PlanBody {
    PlanBody::parse("# Plan\n\n## Steps\n\n- [ ] S01: first — scope: a.rs\n- [x] S02: second — scope: b.rs\n", Tier::L1, BTreeSet::new())
}

#[test]
fn removed_ids_are_never_reused_and_insert_never_renumbers() {
    let mut body = l1();
    assert_eq!(body.remove("S02"), Ok("S02".into()));
    assert_eq!(body.add("third", "c.rs", None), Ok("S03".into()));
    assert_eq!(body.insert("zero", "z.rs", Some("S01"), None), Ok("S04".into()));
    let ids: Vec<String> = body.steps().into_iter().map(|s| s.canonical_id).collect();
    assert_eq!(ids, ["S04", "S01", "S03"]);
    assert!(body.find("S02").unwrap_err().contains("retired"));
}

#[test]
fn display_paths_follow_the_tier() {
    let body = PlanBody::parse(
        "## W01: wave\n\n### P01: phase\n\n- [ ] S01: a — scope: x\n\n### P02: next\n\n- [ ] S02: b — scope: y\n",
        Tier::L3,
        BTreeSet::new(),
    );
    let paths: Vec<String> = body.steps().into_iter().map(|s| s.display_path).collect();
    assert_eq!(paths, ["W01.P01.S01", "W01.P02.S02"]);
    assert_eq!(body.find("W01.P02.S02").map(|s| s.canonical_id), Ok("S02".into()));
    assert!(body.find("P09.S02").is_err());
}

#[test]
fn set_state_is_explicit_and_reports_no_change() {
    let mut body = l1();
    let line = body.find("S01").unwrap().line;
    assert!(body.set_state_at(line, true).unwrap());
    assert!(!body.set_state_at(line, true).unwrap());
    assert!(body.find("S09").is_err());
    assert_eq!(body.totals(), (2, 2, 100.0, None));
}

#[test]
fn the_guard_refuses_lost_ids_duplicates_and_revived_ones() {
    let before = l1();
    let mut lost = before.clone();
    lost.lines.retain(|l| !l.contains("S02"));
    assert!(guard(&before, &lost, &BTreeSet::new()).unwrap_err().contains("S02"));
    assert!(guard(&before, &lost, &BTreeSet::from(["S02".to_string()])).is_ok());
    let mut twice = before.clone();
    twice.lines.push("- [ ] S01: again".into());
    assert!(guard(&before, &twice, &BTreeSet::new()).unwrap_err().contains("twice"));
    let mut retired = before.clone();
    retired.retired.insert("S03".into());
    let mut revived = retired.clone();
    revived.lines.push("- [ ] S03: back".into());
    assert!(guard(&retired, &revived, &BTreeSet::new()).unwrap_err().contains("retired"));
}

#[test]
fn ledger_rows_are_validated_and_canonical() {
    assert_eq!(canonical_row("A:src/a.rs"), Ok("A: src/a.rs".into()));
    assert_eq!(canonical_row("R:old.rs->new.rs"), Ok("R: old.rs -> new.rs".into()));
    for bad in ["X:a", "A:", "R:a", "A: a\nB", "added a"] {
        assert!(canonical_row(bad).is_err(), "{bad:?}");
    }
}

#[derive(Debug, Clone)]
enum Op {
    Add,
    InsertBefore(usize),
    InsertAfter(usize),
    Remove(usize),
    Edit(usize),
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Add),
        (0usize..8).prop_map(Op::InsertBefore),
        (0usize..8).prop_map(Op::InsertAfter),
        (0usize..8).prop_map(Op::Remove),
        (0usize..8).prop_map(Op::Edit)
    ]
}

proptest! {
    #[test]
    fn plan_edit_ids_are_unique_never_reused_and_paths_consistent(ops in proptest::collection::vec(op_strategy(), 1..40), tier in 1usize..4) {
        let (tier, text) = match tier {
            1 => (Tier::L1, "## Steps\n\n- [ ] S01: a — scope: x\n"),
            2 => (Tier::L2, "## P01: one\n\n- [ ] S01: a — scope: x\n\n## P02: two\n"),
            _ => (Tier::L3, "## W01: w\n\n### P01: one\n\n- [ ] S01: a — scope: x\n"),
        };
        let mut body = PlanBody::parse(text, tier, BTreeSet::new());
        let mut ever: BTreeSet<String> = body.steps().into_iter().map(|s| s.canonical_id).collect();
        let mut removed = BTreeSet::new();
        for op in ops {
            let before = body.clone();
            let live: Vec<String> = body.steps().into_iter().map(|s| s.canonical_id).collect();
            let pick = |i: usize| live.get(i % live.len().max(1)).cloned();
            let edit = match op {
                Op::Add => PlanEditOperation { operation: "add".into(), action: Some("act".into()), scope: Some("s".into()), ..Default::default() },
                Op::InsertBefore(i) => PlanEditOperation { operation: "insert".into(), action: Some("act".into()), scope: Some("s".into()), before: pick(i), ..Default::default() },
                Op::InsertAfter(i) => PlanEditOperation { operation: "insert".into(), action: Some("act".into()), scope: Some("s".into()), after: pick(i), ..Default::default() },
                Op::Remove(i) => PlanEditOperation { operation: "remove".into(), step_id: pick(i), ..Default::default() },
                Op::Edit(i) => PlanEditOperation { operation: "edit".into(), step_id: pick(i), action: Some("changed".into()), ..Default::default() },
            };
            let mut removed_now = BTreeSet::new();
            if let Ok((status, id)) = apply_edit(&mut body, &edit, &mut removed_now) {
                if status == "created" {
                    prop_assert!(!ever.contains(&id), "ID {} reused", id);
                    ever.insert(id);
                }
                prop_assert!(guard(&before, &body, &removed_now).is_ok());
            } else {
                prop_assert_eq!(&before, &body, "a failed operation changed the plan");
            }
            removed.extend(removed_now);
            let steps = body.steps();
            let ids: BTreeSet<String> = steps.iter().map(|s| s.canonical_id.clone()).collect();
            prop_assert_eq!(ids.len(), steps.len(), "duplicate IDs");
            prop_assert!(ids.is_disjoint(&removed), "a retired ID is live");
            for step in &steps {
                prop_assert!(step.display_path.ends_with(&step.canonical_id));
                let depth = step.display_path.split('.').count();
                let max_depth = match tier { Tier::L1 => 1, Tier::L2 => 2, _ => 3 };
                prop_assert!(depth <= max_depth);
                prop_assert_eq!(body.find(&step.display_path).map(|s| s.canonical_id), Ok(step.canonical_id.clone()));
            }
            // Round trip: rendering and parsing again sees the same steps.
            let again = PlanBody::parse(&body.render(), tier, body.retired.clone());
            prop_assert_eq!(again.steps().len(), steps.len());
        }
    }
}
