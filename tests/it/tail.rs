//! Writes served from the journal's tail (generation `<active>+<seq>`): searchable at once,
//! the same answers as the on-disk generation that folds them, visible to other processes, and
//! never re-applied over an outside edit that a later sync picked up.

use std::process::Command;

use paravault::Vault;
use paravault::retrieval::{SearchParams, SyncParams};

use crate::support::{ingest, note, vault};

/// (generation id, [(path, score)]) of an FTS search.
fn answers(vault: &Vault, query: &str) -> (String, Vec<(String, f64)>) {
    let envelope = vault.search(&SearchParams::fts(query, 20)).unwrap();
    let hits = envelope.results.iter().map(|r| (r.source.path.clone(), r.score)).collect();
    (envelope.index_provenance.generation_id, hits)
}

fn synced(fixture: &str) -> (tempfile::TempDir, Vault) {
    let (dir, vault) = vault(fixture);
    vault.generate_index().unwrap();
    vault.sync_vault(&SyncParams::default()).unwrap();
    (dir, vault)
}

fn edit(vault: &Vault, root: &std::path::Path, path: &str, from: &str, to: &str) {
    let text = std::fs::read_to_string(root.join(path)).unwrap();
    let proposal = vault.propose_memory_change(path, &text.replace(from, to), None, None).unwrap();
    let map = serde_json::from_value(serde_json::to_value(&proposal).unwrap()).unwrap();
    vault.apply_memory_change(&map, true).unwrap();
}

#[test]
fn a_write_is_searchable_at_once_in_the_tail_generation() {
    let (dir, vault) = synced(&format!("-- 01_Projects/hub.md --\n{}", note("Project", "Hub", "x\n")));
    let active = paravault::search::generation::read_active(dir.path()).unwrap().unwrap();
    let receipt = vault.ingest_note(&ingest("01_Projects/alpha", "zebracorn grazing [[hub]]")).unwrap().to_value();
    let (generation, hits) = answers(&vault, "zebracorn");
    assert_eq!(hits.iter().map(|h| h.0.as_str()).collect::<Vec<_>>(), ["01_Projects/alpha.md"]);
    assert_eq!(generation, format!("{active}+{}", receipt["seq"]), "the tail generation is the active one plus the intent");
    assert_eq!(receipt["search_generation"], generation.as_str(), "the receipt names the generation that holds the write");
    assert_eq!(paravault::search::generation::read_active(dir.path()).unwrap().unwrap(), active, "no on-disk generation per write");
    // An edit replaces the note's documents in the next tail generation.
    edit(&vault, dir.path(), "01_Projects/alpha.md", "zebracorn", "quokka");
    assert!(answers(&vault, "zebracorn").1.is_empty());
    assert_eq!(answers(&vault, "quokka").1.len(), 1);
}

#[test]
fn the_tail_answers_like_the_generation_that_folds_it() {
    let words = ["comet orbit", "comet tail dust", "orbit perihelion", "nebula", "dust ion"];
    let fixture = format!(
        "-- 01_Projects/hub.md --\n{}-- 03_Resources/old.md --\n{}-- .paravault/policy.yaml --\nsearch:\n  tail_writes_max: 8\n",
        note("Project", "Hub", "comet and orbit basics\n"),
        note("Resource", "Old", "an old comet note about dust\n")
    );
    let (dir, vault) = synced(&fixture);
    for (i, text) in words.iter().enumerate() {
        vault.ingest_note(&ingest(&format!("01_Projects/n{i}"), &format!("{text} [[hub]]"))).unwrap();
    }
    edit(&vault, dir.path(), "01_Projects/n1.md", "comet tail dust", "ion tail only");
    edit(&vault, dir.path(), "03_Resources/old.md", "an old comet note about dust", "nebula notes");
    let queries = ["comet", "orbit", "dust", "nebula", "ion", "tail", "hub"];
    let tail: Vec<_> = queries.iter().map(|q| answers(&vault, q)).collect();
    assert!(tail.iter().all(|(g, _)| g.contains('+')), "served from the tail: {:?}", tail[0].0);
    // A sync publishes the same changes as an on-disk generation (one segment on the same base,
    // as a fold does): identical documents, so identical scores.
    vault.sync_vault(&SyncParams::default()).unwrap();
    let folded: Vec<_> = queries.iter().map(|q| answers(&vault, q)).collect();
    for ((q, (tg, t)), (fg, f)) in queries.iter().zip(&tail).zip(&folded) {
        assert!(!fg.contains('+'), "after the sync no tail remains");
        assert_eq!(t.len(), f.len(), "{q}: {tg} vs {fg}");
        for ((tp, ts), (fp, fs)) in t.iter().zip(f) {
            assert_eq!(tp, fp, "{q}");
            assert!((ts - fs).abs() < 1e-6, "{q}: {tp} scores {ts} in the tail, {fs} folded");
        }
    }
    // A full rebuild finds the same notes.
    vault.sync_vault(&SyncParams { force_rebuild: true, ..Default::default() }).unwrap();
    for (q, (_, t)) in queries.iter().zip(&tail) {
        let mut rebuilt: Vec<String> = answers(&vault, q).1.into_iter().map(|h| h.0).collect();
        let mut expected: Vec<String> = t.iter().map(|h| h.0.clone()).collect();
        rebuilt.sort();
        expected.sort();
        assert_eq!(rebuilt, expected, "{q}");
    }
}

#[test]
fn the_writer_folds_the_tail_every_tail_writes_max_writes() {
    let fixture =
        format!("-- 01_Projects/hub.md --\n{}-- .paravault/policy.yaml --\nsearch:\n  tail_writes_max: 3\n", note("Project", "Hub", "x\n"));
    let (dir, vault) = synced(&fixture);
    let first = paravault::search::generation::read_active(dir.path()).unwrap().unwrap();
    let mut generations = Vec::new();
    for i in 0..7 {
        let receipt = vault.ingest_note(&ingest(&format!("01_Projects/w{i}"), &format!("word{i} [[hub]]"))).unwrap().to_value();
        generations.push(receipt["search_generation"].as_str().unwrap().to_string());
        // The report reads the journal on from where it last ended, across the folds that
        // empty it: the count is the writes since the last fold.
        assert_eq!(vault.server_info().unwrap().vault.tail_writes, (i + 1) % 3, "after write {}", i + 1);
    }
    // Writes 1, 2 are tail generations of the first; write 3 folds; 4, 5 on the fold; 6 folds.
    let folds: Vec<usize> = generations.iter().enumerate().filter(|(_, g)| !g.contains('+')).map(|(i, _)| i + 1).collect();
    assert_eq!(folds, [3, 6], "{generations:?}");
    assert!(generations[0].starts_with(&format!("{first}+")));
    let active = paravault::search::generation::read_active(dir.path()).unwrap().unwrap();
    let manifest = paravault::search::generation::read_manifest(dir.path(), &active).unwrap();
    assert_eq!(active, generations[5]);
    assert_eq!(manifest.covers_seq, 6, "the fold covers every intent up to it");
    for i in 0..7 {
        assert_eq!(answers(&vault, &format!("word{i}")).1.len(), 1, "word{i}");
    }
    // The doctor report names the on-disk generation and the one write served from its tail.
    let info = vault.server_info().unwrap();
    assert_eq!(info.vault.active_generation.as_deref(), Some(active.as_str()));
    assert_eq!(info.vault.tail_writes, 1);
    // The fold emptied the journal: only the write after it remains.
    let journal = std::fs::metadata(dir.path().join(".paravault/journal.log")).unwrap().len();
    assert!(journal < 16 * 1024, "journal of {journal} bytes after a fold");
}

#[test]
fn other_processes_search_the_tail() {
    let (dir, vault) = synced(&format!("-- 01_Projects/hub.md --\n{}", note("Project", "Hub", "x\n")));
    let receipt = vault.ingest_note(&ingest("01_Projects/alpha", "zebracorn grazing [[hub]]")).unwrap().to_value();
    // The writer still holds its deferred checkpoint; another process reads the journal.
    assert!(vault.has_deferred_writes());
    let out = Command::new(env!("CARGO_BIN_EXE_paravault"))
        .arg("--vault")
        .arg(dir.path())
        .args(["search", "zebracorn", "--mode", "fts", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let envelope: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(envelope["results"][0]["source"]["path"], "01_Projects/alpha.md");
    assert_eq!(envelope["index_provenance"]["generation_id"], receipt["search_generation"]);
}

#[test]
fn a_sync_after_an_outside_edit_wins_over_the_tail() {
    let (dir, vault) = synced(&format!("-- 01_Projects/hub.md --\n{}", note("Project", "Hub", "x\n")));
    vault.ingest_note(&ingest("01_Projects/alpha", "zebracorn grazing [[hub]]")).unwrap();
    let path = dir.path().join("01_Projects/alpha.md");
    let edited = std::fs::read_to_string(&path).unwrap().replace("zebracorn", "quokka");
    std::fs::write(&path, &edited).unwrap();
    vault.sync_vault(&SyncParams::default()).unwrap();
    assert!(answers(&vault, "zebracorn").1.is_empty());
    assert_eq!(answers(&vault, "quokka").1.len(), 1);
    // Another process opening the vault (recovery runs) keeps the outside edit.
    let other = Vault::open(dir.path(), Default::default()).unwrap();
    drop(other);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), edited);
    assert_eq!(answers(&vault, "quokka").1.len(), 1);
}

/// The sequence numbers of the journal's intents without a `Done` record.
fn not_done(root: &std::path::Path) -> Vec<u64> {
    let records = paravault::store::journal::read_committed_since(root, None).unwrap().map(|read| read.records).unwrap_or_default();
    let done: Vec<u64> = records.iter().filter(|r| r.done().is_some()).map(|r| r.seq()).collect();
    records.iter().filter(|r| r.is_intent() && !done.contains(&r.seq())).map(|r| r.seq()).collect()
}

#[test]
fn another_live_process_leaves_a_deferred_write_to_its_owner_and_finishes_it_once_the_owner_is_gone() {
    let (dir, a) = synced(&format!("-- 01_Projects/hub.md --\n{}", note("Project", "Hub", "x\n")));
    let b = a.reopened().unwrap();
    // b's first lock finishes whatever is pending; from its second on it may leave some.
    b.ingest_note(&ingest("01_Projects/first", "first of b [[hub]]")).unwrap();
    b.checkpoint_pending().unwrap();
    assert!(not_done(dir.path()).is_empty());

    let of_a = a.ingest_note(&ingest("01_Projects/alpha", "zebracorn grazing [[hub]]")).unwrap().to_value();
    let seq_a = of_a["seq"].as_u64().unwrap();
    assert!(a.has_deferred_writes());
    let of_b = b.ingest_note(&ingest("01_Projects/beta", "quokka [[alpha]]")).unwrap().to_value();
    let seq_b = of_b["seq"].as_u64().unwrap();
    assert!(seq_b > seq_a);
    // b caught up with a's note (its search finds it) and left a's intent to a.
    assert_eq!(not_done(dir.path()), [seq_a, seq_b], "b did not finish a's deferred write");
    assert_eq!(answers(&b, "zebracorn").1.iter().map(|h| h.0.as_str()).collect::<Vec<_>>(), ["01_Projects/alpha.md"]);
    a.checkpoint_pending().unwrap();
    b.checkpoint_pending().unwrap();
    assert!(not_done(dir.path()).is_empty(), "each owner finished its own");

    // An owner that is gone without its checkpoint (killed: here, never dropped).
    let c = a.reopened().unwrap();
    let of_c = c.ingest_note(&ingest("01_Projects/gamma", "wombat [[hub]]")).unwrap().to_value();
    let seq_c = of_c["seq"].as_u64().unwrap();
    std::mem::forget(c);
    b.ingest_note(&ingest("01_Projects/delta", "first look")).unwrap();
    b.checkpoint_pending().unwrap();
    assert_eq!(not_done(dir.path()), [seq_c], "left to its owner at first");
    std::thread::sleep(paravault::write::LEFT_TO_OWNER_FOR + std::time::Duration::from_millis(200));
    b.ingest_note(&ingest("01_Projects/epsilon", "second look")).unwrap();
    b.checkpoint_pending().unwrap();
    assert!(not_done(dir.path()).is_empty(), "finished once its owner had had its time");
    assert!(std::fs::read_to_string(dir.path().join("01_Projects/gamma.md")).unwrap().contains("wombat"));
    drop(a);
}
