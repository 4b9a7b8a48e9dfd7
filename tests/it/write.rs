//! The write transaction: operations, preconditions, idempotency, proposals, and the fault
//! sweep (fail the k-th filesystem mutation for every k).

use std::collections::BTreeMap;

use paravault::Error;
use paravault::store::faults;
use paravault::write::operations::{IngestRequest, SynthesizeRequest, proposal_id};
use serde_json::Value;

use crate::support::{ingest, note, snapshot_tree, today, vault};

fn statuses(root: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(root.join(".paravault/receipts.jsonl")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["status"].as_str().unwrap().to_string()).collect()
}

/// The vault's files minus the engine's own journal, receipts and lock.
fn user_visible(root: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    snapshot_tree(root)
        .into_iter()
        .filter(|(p, _)| {
            !matches!(
                p.as_str(),
                ".paravault/journal.log"
                    | ".paravault/journal.heads"
                    | ".paravault/receipts.jsonl"
                    | ".paravault/writer.lock"
                    | ".paravault/policy.parsed.bin"
            )
        })
        .collect()
}

#[test]
fn ingest_writes_note_catalogs_log_and_a_chained_receipt() {
    let (dir, vault) = vault("-- log.md --\n# Log\n");
    let receipt = vault.ingest_note(&ingest("01_Projects/alpha", "Body text.")).unwrap().to_value();
    assert_eq!(receipt["status"], "ok");
    assert_eq!(receipt["seq"], 1);
    assert_eq!(receipt["path"], "01_Projects/alpha.md");
    let text = std::fs::read_to_string(dir.path().join("01_Projects/alpha.md")).unwrap();
    assert_eq!(receipt["after_sha256"], paravault::write::sha256_hex(text.as_bytes()));
    assert!(text.contains("okf_version: \"0.2\"") && text.contains("write_policy: agent-proposed"));
    assert!(!receipt.to_string().contains("Body text"), "receipts are content-free");
    assert!(std::fs::read_to_string(dir.path().join("01_Projects/_index.md")).unwrap().contains("### Title of 01_Projects/alpha"));
    assert!(std::fs::read_to_string(dir.path().join("log.md")).unwrap().contains("ingest | Created Title of 01_Projects/alpha"));
    let second = vault
        .synthesize_session(&SynthesizeRequest {
            name: "06_Daily_Logs/2026-06-01".into(),
            title: "Session".into(),
            description: "What happened".into(),
            content: "We worked on [[alpha]].".into(),
            note_type: "Daily Log".into(),
            related: vec!["01_Projects/alpha.md".into()],
            owner: Some("agent".into()),
            ..Default::default()
        })
        .unwrap()
        .to_value();
    assert_eq!(second["seq"], 2);
    assert_eq!(second["operation"], "synthesize.session");
    let history = vault.read_memory_history(10, 0).unwrap();
    assert_eq!(history.len(), 2);
    assert_eq!(vault.read_memory_history(10, 1).unwrap().len(), 1);
    assert!(vault.verify_history().unwrap().ok);
    assert!(!vault.lint().unwrap().blocking);
}

#[test]
fn refusals_change_nothing_but_record_an_aborted_receipt() {
    let (dir, vault) = vault(&format!("-- 01_Projects/existing.md --\n{}", note("Project", "Existing", "x\n")));
    vault.generate_index().unwrap();
    let before = user_visible(dir.path());
    let exists = vault.ingest_note(&ingest("01_Projects/existing", "x")).unwrap_err();
    assert!(matches!(exists, Error::AlreadyExists { .. }), "{exists}");
    let gate = vault.ingest_note(&ingest("01_Projects/broken", "see [[nowhere]]")).unwrap_err();
    assert!(matches!(&gate, Error::GateRejected { findings, .. } if findings[0].rule == "broken-link"), "{gate}");
    let outside = vault.ingest_note(&ingest("../escape", "x")).unwrap_err();
    assert!(matches!(outside, Error::PathRefused { .. }));
    let bad_type = vault.ingest_note(&IngestRequest { note_type: "project".into(), ..ingest("01_Projects/t", "x") }).unwrap_err();
    assert!(matches!(bad_type, Error::InvalidContent { .. }), "{bad_type}");
    let no_folder = vault.ingest_note(&ingest("01_Projects/missing-dir/x", "x")).unwrap_err();
    assert!(matches!(no_folder, Error::InvalidArgument { .. }), "{no_folder}");
    assert_eq!(user_visible(dir.path()), before);
    assert_eq!(statuses(dir.path()), ["aborted", "aborted", "aborted"], "validated requests that fail get aborted receipts");
    assert!(vault.verify_history().unwrap().ok);
    // The refused note is not in the model either: a later valid write sees a clean vault.
    vault.ingest_note(&ingest("01_Projects/fine", "[[existing]]")).unwrap();
    assert!(!vault.lint().unwrap().findings.iter().any(|f| f.path.contains("broken")));
}

#[test]
fn one_bad_note_elsewhere_does_not_lock_out_writes() {
    let expired = "---\ntype: Project\ntitle: Old\ndescription: D\ntimestamp: 2020-01-01T00:00:00Z\nexpiry: 2020-02-01\n---\n[[nowhere]] ![[img.png]]\n";
    let (_dir, vault) = vault(&format!("-- 01_Projects/old.md --\n{expired}"));
    assert!(vault.lint().unwrap().blocking);
    vault.ingest_note(&ingest("01_Projects/new", "fresh")).unwrap();
}

#[test]
fn preconditions_and_idempotency_keys() {
    let (dir, vault) = vault("");
    let keyed = IngestRequest { idempotency_key: Some("k1".into()), ..ingest("01_Projects/a", "one") };
    let first = vault.ingest_note(&keyed).unwrap().to_value();
    // Same key, same mutation: the original receipt (the note exists, so only replay can succeed).
    let text = std::fs::read_to_string(dir.path().join("01_Projects/a.md")).unwrap();
    let proposal = vault.propose_memory_change("01_Projects/a.md", &text, None, None).unwrap();
    assert_eq!(proposal.before_sha256, proposal.after_sha256);
    // Same key, different mutation: a typed conflict.
    let other = IngestRequest { idempotency_key: Some("k1".into()), ..ingest("01_Projects/b", "two") };
    assert!(matches!(vault.ingest_note(&other).unwrap_err(), Error::IdempotencyConflict { .. }));
    assert!(!dir.path().join("01_Projects/b.md").exists());
    // The conflict is recorded like every refusal before the commit point: an aborted receipt
    // naming the phase, the code and the key, and nothing of the content.
    let last = vault.read_memory_history(1000, 0).unwrap().pop().unwrap();
    assert_eq!((last["status"].as_str(), last["phase"].as_str()), (Some("aborted"), Some("check")), "{last}");
    assert_eq!((last["error_code"].as_str(), last["idempotency_key"].as_str()), (Some("idempotency_conflict"), Some("k1")), "{last}");
    assert!(vault.verify_history().unwrap().ok);
    // expected_sha256 that no longer matches: a typed conflict, nothing written.
    let stale = IngestRequest { expected_sha256: Some("0".repeat(64)), ..ingest("01_Projects/a", "three") };
    assert!(matches!(vault.ingest_note(&stale).unwrap_err(), Error::PreconditionFailed { .. }));
    assert_eq!(std::fs::read_to_string(dir.path().join("01_Projects/a.md")).unwrap(), text);
    assert_eq!(first["seq"], 1);
}

#[test]
fn proposals_are_content_addressed_like_power_and_need_approval() {
    let (dir, vault) = vault("");
    let content = "---\ntype: Project\ntitle: \"Ünïcode\"\ndescription: d\ntimestamp: 2026-01-01T00:00:00Z\n---\nbody\n";
    let proposal = vault.propose_memory_change("01_Projects/x.md", content, None, None).unwrap();
    // The id P.O.W.E.R. computes for the same payload (json.dumps sort_keys, compact, ensure_ascii=False).
    assert_eq!(proposal.proposal_id, "3caabb4d3b32636c2c04f15766b75a76d36523c80a8c5e07a9faaf89e30c2f02");
    assert_eq!(proposal_id(&proposal.path, &proposal.before_sha256, &proposal.after_sha256, content), proposal.proposal_id);
    assert!(!dir.path().join("01_Projects/x.md").exists(), "proposing never writes the note");
    let as_map: BTreeMap<String, Value> = serde_json::from_value(serde_json::to_value(&proposal).unwrap()).unwrap();
    assert!(matches!(vault.apply_memory_change(&as_map, false).unwrap_err(), Error::ApprovalRequired { .. }));
    let receipt = vault.apply_memory_change(&as_map, true).unwrap().to_value();
    assert_eq!(receipt["operation"], "memory.apply");
    assert_eq!(receipt["proposal_id"], proposal.proposal_id.as_str());
    assert_eq!(std::fs::read_to_string(dir.path().join("01_Projects/x.md")).unwrap(), content);
    // Replay returns the original receipt, byte for byte.
    assert_eq!(vault.apply_memory_change(&as_map, true).unwrap().to_value(), receipt);
    // Tampered and never-stored proposals are refused before any write.
    let mut tampered = as_map.clone();
    tampered.insert("content".into(), Value::String(content.replace("body", "evil")));
    assert!(matches!(vault.apply_memory_change(&tampered, true).unwrap_err(), Error::ProposalInvalid { .. }));
    let other = "---\ntype: Project\ntitle: Y\ndescription: d\ntimestamp: 2026-01-01T00:00:00Z\n---\nnever stored\n";
    let mut unstored = as_map.clone();
    unstored.insert("content".into(), Value::String(other.into()));
    unstored.insert("after_sha256".into(), Value::String(paravault::write::sha256_hex(other.as_bytes())));
    let id = proposal_id("01_Projects/x.md", &proposal.before_sha256, &paravault::write::sha256_hex(other.as_bytes()), other);
    unstored.insert("proposal_id".into(), Value::String(id));
    let err = vault.apply_memory_change(&unstored, true).unwrap_err();
    assert!(err.to_string().contains("not durable"), "{err}");
    // A stale proposal (the note changed since) is refused.
    let next = content.replace("body", "second");
    let p2 = vault.propose_memory_change("01_Projects/x.md", &next, None, None).unwrap();
    let p3 = vault.propose_memory_change("01_Projects/x.md", &content.replace("body", "third"), None, None).unwrap();
    let m2: BTreeMap<String, Value> = serde_json::from_value(serde_json::to_value(&p2).unwrap()).unwrap();
    let m3: BTreeMap<String, Value> = serde_json::from_value(serde_json::to_value(&p3).unwrap()).unwrap();
    vault.apply_memory_change(&m2, true).unwrap();
    assert!(matches!(vault.apply_memory_change(&m3, true).unwrap_err(), Error::PreconditionFailed { .. }));
    assert!(vault.verify_history().unwrap().ok);
}

/// Fails the k-th filesystem mutation of one ingest, for every k. Before the commit point the
/// vault is byte-identical plus one aborted receipt; after it, the transaction completes.
#[test]
fn fault_sweep_every_mutation_of_an_ingest() {
    // The first write of a vault publishes its first generation; later ones are served from
    // the journal's tail (checkpoint deferred to the vault's drop); every tail_writes_max-th
    // folds the tail into an on-disk generation.
    for scenario in [SweepScenario::FirstPublish, SweepScenario::Tail, SweepScenario::Fold] {
        fault_sweep(scenario);
    }
}

#[derive(Debug, Clone, Copy)]
enum SweepScenario {
    FirstPublish,
    Tail,
    Fold,
}

/// A fresh vault set up so that the next ingest takes `scenario`'s route.
fn sweep_vault(scenario: SweepScenario) -> (tempfile::TempDir, paravault::Vault) {
    let mut fixture = format!("-- log.md --\n# Log\n-- 01_Projects/hub.md --\n{}", note("Project", "Hub", "x\n"));
    if matches!(scenario, SweepScenario::Fold) {
        fixture.push_str("-- .paravault/policy.yaml --\nsearch:\n  tail_writes_max: 2\n");
    }
    let (dir, vault) = vault(&fixture);
    vault.generate_index().unwrap();
    if !matches!(scenario, SweepScenario::FirstPublish) {
        vault.sync_vault(&Default::default()).unwrap();
    }
    if matches!(scenario, SweepScenario::Fold) {
        vault.ingest_note(&ingest("01_Projects/first", "[[hub]]")).unwrap();
    }
    (dir, vault)
}

/// Whether the generation readers are served now holds a document of `path`.
fn served_holds(root: &std::path::Path, vault: &paravault::Vault, path: &str) -> bool {
    let served = paravault::search::generation::acquire(root, vault.policy()).unwrap().generation;
    let term = tantivy::Term::from_field_text(served.fields.path, path);
    let query = tantivy::query::TermQuery::new(term, tantivy::schema::IndexRecordOption::Basic);
    served.searcher().unwrap().search(&query, &tantivy::collector::Count).unwrap() > 0
}

fn fault_sweep(scenario: SweepScenario) {
    // Count the mutations of a clean run (the vault's drop included: it checkpoints).
    let (_d, v) = sweep_vault(scenario);
    faults::arm_fail_at(0);
    v.ingest_note(&ingest("01_Projects/new", "[[hub]]")).unwrap();
    drop(v);
    let total = faults::mutations_seen();
    assert!(total >= 8, "{scenario:?}: an ingest performs several mutations ({total})");
    let mut before_commit = 0;
    let mut after_commit = 0;
    for k in 1..=total + 1 {
        let (dir, vault) = sweep_vault(scenario);
        let before = user_visible(dir.path());
        let receipts_before = statuses(dir.path());
        let ok_before = receipts_before.iter().filter(|s| *s == "ok").count();
        faults::arm_fail_at(k);
        let result = vault.ingest_note(&ingest("01_Projects/new", "[[hub]]"));
        drop(vault);
        faults::arm_fail_at(0);
        let reopened = paravault::Vault::open(dir.path(), Default::default()).unwrap();
        let note = dir.path().join("01_Projects/new.md");
        let ok_receipts: Vec<Value> = reopened.read_memory_history(100, 0).unwrap().into_iter().filter(|r| r["status"] == "ok").collect();
        if note.exists() {
            after_commit += 1;
            // Committed: the note, its catalog, log entry, one ok receipt and its search
            // documents are all there.
            let text = std::fs::read(&note).unwrap();
            assert_eq!(ok_receipts.len(), ok_before + 1, "{scenario:?} k={k}");
            assert_eq!(ok_receipts.last().unwrap()["after_sha256"], paravault::write::sha256_hex(&text), "{scenario:?} k={k}");
            assert!(std::fs::read_to_string(dir.path().join("01_Projects/_index.md")).unwrap().contains("new.md"), "{scenario:?} k={k}");
            assert!(std::fs::read_to_string(dir.path().join("log.md")).unwrap().contains("Created"), "{scenario:?} k={k}");
            assert!(served_holds(dir.path(), &reopened, "01_Projects/new.md"), "{scenario:?} k={k}: not searchable");
        } else {
            before_commit += 1;
            assert!(result.is_err(), "{scenario:?} k={k}: no note but Ok");
            assert_eq!(user_visible(dir.path()), before, "{scenario:?} k={k}: vault changed before the commit point");
            let mut expected = receipts_before.clone();
            expected.push("aborted".into());
            let now = statuses(dir.path());
            assert!(now == expected || now == receipts_before, "{scenario:?} k={k}: receipts {now:?}");
        }
        if matches!(scenario, SweepScenario::Fold) {
            assert!(served_holds(dir.path(), &reopened, "01_Projects/first.md"), "{scenario:?} k={k}: the earlier write vanished");
        }
        assert!(reopened.verify_history().unwrap().ok, "{scenario:?} k={k}");
        assert!(!reopened.lint().unwrap().blocking, "{scenario:?} k={k}");
    }
    eprintln!("fault sweep {scenario:?}: {total} mutations; {before_commit} faults before the commit point, {after_commit} after");
    assert!(before_commit >= 1 && after_commit >= 1, "{scenario:?}: {before_commit} before, {after_commit} after");
}

/// Catalogs maintained write by write (partial, O(change)) equal a full regeneration.
#[test]
fn incremental_catalogs_equal_a_full_regeneration() {
    let (dir, vault) = vault(&format!("-- 01_Projects/deep/er/hub.md --\n{}", note("Project", "Hub", "x\n")));
    vault.generate_index().unwrap();
    for (i, name) in ["01_Projects/deep/a", "01_Projects/deep/er/b", "02_Areas/c", "01_Projects/d"].iter().enumerate() {
        std::fs::create_dir_all(dir.path().join(name).parent().unwrap()).unwrap();
        vault.ingest_note(&ingest(name, &format!("note {i} [[hub]]"))).unwrap();
    }
    let fresh = paravault::Vault::open(dir.path(), Default::default()).unwrap();
    std::fs::remove_file(dir.path().join(".paravault/catalog-state.json")).ok();
    let report = fresh.generate_index().unwrap();
    assert!(report.pages_written.is_empty() && report.pages_deleted.is_empty(), "{report:?}");
}

/// The discovery report's receipt count is remembered between calls, and every write moves it.
#[test]
fn server_info_follows_every_receipt() {
    let (_dir, vault) = vault("");
    assert_eq!(vault.server_info().unwrap().vault.last_receipt_seq, 0);
    for seq in 1..=3 {
        vault.ingest_note(&ingest(&format!("01_Projects/n{seq}"), "hello")).unwrap();
        assert_eq!(vault.server_info().unwrap().vault.last_receipt_seq, seq);
        assert_eq!(vault.server_info().unwrap().vault.last_receipt_seq, seq, "asked again with no write since");
    }
}

/// The discovery report remembers the generation `ACTIVE` names, and a publish moves it.
#[test]
fn server_info_follows_a_publish_after_remembering_the_active_generation() {
    let (dir, vault) = vault("");
    vault.ingest_note(&ingest("01_Projects/a", "hello")).unwrap();
    let active = dir.path().join(".paravault/search/ACTIVE");
    let named = || std::fs::read_to_string(&active).unwrap().trim().to_string();
    let first = named();
    // Settled (older than the racy window): the report remembers it from here on.
    let past = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&active).unwrap().set_modified(past).unwrap();
    for _ in 0..2 {
        assert_eq!(vault.server_info().unwrap().vault.active_generation.as_deref(), Some(first.as_str()));
    }
    let params = paravault::retrieval::SyncParams { force_rebuild: true, allow_partial: true, ..Default::default() };
    vault.sync_vault(&params).unwrap();
    let second = named();
    assert_ne!(second, first, "a forced rebuild publishes a new generation");
    assert_eq!(vault.server_info().unwrap().vault.active_generation.as_deref(), Some(second.as_str()));
}

/// The discovery report comes from the active manifest and small state files, names every
/// excluded note, and never needs the inventory.
#[test]
fn server_info_reports_generation_exclusions_and_receipts() {
    let (dir, vault) = vault("-- 01_Projects/broken.md --\nno frontmatter\n");
    let before = vault.server_info().unwrap();
    assert_eq!(before.vault.index_state, "missing");
    assert_eq!(before.status, "degraded");
    vault.ingest_note(&ingest("01_Projects/a", "hello")).unwrap();
    let fresh = paravault::Vault::open(dir.path(), Default::default()).unwrap();
    let info = fresh.server_info().unwrap();
    assert_eq!(info.vault.index_state, "active_generation");
    assert_eq!(info.vault.last_receipt_seq, 1);
    assert_eq!((info.vault.scanned_notes, info.vault.indexed_notes), (2, 1));
    assert_eq!(info.vault.excluded_notes.len(), 1);
    assert_eq!(info.vault.excluded_notes[0].path, "01_Projects/broken.md");
    assert!(info.issues.iter().any(|i| i.code == "notes_excluded"));
    assert_eq!(info.embedding.binding, "not_requested");
    // The configured root is `vault.path` (doctor report v1) and nowhere else.
    assert_eq!(info.vault.path, dir.path().canonicalize().unwrap().display().to_string());
    let mut json = serde_json::to_value(&info).unwrap();
    json["vault"]["path"] = serde_json::Value::Null;
    assert!(!json.to_string().contains(dir.path().to_str().unwrap()), "no other absolute path");
}

/// A receipt line written by the engine before receipts were typed (tests/golden/
/// receipts_v1.jsonl: an ok ingest, an idempotency conflict, an aborted plan, a two-note
/// archive) and every line written now parse as `Receipt` and serialise to the same bytes, so
/// the hash chain of an existing log still verifies and goes on.
#[test]
fn receipts_old_and_new_reserialise_byte_for_byte_and_the_chain_goes_on() {
    use paravault::write::receipts::Receipt;
    let old = include_str!("../golden/receipts_v1.jsonl");
    let (dir, _) = vault("");
    std::fs::create_dir_all(dir.path().join(".paravault")).unwrap();
    std::fs::write(dir.path().join(".paravault/receipts.jsonl"), old).unwrap();
    let vault = paravault::vault::Vault::open(dir.path(), Default::default()).unwrap();
    assert!(vault.verify_history().unwrap().ok);
    let keyed = IngestRequest { idempotency_key: Some("k2".into()), ..ingest("01_Projects/typed", "one") };
    let receipt = vault.ingest_note(&keyed).unwrap().to_value();
    assert_eq!(receipt["seq"], 5);
    assert_eq!(vault.ingest_note(&keyed).unwrap().to_value(), receipt, "a retry replays the original receipt");
    let conflict = IngestRequest { idempotency_key: Some("k2".into()), ..ingest("01_Projects/other", "two") };
    assert!(vault.ingest_note(&conflict).is_err());
    let text = std::fs::read_to_string(dir.path().join(".paravault/receipts.jsonl")).unwrap();
    assert!(text.starts_with(old));
    assert_eq!(text.lines().count(), 6, "{text}");
    for line in text.lines() {
        let typed: Receipt = serde_json::from_str(line).unwrap();
        assert_eq!(serde_json::to_string(&typed).unwrap(), line);
        assert!(typed.other.is_empty(), "every field is a known one: {:?}", typed.other);
    }
    assert!(vault.verify_history().unwrap().ok);
}

/// `lint_orphans` counts the written notes the vault-wide lint calls orphans (no other note
/// links to them), not a constant.
#[test]
fn a_write_reports_the_orphans_it_leaves() {
    use paravault::approvals::execute_checked as execute;
    use paravault::note::path::VaultPath;
    use paravault::write::{Mutation, NoteChange};
    let fixture = format!(
        "-- 03_Resources/a.md --\n{}-- 03_Resources/b.md --\n{}",
        note("Resource", "A", "alone\n"),
        note("Resource", "B", "see [[a]]\n")
    );
    let (_dir, vault) = vault(&fixture);
    let path = |p: &str| VaultPath::parse(p).unwrap();
    let change = |p: &str, body: &str| NoteChange {
        path: path(p),
        content: Some(note("Resource", p, body)),
        require_absent: false,
        expected_sha256: None,
    };
    let write = |notes: Vec<NoteChange>| {
        let mutation = Mutation { notes, ..Mutation::single("test.write", path("03_Resources/x.md"), String::new()) };
        execute(&vault, mutation).unwrap().lint_orphans.unwrap()
    };
    let lint_orphans = |paths: &[&str]| {
        vault.lint().unwrap().findings.iter().filter(|f| f.rule == "orphan" && paths.contains(&f.path.as_str())).count().to_string()
    };
    // `a` is linked from `b`: rewriting it leaves no orphan.
    assert_eq!(write(vec![change("03_Resources/a.md", "edited\n")]), "0");
    assert_eq!(lint_orphans(&["03_Resources/a.md"]), "0");
    // A new note nobody links to is one.
    assert_eq!(write(vec![change("03_Resources/c.md", "new\n")]), "1");
    assert_eq!(lint_orphans(&["03_Resources/c.md"]), "1");
    // Two new notes, one linking the other: the linked one is not an orphan, the other is.
    let pair = vec![change("03_Resources/d.md", "see [[e]]\n"), change("03_Resources/e.md", "target\n")];
    assert_eq!(write(pair), "1");
    assert_eq!(lint_orphans(&["03_Resources/d.md", "03_Resources/e.md"]), "1");
}

/// Open options whose clock (the instant rendered notes are stamped with) is `seconds` after
/// 2026-06-01T12:00:00Z.
fn clock_at(seconds: i64) -> paravault::vault::VaultOptions {
    let noon: chrono::DateTime<chrono::Utc> = "2026-06-01T12:00:00Z".parse().unwrap();
    paravault::vault::VaultOptions { today: Some(today()), now: Some(noon + chrono::Duration::seconds(seconds)), ..Default::default() }
}

/// An engine-rendered write (`ingest_note`, `synthesize_session`) stamps its note with the
/// clock, to the second. A retry of the same request under the same idempotency key, with the
/// clock past that second (a new process, as an agent retries after a timeout), replays the
/// original receipt and leaves the note as first written; a different request under the key
/// is still `idempotency_conflict`, and writes nothing.
#[test]
fn a_retry_of_a_stamped_write_a_second_later_replays_its_receipt() {
    use paravault::vault::Vault;
    let (dir, _) = vault("");
    let note_text = |rel: &str| std::fs::read_to_string(dir.path().join(rel)).unwrap();
    let keyed = IngestRequest { idempotency_key: Some("r1".into()), ..ingest("01_Projects/r", "x") };
    let synth = SynthesizeRequest {
        name: "06_Daily_Logs/2026-06-01".into(),
        title: "Session".into(),
        description: "What happened".into(),
        content: "We worked.".into(),
        note_type: "Daily Log".into(),
        idempotency_key: Some("s1".into()),
        ..Default::default()
    };
    let first = Vault::open(dir.path(), clock_at(0)).unwrap();
    let ingested = first.ingest_note(&keyed).unwrap().to_value();
    let synthesized = first.synthesize_session(&synth).unwrap().to_value();
    drop(first);
    let (ingest_text, synth_text) = (note_text("01_Projects/r.md"), note_text("06_Daily_Logs/2026-06-01.md"));
    assert!(ingest_text.contains("timestamp: 2026-06-01T12:00:00Z"), "{ingest_text}");
    for later in [1, 7] {
        let vault = Vault::open(dir.path(), clock_at(later)).unwrap();
        assert_eq!(vault.ingest_note(&keyed).unwrap().to_value(), ingested, "{later} s later");
        assert_eq!(vault.synthesize_session(&synth).unwrap().to_value(), synthesized, "{later} s later");
    }
    assert_eq!((note_text("01_Projects/r.md"), note_text("06_Daily_Logs/2026-06-01.md")), (ingest_text, synth_text));
    // The receipt's `mutation_sha256` names the request, not the stamped text.
    assert_ne!(ingested["mutation_sha256"], ingested["after_sha256"]);
    let vault = Vault::open(dir.path(), clock_at(9)).unwrap();
    for other in [
        IngestRequest { content: "y".into(), ..keyed.clone() },
        IngestRequest { title: "Another title".into(), ..keyed.clone() },
        IngestRequest { name: "01_Projects/elsewhere".into(), ..keyed.clone() },
        IngestRequest { expected_sha256: Some(paravault::write::sha256_hex(b"")), ..keyed.clone() },
    ] {
        assert!(matches!(vault.ingest_note(&other).unwrap_err(), Error::IdempotencyConflict { .. }), "{other:?}");
    }
    let other = SynthesizeRequest { tags: vec!["t".into()], ..synth.clone() };
    assert!(matches!(vault.synthesize_session(&other).unwrap_err(), Error::IdempotencyConflict { .. }));
    assert!(!dir.path().join("01_Projects/elsewhere.md").exists());
    assert!(vault.verify_history().unwrap().ok);
}

/// The same retry through the CLI, each call its own process with its own clock
/// (`PARAVAULT_NOW`): the second run, two seconds later, exits 0 with the first receipt.
#[test]
fn a_cli_ingest_retried_seconds_later_with_its_key_replays() {
    let (dir, _) = vault("");
    let run = |now: &str, content: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_paravault"))
            .arg("--vault")
            .arg(dir.path())
            .args(["--json", "ingest", "01_Projects/r", "--type", "Project", "--title", "T", "--description", "D"])
            .args(["--content", content, "--idempotency-key", "r1"])
            .env("PARAVAULT_TODAY", "2026-06-01")
            .env("PARAVAULT_NOW", now)
            .env_remove("PARAVAULT_VAULT_DIR")
            .env_remove("POWER_VAULT_DIR")
            .output()
            .unwrap()
    };
    let first = run("2026-06-01T12:00:00Z", "x");
    assert!(first.status.success(), "{}", String::from_utf8_lossy(&first.stderr));
    let retry = run("2026-06-01T12:00:02Z", "x");
    assert!(retry.status.success(), "{}", String::from_utf8_lossy(&retry.stderr));
    assert_eq!(String::from_utf8_lossy(&retry.stdout), String::from_utf8_lossy(&first.stdout));
    let other = run("2026-06-01T12:00:03Z", "y");
    assert!(!other.status.success());
    let said = format!("{}{}", String::from_utf8_lossy(&other.stdout), String::from_utf8_lossy(&other.stderr));
    assert!(said.contains("idempotency_conflict"), "{said}");
}

/// Titles, descriptions and tags holding characters YAML treats apart (NEL, LS and PS
/// are line breaks to it; DEL, C1 controls and a BOM are not allowed raw) are written as
/// escapes, so the note's frontmatter reads back exactly as the caller sent it.
#[test]
fn caller_text_with_yaml_line_breaks_and_controls_reads_back_exactly() {
    let (dir, vault) = vault("");
    for (i, odd) in
        ["\u{85}", "\u{2028}  x", "\u{2029}", "\u{7f}", "\u{9b}", "\u{feff}", "\u{ffff}", "a\u{2028}\u{2028}b"].iter().enumerate()
    {
        let request = IngestRequest {
            title: format!("Title {odd} end"),
            description: format!("Description{odd}end"),
            tags: vec![format!("tag{odd}")],
            ..ingest(&format!("03_Resources/odd-{i}"), "Body.")
        };
        vault.ingest_note(&request).unwrap_or_else(|e| panic!("{odd:?}: {e}"));
        let text = std::fs::read_to_string(dir.path().join(format!("03_Resources/odd-{i}.md"))).unwrap();
        let split = paravault::note::frontmatter::split(&text).unwrap();
        let front = paravault::note::frontmatter::parse(&split).unwrap_or_else(|e| panic!("{odd:?}: {e}: {text:?}"));
        let field = |key: &str| front.get(key).cloned().unwrap_or(serde_yaml::Value::Null);
        // Trimmed at their ends (Unicode whitespace, NEL, LS and PS included), as every caller text is.
        let string = |s: &str| serde_yaml::Value::String(s.trim().to_string());
        assert_eq!(field("title"), string(&request.title), "{odd:?}: {text:?}");
        assert_eq!(field("description"), string(&request.description), "{odd:?}: {text:?}");
        assert_eq!(field("tags"), serde_yaml::Value::Sequence(vec![string(&request.tags[0])]), "{odd:?}: {text:?}");
    }
}
