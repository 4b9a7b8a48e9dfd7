//! Agent memory (ctxvault's model) at the engine: bitemporal episode rules, the vault registry
//! and its access battery, and property tests of the bitemporal invariants.

use std::collections::BTreeMap;
use std::sync::Arc;

use paravault::memory::registry::{Authority, RegisteredVault, Registry, VaultType};
use paravault::memory::vault_set::VaultSet;
use paravault::memory::{EpisodeQuery, MemoryVault, NewEpisode, Replacement};
use paravault::vault::{Vault, VaultOptions};
use proptest::prelude::*;
use serde_json::Value;

/// A typed memory report as the JSON its tool answers.
trait AsJson {
    fn json(&self) -> Value;
}

impl<T: serde::Serialize> AsJson for T {
    fn json(&self) -> Value {
        serde_json::to_value(self).unwrap()
    }
}

fn memory_vault() -> (tempfile::TempDir, MemoryVault) {
    let dir = tempfile::tempdir().unwrap();
    for folder in ["00_Inbox", "01_Projects", "02_Areas", "03_Resources", "04_Archive", "06_Daily_Logs", "PROTOCOLS"] {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
    }
    let vault = Vault::open(dir.path(), VaultOptions::default()).unwrap();
    (dir, MemoryVault::new(vault))
}

fn episode(content: &str, entities: &[&str]) -> NewEpisode {
    NewEpisode {
        content: content.into(),
        entities: entities.iter().map(|e| e.to_string()).collect(),
        salience: 0.5,
        confidence: 1.0,
        ..Default::default()
    }
}

fn write(m: &MemoryVault, content: &str, entities: &[&str]) -> Value {
    m.write_episode(&episode(content, entities)).unwrap().json()["episode"].clone()
}

fn id(e: &Value) -> String {
    e["id"].as_str().unwrap().to_string()
}

fn query(m: &MemoryVault, q: EpisodeQuery) -> Vec<Value> {
    let q = EpisodeQuery { limit: if q.limit == 0 { 100 } else { q.limit }, ..q };
    m.query_episodes(&q).unwrap().json()["episodes"].as_array().unwrap().clone()
}

fn ids(episodes: &[Value]) -> Vec<String> {
    episodes.iter().map(id).collect()
}

fn replacement(of: &str, content: &str) -> Replacement {
    Replacement { episode_id: of.into(), content: content.into(), ..Default::default() }
}

fn last_receipt(root: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(root.join(".paravault/receipts.jsonl")).unwrap();
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[test]
fn written_episodes_are_notes_and_come_back_newest_first() {
    let (dir, m) = memory_vault();
    let a = write(&m, "Anna lives in Padova", &["Anna", "Padova"]);
    let b = write(&m, "Anna likes espresso", &["Anna"]);
    assert_eq!(a["state"], "open");
    assert_eq!(a["valid_to"], Value::Null);
    assert!(a["known_at"].is_string(), "known_at comes from the receipt: {a}");
    let note = std::fs::read_to_string(dir.path().join(a["path"].as_str().unwrap())).unwrap();
    assert!(note.starts_with("---\ntype: \"Area\""), "{note}");
    assert!(note.ends_with("\nAnna lives in Padova\n"), "the statement is the note's body: {note}");
    assert!(m.vault.lint().unwrap().findings.iter().all(|f| !f.path.contains("memory/") || f.rule == "orphan"), "episode notes lint clean");
    assert_eq!(ids(&query(&m, EpisodeQuery::default())), vec![id(&b), id(&a)], "newest first");
    let padova = query(&m, EpisodeQuery { entities: vec!["padova".into()], ..Default::default() });
    assert_eq!(ids(&padova), vec![id(&a)], "entity filter, case-insensitive");
    let one = m.query_episodes(&EpisodeQuery { limit: 1, ..Default::default() }).unwrap().json();
    assert_eq!(one["count"], 1);
    assert_eq!(one["truncated"], true);
}

#[test]
fn supersede_closes_exactly_where_the_new_one_begins_in_one_transaction() {
    let (dir, m) = memory_vault();
    let old = m
        .write_episode(&NewEpisode { salience: 0.9, valid_from: Some("2020-01-01".into()), ..episode("Anna lives in Padova", &["Anna"]) })
        .unwrap()
        .json()["episode"]
        .clone();
    let seq_before = last_receipt(dir.path())["seq"].as_u64().unwrap();
    let out = m.replace_episode(&replacement(&id(&old), "Anna lives in Verona"), false).unwrap().json();
    let new = &out["episode"];
    let receipt = last_receipt(dir.path());
    assert_eq!(receipt["seq"].as_u64().unwrap(), seq_before + 1, "one transaction");
    assert_eq!(receipt["notes"].as_array().unwrap().len(), 2, "two notes in it");
    assert_eq!(new["supersedes"], old["id"]);
    assert_eq!(new["entities"], serde_json::json!(["Anna"]), "entities carried");
    assert_eq!(new["salience"], 0.9, "salience carried");
    let history = m.episode_history(&id(&old)).unwrap().json();
    let versions = history["versions"].as_array().unwrap();
    assert_eq!(ids(versions), vec![id(&old), id(new)], "oldest first");
    assert_eq!(versions[0]["valid_to"], new["valid_from"], "closed exactly where the new one begins");
    assert_eq!(versions[0]["superseded_by"], new["id"]);
    assert_eq!(versions[0]["state"], "superseded");
    assert_eq!(ids(&query(&m, EpisodeQuery::default())), vec![id(new)]);
    let past = query(&m, EpisodeQuery { valid_at: Some("2021-06-01".into()), ..Default::default() });
    assert_eq!(ids(&past), vec![id(&old)], "what was true then");
    let all = query(&m, EpisodeQuery { include_closed: true, ..Default::default() });
    assert_eq!(all.len(), 2);
    let again = m.replace_episode(&replacement(&id(&old), "again"), false).unwrap_err();
    assert_eq!(again.code(), "episode_not_open");
    let given = m
        .replace_episode(
            &Replacement { entities: vec!["Verona".into()], salience: Some(0.1), ..replacement(&id(new), "Anna lives in Milan") },
            false,
        )
        .unwrap()
        .json();
    assert_eq!(given["episode"]["entities"], serde_json::json!(["Verona"]));
    assert_eq!(given["episode"]["salience"], 0.1);
}

#[test]
fn revise_opens_where_the_original_did_and_inherits_attestations_and_disputes() {
    let (_dir, m) = memory_vault();
    let original = m
        .write_episode(&NewEpisode { valid_from: Some("2022-03-01T10:00:00Z".into()), ..episode("lives in Padova", &["Anna"]) })
        .unwrap()
        .json()["episode"]
        .clone();
    let rival = write(&m, "lives in Rome", &["Anna"]);
    m.confirm_episode(&id(&original), None, Some("chat")).unwrap();
    m.dispute_episodes(&id(&original), &id(&rival), "cannot both hold").unwrap();
    let revised =
        m.replace_episode(&replacement(&id(&original), "lives in Padova, in the Arcella"), true).unwrap().json()["episode"].clone();
    assert_eq!(revised["valid_from"], original["valid_from"], "opens where the original did");
    assert_eq!(revised["revises"], original["id"]);
    assert_eq!(revised["attestations"], 2, "inherits the attestation");
    assert_eq!(revised["disputed_with"], serde_json::json!([id(&rival)]), "inherits the open dispute");
    let current = query(&m, EpisodeQuery::default());
    assert!(!ids(&current).contains(&id(&original)), "the original is no longer what the vault states");
    let rival_now = current.iter().find(|e| e["id"] == rival["id"]).unwrap();
    assert_eq!(rival_now["disputed_with"], serde_json::json!([id(&revised)]), "the other side points at the revision");
    let at_then = query(&m, EpisodeQuery { valid_at: Some("2022-06-01".into()), ..Default::default() });
    assert_eq!(ids(&at_then), vec![id(&revised)], "at any valid time only the revision is stated");
    let history = m.episode_history(&id(&revised)).unwrap().json();
    assert_eq!(ids(history["versions"].as_array().unwrap()), vec![id(&original), id(&revised)], "the original stays in history");
}

#[test]
fn invalidate_closes_without_deleting_and_disputes_end_by_themselves() {
    let (dir, m) = memory_vault();
    let a = write(&m, "the office is on floor 3", &["office"]);
    let b = write(&m, "the office is on floor 5", &["office"]);
    let disputed = m.dispute_episodes(&id(&a), &id(&b), "").unwrap().json();
    let both = disputed["episodes"].as_array().unwrap();
    assert_eq!(both[0]["disputed_with"], serde_json::json!([id(&b)]));
    assert_eq!(both[1]["disputed_with"], serde_json::json!([id(&a)]));
    let current = query(&m, EpisodeQuery::default());
    assert_eq!(current.len(), 2, "neither is closed");
    let too_early = m.invalidate_episode(&id(&a), Some("1990-01-01"), "").unwrap_err();
    assert_eq!(too_early.code(), "invalid_argument");
    let closed = m.invalidate_episode(&id(&a), None, "moved out").unwrap().json()["episode"].clone();
    assert_eq!(closed["state"], "invalidated");
    assert_eq!(closed["invalidation_reason"], "moved out");
    assert!(closed["valid_to"].is_string());
    assert!(dir.path().join(closed["path"].as_str().unwrap()).exists(), "never deleted");
    let current = query(&m, EpisodeQuery::default());
    assert_eq!(ids(&current), vec![id(&b)]);
    assert_eq!(current[0]["disputed_with"], serde_json::json!([]), "the dispute ended with the invalidation");
    let all = query(&m, EpisodeQuery { include_closed: true, ..Default::default() });
    assert_eq!(all.len(), 2);
    assert_eq!(m.invalidate_episode(&id(&a), None, "").unwrap_err().code(), "episode_not_open");
    // A dispute also ends when one side is superseded.
    let c = write(&m, "the office is on floor 7", &["office"]);
    m.dispute_episodes(&id(&b), &id(&c), "").unwrap();
    m.replace_episode(&replacement(&id(&c), "the office is on floor 8"), false).unwrap();
    let b_now = query(&m, EpisodeQuery::default()).into_iter().find(|e| e["id"] == b["id"]).unwrap();
    assert_eq!(b_now["disputed_with"], serde_json::json!([]));
}

#[test]
fn confirm_adds_an_attestation_instead_of_a_duplicate() {
    let (_dir, m) = memory_vault();
    let a = write(&m, "Marco prefers tea", &["Marco"]);
    assert_eq!(a["attestations"], 1);
    let confirmed = m.confirm_episode(&id(&a), Some("2026-01-02"), Some("meeting")).unwrap().json()["episode"].clone();
    assert_eq!(confirmed["attestations"], 2);
    assert_eq!(confirmed["attested_at"][0]["source"], "meeting");
    assert_eq!(confirmed["content"], a["content"], "the episode stays as it is");
    assert_eq!(query(&m, EpisodeQuery::default()).len(), 1, "no duplicate");
    assert_eq!(m.confirm_episode(&id(&a), Some("yesterday"), None).unwrap_err().code(), "invalid_argument");
}

#[test]
fn known_at_answers_what_the_vault_had_recorded_by_then() {
    let (_dir, m) = memory_vault();
    let a = write(&m, "the project is on track", &["project"]);
    let learned = a["known_at"].as_str().unwrap().to_string();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let b = m.replace_episode(&replacement(&id(&a), "the project is late"), false).unwrap().json()["episode"].clone();
    assert!(b["known_at"].as_str().unwrap() > learned.as_str());
    let then = query(&m, EpisodeQuery { known_at: Some(learned.clone()), ..Default::default() });
    assert_eq!(ids(&then), vec![id(&a)], "the supersede was not yet known");
    assert_eq!(then[0]["state"], "open");
    assert_eq!(then[0]["valid_to"], Value::Null);
    let before_anything = query(&m, EpisodeQuery { known_at: Some("2000-01-01".into()), include_closed: true, ..Default::default() });
    assert!(before_anything.is_empty(), "known_at before a write never sees it");
    let now = query(&m, EpisodeQuery { known_at: Some(b["known_at"].as_str().unwrap().into()), ..Default::default() });
    assert_eq!(ids(&now), vec![id(&b)]);
}

#[test]
fn list_entities_enumerates_with_counts() {
    let (_dir, m) = memory_vault();
    let a = write(&m, "Anna lives in Padova", &["Anna", "Padova"]);
    write(&m, "Anna likes espresso", &["Anna"]);
    write(&m, "Bruno plays chess", &["Bruno"]);
    m.invalidate_episode(&id(&a), None, "").unwrap();
    let listed = m.list_entities(false, None, 1).unwrap().json();
    let pairs: Vec<(String, u64)> = listed["entities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["entity"].as_str().unwrap().into(), e["episodes"].as_u64().unwrap()))
        .collect();
    assert_eq!(pairs, vec![("Anna".into(), 1), ("Bruno".into(), 1)], "alphabetical, only holding statements");
    let all = m.list_entities(true, None, 1).unwrap().json();
    assert_eq!(all["count"], 3);
    assert_eq!(all["entities"][0]["episodes"], 2, "Anna twice when closed ones count");
    let at_least_two = m.list_entities(true, None, 2).unwrap().json();
    assert_eq!(at_least_two["count"], 1);
    assert_eq!(m.list_entities(false, None, 0).unwrap_err().code(), "invalid_argument");
    let long_ago = m.list_entities(false, Some("1999-01-01"), 1).unwrap().json();
    assert_eq!(long_ago["count"], 0, "nothing was valid then");
}

#[test]
fn bad_episode_arguments_are_typed_refusals_that_write_nothing() {
    let (dir, m) = memory_vault();
    let before = std::fs::read_to_string(dir.path().join(".paravault/receipts.jsonl")).unwrap_or_default();
    assert_eq!(m.write_episode(&episode("  ", &[])).unwrap_err().code(), "invalid_argument");
    assert_eq!(m.write_episode(&NewEpisode { salience: 1.5, ..episode("x", &[]) }).unwrap_err().code(), "invalid_argument");
    assert_eq!(m.write_episode(&NewEpisode { confidence: f64::NAN, ..episode("x", &[]) }).unwrap_err().code(), "invalid_argument");
    assert_eq!(
        m.write_episode(&NewEpisode { valid_from: Some("soon".into()), ..episode("x", &[]) }).unwrap_err().code(),
        "invalid_argument"
    );
    for bad in ["../../etc/passwd", "0123", "ZZ0123456789abcdef0123456789abcd", ""] {
        assert_eq!(m.confirm_episode(bad, None, None).unwrap_err().code(), "episode_not_found", "{bad}");
        assert_eq!(m.episode_history(bad).unwrap_err().code(), "episode_not_found", "{bad}");
    }
    assert_eq!(m.confirm_episode("0123456789abcdef0123456789abcdef", None, None).unwrap_err().code(), "episode_not_found");
    let q = |order: &str, limit: usize| EpisodeQuery { order_by: Some(order.into()), limit, ..Default::default() };
    assert_eq!(m.query_episodes(&q("random", 10)).unwrap_err().code(), "invalid_argument");
    assert_eq!(m.query_episodes(&q("newest", 0)).unwrap_err().code(), "invalid_argument");
    assert_eq!(m.query_episodes(&q("newest", 100_000)).unwrap_err().code(), "invalid_argument");
    let after = std::fs::read_to_string(dir.path().join(".paravault/receipts.jsonl")).unwrap_or_default();
    assert_eq!(before, after, "no transaction ran");
    let a = write(&m, "x", &[]);
    assert_eq!(m.dispute_episodes(&id(&a), &id(&a), "").unwrap_err().code(), "invalid_argument");
}

#[test]
fn hand_edited_episode_notes_are_never_overwritten_blindly() {
    let (dir, m) = memory_vault();
    let a = write(&m, "original statement", &["x"]);
    let path = dir.path().join(a["path"].as_str().unwrap());
    let edited = std::fs::read_to_string(&path).unwrap().replace("original statement", "a person's correction");
    std::fs::write(&path, &edited).unwrap();
    m.vault.observe_disk().unwrap();
    let confirmed = m.confirm_episode(&id(&a), None, None).unwrap().json()["episode"].clone();
    assert_eq!(confirmed["content"], "a person's correction", "the edit is read, kept and built on");
    assert!(std::fs::read_to_string(&path).unwrap().contains("a person's correction"));
}

// ---- the registry and access control ----

fn registered(name: &str, root: &std::path::Path, restricted: bool, agents: &[(&str, Authority)]) -> RegisteredVault {
    RegisteredVault {
        name: name.into(),
        root: root.to_path_buf(),
        vault_type: VaultType::Any,
        restricted,
        agents: agents.iter().map(|(a, x)| (a.to_string(), *x)).collect(),
        description: String::new(),
    }
}

fn two_vaults() -> (tempfile::TempDir, tempfile::TempDir, Registry) {
    let (open_dir, _) = memory_vault();
    let (secret_dir, _) = memory_vault();
    let mut registry = Registry::default();
    registry.add(registered("notes", open_dir.path(), false, &[]), false).unwrap();
    registry
        .add(
            registered(
                "secret",
                secret_dir.path(),
                true,
                &[("alice", Authority::Apply), ("bob", Authority::ReadOnly), ("carol", Authority::Propose)],
            ),
            false,
        )
        .unwrap();
    (open_dir, secret_dir, registry)
}

#[test]
fn restricted_vaults_answer_only_attached_agents_and_reveal_nothing() {
    let (_a, secret_dir, registry) = two_vaults();
    let set = |agent: Option<&str>| VaultSet::new(registry.clone(), agent.map(str::to_string), false);
    let secret_root = secret_dir.path().display().to_string();
    // Unknown, path-like and restricted-unattached names all read the same.
    let unknown = set(None).open("nothing", Authority::ReadOnly, "query_episodes", VaultType::Any).err().unwrap();
    assert_eq!(unknown.code(), "vault_access_denied");
    assert_eq!(unknown.to_string(), "no vault by that vault_name is available to this agent; list_vaults names the ones that are");
    for (agent, name) in [
        (None, "secret"),
        (Some("mallory"), "secret"),
        (Some("alice"), "../secret"),
        (Some("alice"), "secret/"),
        (Some("alice"), secret_root.as_str()),
        (Some("alice"), ".secret"),
        (Some("alice"), "SECRET"),
        (Some("alice"), "secret\u{0}"),
        (Some("alice"), ""),
    ] {
        let error = set(agent).open(name, Authority::ReadOnly, "query_episodes", VaultType::Any).err().unwrap();
        assert_eq!(error.code(), "vault_access_denied", "{agent:?} {name:?}");
        let message = error.to_string();
        assert!(!message.contains(&secret_root), "no root in {message}");
        assert_eq!(message, unknown.to_string(), "identical to an unknown vault, whatever the name");
    }
    // Attached agents: by authority.
    assert!(set(Some("bob")).open("secret", Authority::ReadOnly, "query_episodes", VaultType::Any).is_ok());
    let bob_writes = set(Some("bob")).open("secret", Authority::Apply, "write_episode", VaultType::Any).err().unwrap();
    assert_eq!(bob_writes.code(), "authority_insufficient");
    let carol_writes = set(Some("carol")).open("secret", Authority::Apply, "write_episode", VaultType::Any).err().unwrap();
    assert_eq!(carol_writes.code(), "authority_insufficient");
    let alice = set(Some("alice")).open("secret", Authority::Apply, "write_episode", VaultType::Any).unwrap();
    alice.write_episode(&episode("alice was here", &[])).unwrap();
    // Open vaults answer anyone.
    assert!(set(None).open("notes", Authority::Apply, "write_episode", VaultType::Any).is_ok());
    // list_vaults shows only what the caller may use.
    let names = |agent: Option<&str>| -> Vec<String> {
        set(agent).list().json()["vaults"].as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(names(None), vec!["notes"]);
    assert_eq!(names(Some("mallory")), vec!["notes"]);
    assert_eq!(names(Some("bob")), vec!["notes", "secret"]);
}

#[test]
fn typed_vaults_refuse_other_kinds_of_memory() {
    let (dir, _) = memory_vault();
    let mut registry = Registry::default();
    registry.add(RegisteredVault { vault_type: VaultType::Skill, ..registered("skills", dir.path(), false, &[]) }, false).unwrap();
    let set = VaultSet::new(registry, None, false);
    let error = set.open("skills", Authority::Apply, "write_episode", VaultType::Episodic).err().unwrap();
    assert_eq!(error.code(), "wrong_vault_type");
    assert!(set.open("skills", Authority::Apply, "write_skill", VaultType::Skill).is_ok());
}

#[test]
fn the_registry_file_round_trips_and_refuses_bad_entries() {
    let config = tempfile::tempdir().unwrap();
    let file = Registry::file_in(config.path());
    assert!(Registry::load(&file).unwrap().vaults.is_empty(), "no file: an empty registry");
    let (vault_dir, _) = memory_vault();
    let mut registry = Registry::default();
    registry.add(registered("work", vault_dir.path(), true, &[("agent-1", Authority::Propose)]), false).unwrap();
    assert_eq!(registry.add(registered("work", vault_dir.path(), false, &[]), false).unwrap_err().code(), "already_exists");
    for bad in ["../up", "a/b", ".hidden", "", "has space"] {
        assert_eq!(registry.add(registered(bad, vault_dir.path(), false, &[]), false).unwrap_err().code(), "invalid_argument", "{bad}");
    }
    assert_eq!(
        registry.add(registered("gone", &vault_dir.path().join("missing"), false, &[]), false).unwrap_err().code(),
        "invalid_argument"
    );
    registry.save(&file).unwrap();
    let loaded = Registry::load(&file).unwrap();
    assert_eq!(loaded, registry);
    assert_eq!(loaded.vaults["work"].agents, BTreeMap::from([("agent-1".to_string(), Authority::Propose)]));
    std::fs::write(&file, "{not json").unwrap();
    assert_eq!(Registry::load(&file).unwrap_err().code(), "registry_invalid");
    std::fs::write(&file, r#"{"schema_version":1,"vaults":{"x":{"name":"y","root":"/tmp"}}}"#).unwrap();
    assert_eq!(Registry::load(&file).unwrap_err().code(), "registry_invalid", "a key must equal its name");
}

#[test]
fn each_registered_vault_keeps_its_own_receipts() {
    let (open_dir, secret_dir, registry) = two_vaults();
    let set = VaultSet::new(registry, Some("alice".into()), false);
    let notes: Arc<MemoryVault> = set.open("notes", Authority::Apply, "write_episode", VaultType::Any).unwrap();
    let secret = set.open("secret", Authority::Apply, "write_episode", VaultType::Any).unwrap();
    notes.write_episode(&episode("in notes", &[])).unwrap();
    secret.write_episode(&episode("in secret", &[])).unwrap();
    secret.write_episode(&episode("in secret again", &[])).unwrap();
    let count = |dir: &std::path::Path| std::fs::read_to_string(dir.join(".paravault/receipts.jsonl")).unwrap().lines().count();
    assert_eq!((count(open_dir.path()), count(secret_dir.path())), (1, 2));
    assert_eq!(notes.query_episodes(&EpisodeQuery { limit: 10, ..Default::default() }).unwrap().json()["count"], 1);
}

// ---- property tests of the bitemporal rules ----

#[derive(Debug, Clone)]
enum Op {
    Write,
    Supersede(usize),
    Revise(usize),
    Invalidate(usize),
    Confirm(usize),
    Dispute(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => Just(Op::Write),
        2 => (0usize..8).prop_map(Op::Supersede),
        1 => (0usize..8).prop_map(Op::Revise),
        1 => (0usize..8).prop_map(Op::Invalidate),
        1 => (0usize..8).prop_map(Op::Confirm),
        1 => (0usize..8, 0usize..8).prop_map(|(a, b)| Op::Dispute(a, b)),
    ]
}

/// Every version as the full history shows it: (id, content, valid_from, valid_to, state).
fn all_versions(m: &MemoryVault) -> Vec<Value> {
    query(m, EpisodeQuery { include_closed: true, limit: 1000, ..Default::default() })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn bitemporal_invariants_hold_for_any_sequence(ops in proptest::collection::vec(op(), 1..9)) {
        let (_dir, m) = memory_vault();
        let mut known: Vec<String> = Vec::new();
        let mut snapshots: Vec<(String, Vec<Value>)> = Vec::new();
        for op in ops {
            let pick = |i: usize| (!known.is_empty()).then(|| known[i % known.len()].clone());
            let before = all_versions(&m);
            let written = match op {
                Op::Write => m.write_episode(&episode("a statement", &["e"])).ok().map(|v| v.json()["episode"].clone()),
                Op::Supersede(i) => pick(i).and_then(|id| m.replace_episode(&replacement(&id, "a newer statement"), false).ok()).map(|v| v.json()["episode"].clone()),
                Op::Revise(i) => pick(i).and_then(|id| m.replace_episode(&replacement(&id, "a better statement"), true).ok()).map(|v| v.json()["episode"].clone()),
                Op::Invalidate(i) => pick(i).and_then(|id| m.invalidate_episode(&id, None, "").ok()).map(|v| v.json()["episode"].clone()),
                Op::Confirm(i) => pick(i).and_then(|id| m.confirm_episode(&id, None, None).ok()).map(|v| v.json()["episode"].clone()),
                Op::Dispute(i, j) => match (pick(i), pick(j)) {
                    (Some(a), Some(b)) => m.dispute_episodes(&a, &b, "").ok().map(|v| v.json()["episodes"][0].clone()),
                    _ => None,
                },
            };
            let after = all_versions(&m);
            // History is append-only: every version before is still there with its statement.
            for old in &before {
                let now = after.iter().find(|e| e["id"] == old["id"]);
                prop_assert!(now.is_some(), "version {} disappeared", old["id"]);
                prop_assert_eq!(&now.unwrap()["content"], &old["content"]);
                prop_assert_eq!(&now.unwrap()["valid_from"], &old["valid_from"]);
            }
            if let Some(e) = written {
                let id = e["id"].as_str().unwrap().to_string();
                if !known.contains(&id) { known.push(id); }
                let receipt_time = e["known_at"].as_str().unwrap_or_default().to_string();
                // known_at before this write never sees its effect: the view equals the one
                // taken just before it.
                if let Some((time, view)) = snapshots.last() {
                    let then = query(&m, EpisodeQuery { known_at: Some(time.clone()), include_closed: true, limit: 1000, ..Default::default() });
                    let strip = |vs: &[Value]| { let mut v: Vec<(String, Value, Value)> = vs.iter().map(|e| (e["id"].as_str().unwrap().to_string(), e["state"].clone(), e["valid_to"].clone())).collect(); v.sort_by(|a, b| a.0.cmp(&b.0)); v };
                    prop_assert_eq!(strip(&then), strip(view));
                }
                let latest = after.iter().filter_map(|e| e["known_at"].as_str()).chain(after.iter().filter_map(|e| e["closed_known_at"].as_str())).max().unwrap_or(&receipt_time).to_string();
                let view = query(&m, EpisodeQuery { known_at: Some(latest.clone()), include_closed: true, limit: 1000, ..Default::default() });
                snapshots.push((latest, view));
            }
            // At every valid time, at most one current version of each statement.
            let mut boundaries: Vec<String> = after.iter().flat_map(|e| [e["valid_from"].as_str().map(str::to_string), e["valid_to"].as_str().map(str::to_string)]).flatten().collect();
            boundaries.push("2100-01-01T00:00:00Z".into());
            for at in boundaries {
                let current = query(&m, EpisodeQuery { valid_at: Some(at.clone()), limit: 1000, ..Default::default() });
                let mut roots: Vec<String> = current.iter().map(|e| {
                    let history = m.episode_history(e["id"].as_str().unwrap()).unwrap().json();
                    history["versions"][0]["id"].as_str().unwrap().to_string()
                }).collect();
                let n = roots.len();
                roots.sort();
                roots.dedup();
                prop_assert_eq!(roots.len(), n, "two current versions of one statement at {}", at);
            }
        }
    }
}

#[test]
fn the_ctxvault_surface_serves_beside_power_without_collisions() {
    use paravault::mcp::surface::{Surface, catalogs};
    let both = catalogs(&[Surface::Power, Surface::Ctxvault]).unwrap();
    let ctxvault: Vec<&str> = both.iter().filter(|s| s.surface == Surface::Ctxvault).map(|s| s.name).collect();
    assert_eq!(ctxvault.len(), 17, "{ctxvault:?}");
    assert_eq!(both.len(), paravault::mcp::tools::catalog().len() + 17);
    let empty = tempfile::tempdir().unwrap();
    let policy = paravault::policy::LoadedPolicy::load(empty.path()).unwrap();
    for name in ctxvault {
        assert!(policy.policy.tools.contains_key(name), "{name} has no risk entry in policy/default.yaml (it would not be advertised)");
    }
}

fn vaults_cli(config: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_paravault"))
        .arg("--json")
        .arg("vaults")
        .args(args)
        .env("PARAVAULT_CONFIG_DIR", config)
        .env_remove("PARAVAULT_VAULT_DIR")
        .env_remove("POWER_VAULT_DIR")
        .output()
        .unwrap()
}

#[test]
fn the_vaults_cli_keeps_the_registry_outside_every_vault() {
    let config = tempfile::tempdir().unwrap();
    let (vault_dir, _) = memory_vault();
    let root = vault_dir.path().to_str().unwrap();
    let before = crate::support::snapshot_tree(vault_dir.path());
    let added = vaults_cli(config.path(), &["add", "team", root, "--restricted", "--agent", "alice=apply", "--agent", "bob=read-only"]);
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    assert!(config.path().join("vaults.json").is_file());
    assert_eq!(crate::support::snapshot_tree(vault_dir.path()), before, "registering touches nothing in the vault");
    let listed: Value = serde_json::from_slice(&vaults_cli(config.path(), &["list"]).stdout).unwrap();
    assert_eq!(listed["vaults"][0]["name"], "team");
    assert_eq!(listed["vaults"][0]["agents"]["bob"], "read-only");
    for bad in [
        vec!["add", "x", root, "--agent", "alice=apply"],
        vec!["add", "y", root, "--restricted", "--agent", "alice=owner"],
        vec!["add", "../z", root],
        vec!["add", "team", root],
        vec!["remove", "nothing"],
    ] {
        let out = vaults_cli(config.path(), &bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let removed = vaults_cli(config.path(), &["remove", "team"]);
    assert!(removed.status.success());
    let listed: Value = serde_json::from_slice(&vaults_cli(config.path(), &["list"]).stdout).unwrap();
    assert_eq!(listed["vaults"], serde_json::json!([]));
    assert_eq!(crate::support::snapshot_tree(vault_dir.path()), before, "removing forgets the name, never the files");
}

// ---- the index answers what the general path answers ----

fn query_value(m: &MemoryVault, q: EpisodeQuery) -> Value {
    m.query_episodes(&q).unwrap().json()
}

/// What `query_episodes` must answer for `valid_at` (None: still holds now) and `entity`,
/// derived from the full history: the matching versions, newest first.
fn expected_current(all: &[Value], valid_at: Option<&str>, entity: Option<&str>) -> Vec<String> {
    let time = |v: &Value| v.as_str().map(|t| chrono::DateTime::parse_from_rfc3339(t).unwrap());
    let now = chrono::Utc::now();
    all.iter()
        .filter(|e| {
            entity.is_none_or(|name| e["entities"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().eq_ignore_ascii_case(name)))
        })
        .filter(|e| match valid_at {
            Some(at) => {
                let at = chrono::DateTime::parse_from_rfc3339(at).unwrap();
                e["state"] != "revised"
                    && time(&e["valid_from"]).is_none_or(|from| from <= at)
                    && time(&e["valid_to"]).is_none_or(|to| at < to)
            }
            None => e["state"] == "open" || (e["state"] == "invalidated" && time(&e["valid_to"]).is_some_and(|to| to > now)),
        })
        .map(id)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    /// The indexed answers (no knowledge time, newest first: counted from the valid-time
    /// bounds, ordered by the index) equal the general path's (every version viewed through a
    /// knowledge time after every write) for any sequence of writes, supersedes, revisions,
    /// invalidations, confirmations and disputes, at every valid time, with and without an
    /// entity filter; and list_entities counts the same versions.
    #[test]
    fn indexed_queries_answer_what_the_general_path_answers(
        ops in proptest::collection::vec((op(), 0usize..4, 0usize..3), 1..12),
    ) {
        let (_dir, m) = memory_vault();
        let mut known: Vec<String> = Vec::new();
        let years = ["2019-03-01", "2021-07-15", "2024-01-01", ""];
        let names = ["e1", "E2", "e3"];
        for (op, year, name) in ops {
            let pick = |i: usize| (!known.is_empty()).then(|| known[i % known.len()].clone());
            let out = match op {
                Op::Write => m
                    .write_episode(&NewEpisode {
                        valid_from: Some(years[year].to_string()).filter(|y| !y.is_empty()),
                        ..episode("a statement", &[names[name], "shared"])
                    })
                    .ok()
                    .map(|v| v.json()["episode"].clone()),
                Op::Supersede(i) => pick(i).and_then(|id| m.replace_episode(&replacement(&id, "newer"), false).ok()).map(|v| v.json()["episode"].clone()),
                Op::Revise(i) => pick(i).and_then(|id| m.replace_episode(&replacement(&id, "better"), true).ok()).map(|v| v.json()["episode"].clone()),
                Op::Invalidate(i) => pick(i).and_then(|id| m.invalidate_episode(&id, None, "").ok()).map(|v| v.json()["episode"].clone()),
                Op::Confirm(i) => pick(i).and_then(|id| m.confirm_episode(&id, None, None).ok()).map(|v| v.json()["episode"].clone()),
                Op::Dispute(i, j) => match (pick(i), pick(j)) {
                    (Some(a), Some(b)) => m.dispute_episodes(&a, &b, "").ok().map(|v| v.json()["episodes"][0].clone()),
                    _ => None,
                },
            };
            if let Some(e) = out {
                known.push(id(&e));
            }
        }
        let general = query(&m, EpisodeQuery { include_closed: true, known_at: Some("2999-01-01".into()), limit: 1000, ..Default::default() });
        let indexed = query(&m, EpisodeQuery { include_closed: true, limit: 1000, ..Default::default() });
        prop_assert_eq!(ids(&indexed), ids(&general), "every version, newest first");
        let mut times: Vec<String> = general.iter().flat_map(|e| [e["valid_from"].as_str(), e["valid_to"].as_str()]).flatten().map(str::to_string).collect();
        times.extend(["2000-01-01T00:00:00Z".to_string(), "2100-01-01T00:00:00Z".to_string()]);
        let mut cases: Vec<(Option<String>, Option<&str>)> = vec![(None, None), (None, Some("e1")), (None, Some("shared"))];
        for t in &times {
            cases.extend([(Some(t.clone()), None), (Some(t.clone()), Some("e2")), (Some(t.clone()), Some("shared"))]);
        }
        for (valid_at, entity) in cases {
            let expected = expected_current(&general, valid_at.as_deref(), entity);
            let entities: Vec<String> = entity.map(str::to_string).into_iter().collect();
            let full = query(&m, EpisodeQuery { valid_at: valid_at.clone(), entities: entities.clone(), limit: 1000, ..Default::default() });
            prop_assert_eq!(ids(&full), expected.clone(), "valid_at {:?}, entity {:?}", valid_at, entity);
            let page = query_value(&m, EpisodeQuery { valid_at: valid_at.clone(), entities, limit: 2, ..Default::default() });
            prop_assert_eq!(page["total_matching"].as_u64(), Some(expected.len() as u64), "count at {:?}, {:?}", valid_at, entity);
            prop_assert_eq!(ids(page["episodes"].as_array().unwrap()), expected.iter().take(2).cloned().collect::<Vec<_>>());
            if entity.is_none() {
                let listed = m.list_entities(false, valid_at.as_deref(), 1).unwrap().json();
                let shared = listed["entities"].as_array().unwrap().iter().find(|e| e["entity"] == "shared").map_or(0, |e| e["episodes"].as_u64().unwrap());
                prop_assert_eq!(shared, expected.len() as u64, "list_entities counts the same versions at {:?}", valid_at);
            }
        }
    }
}

#[test]
fn notes_changed_or_removed_outside_the_engine_leave_the_index() {
    let (dir, m) = memory_vault();
    let a = write(&m, "first statement", &["x"]);
    let b = write(&m, "second statement", &["x"]);
    assert_eq!(query(&m, EpisodeQuery::default()).len(), 2);
    // A person removes one note and rewrites the other: the next read sees both changes.
    std::fs::remove_file(dir.path().join(a["path"].as_str().unwrap())).unwrap();
    let path = dir.path().join(b["path"].as_str().unwrap());
    std::fs::write(&path, std::fs::read_to_string(&path).unwrap().replace("second statement", "a person's wording")).unwrap();
    m.vault.reload();
    let left = query(&m, EpisodeQuery { entities: vec!["x".into()], ..Default::default() });
    assert_eq!(ids(&left), vec![id(&b)]);
    assert_eq!(left[0]["content"], "a person's wording");
    let counted = m.query_episodes(&EpisodeQuery { limit: 10, ..Default::default() }).unwrap().json();
    assert_eq!(counted["total_matching"], 1, "the count follows the index");
    // The copy of a note elsewhere in the folder is not a second version.
    let copy = dir.path().join("02_Areas/memory/episodes/copy.md");
    std::fs::write(&copy, std::fs::read_to_string(&path).unwrap()).unwrap();
    m.vault.reload();
    let after = m.query_episodes(&EpisodeQuery { include_closed: true, limit: 10, ..Default::default() }).unwrap().json();
    assert_eq!(after["total_matching"], 1);
    assert_eq!(after["unreadable_episode_notes"], 1);
}

fn docx_fixture(name: &str) -> Vec<u8> {
    std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/docx").join(name)).unwrap()
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn receipt_count(root: &std::path::Path) -> usize {
    std::fs::read_to_string(root.join(".paravault/receipts.jsonl")).map_or(0, |t| t.lines().count())
}

#[test]
fn a_docx_made_by_python_docx_is_stored_as_markdown_with_its_conversion_reported() {
    let (dir, m) = memory_vault();
    let bytes = docx_fixture("report.docx");
    let answer = m.write_doc("reports/q3.docx", &base64_of(&bytes), "agent-test", false).unwrap().json();
    assert_eq!(answer["format"], "docx");
    assert_eq!(answer["converted"], true);
    let report = &answer["conversion"];
    assert_eq!(
        [&report["headings"], &report["paragraphs"], &report["list_items"], &report["tables"], &report["images_dropped"]],
        [2, 2, 2, 1, 1],
        "{report}"
    );
    assert_eq!(report["source_bytes"], bytes.len());
    let note = std::fs::read_to_string(dir.path().join("03_Resources/documents/reports/q3.docx.md")).unwrap();
    let expected = "# Quarterly report\n\nRevenue grew **twelve percent** in the *third* quarter.\n\n## Risks\n\n\
        - Supplier delays\n- Currency: 1 \\< 2 & \\*stars\\* stay text\n\n| Region | Sales |\n| --- | --- |\n| North | 42 |\n\n\
        Città, naïve, 東京.\n";
    assert!(note.ends_with(&format!("---\n\n{expected}")), "{note}");
    let source = paravault::write::sha256_hex(&bytes);
    assert!(note.lines().any(|l| l.trim_start().starts_with("source_sha256:") && l.contains(&source)), "{note}");
    let listed = m.list_docs().unwrap().json();
    let docs = listed.pointer("/content/documents").or_else(|| listed.get("documents")).cloned().unwrap_or(listed.clone());
    assert!(docs.to_string().contains("\"format\":\"docx\""), "{listed}");
    assert_eq!(last_receipt(dir.path())["operation"], "ctxvault.write_doc");
}

#[test]
fn a_docx_that_cannot_be_converted_is_a_typed_refusal_that_writes_nothing() {
    let (dir, m) = memory_vault();
    let report = docx_fixture("report.docx");
    let mut flipped = report.clone();
    let part = flipped.windows(17).position(|w| w == b"word/document.xml").unwrap();
    flipped[part + 17 + 40] ^= 0x55;
    let cases: Vec<(&str, String, &str)> = vec![
        ("text", "just some words".to_string(), "base64"),
        ("plain", base64_of(b"just some words"), "not a .docx"),
        ("truncated", base64_of(&report[..report.len() / 2]), "not a readable zip"),
        ("flipped", base64_of(&flipped), "word/document.xml"),
        ("macros", base64_of(&docx_fixture("macros.docx")), "macros"),
        ("bomb", base64_of(&docx_fixture("bomb.docx")), "at most 16777216"),
        ("encrypted", base64_of(&[0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1, 0, 0, 0, 0]), "password-protected"),
    ];
    for (name, content, needle) in cases {
        let error = m.write_doc(&format!("{name}.docx"), &content, "agent-test", false).unwrap_err();
        assert_eq!(error.code(), "unsupported_document", "{name}: {error}");
        assert!(error.to_string().contains(needle), "{name}: {error}");
        assert!(!dir.path().join(format!("03_Resources/documents/{name}.docx.md")).exists(), "{name}");
    }
    assert_eq!(receipt_count(dir.path()), 0, "nothing was written");
}

#[test]
fn ctxvaults_recency_order_is_valid_time_newest_first_and_composite_is_refused() {
    // ctxvault 0.8.1 orders `recency` by a decay of valid_from (tests/sdk/ctxvault_peer_compare.py).
    let (_dir, m) = memory_vault();
    for (content, from) in [("middle", "2024-06-01T00:00:00Z"), ("oldest", "2020-01-01T00:00:00Z"), ("latest", "2025-01-01T00:00:00Z")] {
        m.write_episode(&NewEpisode { valid_from: Some(from.into()), ..episode(content, &[]) }).unwrap();
    }
    let order = |by: &str| -> Vec<String> {
        let answer = m.query_episodes(&EpisodeQuery { order_by: Some(by.into()), limit: 10, ..Default::default() }).unwrap().json();
        answer["episodes"].as_array().unwrap().iter().map(|e| e["content"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(order("recency"), ["latest", "middle", "oldest"]);
    assert_eq!(order("recency"), order("valid_from"));
    let composite = m.query_episodes(&EpisodeQuery { order_by: Some("composite".into()), limit: 10, ..Default::default() });
    assert_eq!(composite.unwrap_err().code(), "invalid_argument");
}

// ---- proposals: a `propose` agent's memory change is held, approved and applied by id ----

const APPROVER_SECRET: &str = "correct horse battery staple";

/// A restricted vault `secret` (alice apply, carol propose) whose policy is `policy` (empty:
/// the default), the registry naming it, and a config folder with the approver `alice`.
fn proposing_vault(policy: &str) -> (tempfile::TempDir, tempfile::TempDir, Registry) {
    let (dir, _) = memory_vault();
    if !policy.is_empty() {
        std::fs::create_dir_all(dir.path().join(".paravault")).unwrap();
        std::fs::write(dir.path().join(".paravault/policy.yaml"), policy).unwrap();
    }
    let mut registry = Registry::default();
    registry.add(registered("secret", dir.path(), true, &[("alice", Authority::Apply), ("carol", Authority::Propose)]), false).unwrap();
    let approvers = tempfile::tempdir().unwrap();
    paravault::approvals::secrets::add_approver(approvers.path(), "alice", APPROVER_SECRET).unwrap();
    (dir, approvers, registry)
}

fn opened(registry: &Registry, agent: &str, needed: Authority) -> Arc<MemoryVault> {
    VaultSet::new(registry.clone(), Some(agent.into()), false).open("secret", needed, "write_episode", VaultType::Any).unwrap()
}

fn approve(vault: &Vault, approvers: &std::path::Path, proposal_id: &str) {
    vault
        .decide_with_approvers(
            approvers,
            &paravault::approvals::DecisionRequest {
                proposal_id: proposal_id.into(),
                decision: paravault::approvals::Decision::Approved,
                approver: "alice".into(),
                secret: APPROVER_SECRET.into(),
                channel: paravault::approvals::ApprovalChannel::Cli,
                comment: "checked".into(),
            },
        )
        .unwrap();
}

#[test]
fn a_propose_agents_episode_waits_for_a_person_and_applies_exactly_as_proposed_with_its_receipt() {
    let rule = "approvals:\n  rules:\n    - { operations: [memory_change], approver: human }\n";
    let (dir, approvers, registry) = proposing_vault(rule);
    let carol = opened(&registry, "carol", Authority::Propose);
    assert!(carol.proposes());
    let receipts_before = std::fs::read_to_string(dir.path().join(".paravault/receipts.jsonl")).unwrap_or_default();
    let answer = carol.write_episode(&episode("carol heard that Anna moved to Padova", &["Anna"])).unwrap().json();
    assert_eq!(answer["status"], "awaiting_approval", "{answer}");
    assert_eq!(answer["written"], false);
    assert_eq!(answer["tool"], "write_episode");
    assert_eq!(answer["episode"], Value::Null, "nothing is in the vault yet");
    let proposal_id = answer["proposal_id"].as_str().unwrap().to_string();
    let episode_id = answer["episode_id"].as_str().unwrap().to_string();
    assert_eq!(answer["proposal"]["operation"], "memory_change");
    assert_eq!(answer["proposal"]["state"], "pending");
    assert_eq!(answer["proposal"]["approver"], "human");
    let note = dir.path().join(carol.episode_path(&episode_id).unwrap().as_str());
    assert!(!note.exists(), "no note before approval");
    assert_eq!(
        std::fs::read_to_string(dir.path().join(".paravault/receipts.jsonl")).unwrap_or_default(),
        receipts_before,
        "no transaction ran"
    );
    assert!(query(&carol, EpisodeQuery::default()).is_empty(), "a proposal is not a statement of the vault");
    // The person's view: pending, for a person, with the note's diff.
    let vault = &carol.vault;
    let status = vault.proposal_status(&proposal_id).unwrap();
    assert_eq!(status.state, paravault::approvals::ProposalState::Pending);
    assert_eq!(status.operation, paravault::approvals::Operation::MemoryChange);
    let review = vault.proposal_review(&proposal_id).unwrap();
    assert!(review.changes[0].diff.contains("+carol heard that Anna moved to Padova"), "{}", review.changes[0].diff);
    // An agent's approved=true is not a person's approval.
    let refused = vault.apply_memory_proposal(&proposal_id, true).unwrap_err();
    assert_eq!(refused.code(), "human_approval_required");
    // Its next step is applying the proposal by id (calling the memory tool again would
    // propose a new change).
    let said = refused.to_string();
    assert!(said.ends_with(&format!("then apply it by its id: `paravault apply {proposal_id}`, or apply_memory_change with {{\"proposal\": {{\"proposal_id\": \"{proposal_id}\"}}}}")), "{said}");
    assert!(!said.contains("call again"), "{said}");
    assert!(!note.exists());
    approve(vault, approvers.path(), &proposal_id);
    let receipt = vault.apply_proposal_by_id(&proposal_id, false).unwrap().to_value();
    assert_eq!(receipt["status"], "ok", "{receipt}");
    assert_eq!(receipt["operation"], "ctxvault.write_episode");
    assert_eq!(receipt["proposal_id"], proposal_id.as_str());
    assert_eq!(receipt["approval"]["approver"], "alice", "{receipt}");
    assert!(receipt["idempotency_key"].as_str().unwrap().starts_with("ctxvault:"), "the memory op gives the knowledge time");
    assert_eq!(last_receipt(dir.path())["seq"], receipt["seq"]);
    // The episode is exactly the proposed one, known from the apply's receipt.
    let alice = opened(&registry, "alice", Authority::Apply);
    let seen = query(&alice, EpisodeQuery::default());
    assert_eq!(ids(&seen), vec![episode_id.clone()]);
    assert_eq!(seen[0]["content"], "carol heard that Anna moved to Padova");
    let time = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    assert_eq!(time(&seen[0]["known_at"]), time(&receipt["at"]), "known when the apply committed: {}", seen[0]);
    assert_eq!(vault.proposal_status(&proposal_id).unwrap().state, paravault::approvals::ProposalState::Applied);
    // Applying again replays the receipt; nothing new is written.
    let again = vault.apply_memory_proposal(&proposal_id, false).unwrap().to_value();
    assert_eq!(again["seq"], receipt["seq"]);
}

#[test]
fn a_proposed_memory_change_whose_note_changed_since_is_a_conflict_that_writes_nothing() {
    let (dir, _approvers, registry) = proposing_vault("");
    let alice = opened(&registry, "alice", Authority::Apply);
    let anna = id(&write(&alice, "Anna lives in Padova", &["Anna"]));
    let carol = opened(&registry, "carol", Authority::Propose);
    let proposed = carol.replace_episode(&replacement(&anna, "Anna lives in Verona"), false).unwrap().json();
    assert_eq!(proposed["status"], "awaiting_approval", "{proposed}");
    assert_eq!(proposed["replaced"], anna.as_str());
    let proposal_id = proposed["proposal_id"].as_str().unwrap().to_string();
    let status = carol.vault.proposal_status(&proposal_id).unwrap();
    assert_eq!(status.approver, paravault::policy::Approver::Caller, "no human rule: the applier's approval suffices");
    assert_eq!(status.paths.len(), 2, "one two-note transaction: {:?}", status.paths);
    // Without approval nothing runs.
    assert_eq!(carol.vault.apply_memory_proposal(&proposal_id, false).unwrap_err().code(), "approval_required");
    // The note changes after the proposal was made (another agent confirms the statement).
    alice.confirm_episode(&anna, None, Some("the neighbour")).unwrap();
    let note = dir.path().join(alice.episode_path(&anna).unwrap().as_str());
    let before = std::fs::read(&note).unwrap();
    let conflict = carol.vault.apply_proposal_by_id(&proposal_id, true).unwrap_err();
    assert_eq!(conflict.code(), "precondition_failed", "{conflict}");
    assert_eq!(std::fs::read(&note).unwrap(), before, "the edited note is kept byte for byte");
    let new_note = dir.path().join(alice.episode_path(proposed["episode_id"].as_str().unwrap()).unwrap().as_str());
    assert!(!new_note.exists(), "the replacement was not written");
    assert_eq!(carol.vault.proposal_status(&proposal_id).unwrap().state, paravault::approvals::ProposalState::Stale);
    let current = query(&alice, EpisodeQuery::default());
    assert_eq!(ids(&current), vec![anna], "the statement still holds");
    assert_eq!(current[0]["content"], "Anna lives in Padova");
}

#[test]
fn a_propose_agent_only_ever_proposes_and_cannot_apply() {
    let (dir, _approvers, registry) = proposing_vault("");
    // Carol's authority is not enough for an apply-level open.
    let set = VaultSet::new(registry.clone(), Some("carol".into()), false);
    assert_eq!(set.open("secret", Authority::Apply, "write_episode", VaultType::Any).err().unwrap().code(), "authority_insufficient");
    let carol = opened(&registry, "carol", Authority::Propose);
    // Every memory tool proposes: skills and documents too, and repeating a call is a new
    // proposal, never a write.
    let first = carol.write_episode(&episode("a fact", &[])).unwrap().json();
    let second = carol.write_episode(&episode("a fact", &[])).unwrap().json();
    assert_ne!(first["proposal_id"], second["proposal_id"]);
    let skill = carol.write_skill("Deploy", "how to deploy", "1. build\n2. ship", false).unwrap().json();
    assert_eq!(skill["status"], "awaiting_approval", "{skill}");
    let doc = carol.write_doc("notes/plan.md", "# Plan\n", "carol", false).unwrap().json();
    assert_eq!(doc["status"], "awaiting_approval", "{doc}");
    assert!(!dir.path().join(skill["path"].as_str().unwrap()).exists());
    assert!(!dir.path().join(doc["path"].as_str().unwrap()).exists());
    assert!(query(&carol, EpisodeQuery::default()).is_empty());
    assert_eq!(carol.vault.proposals().unwrap().len(), 4);
}

/// Caller strings holding line breaks only YAML knows (NEL, LS, PS, a lone CR) come back as
/// written: the `episode:` block is indented by the YAML emitter, never by splitting its text
/// at `\n` (which let a string after U+2028 land as a field of its own).
#[test]
fn line_separators_in_episode_fields_never_become_fields() {
    let (dir, m) = memory_vault();
    for brk in ["\u{2028}", "\u{2029}", "\u{85}", "\r"] {
        // With a `\n` too, the emitter writes a literal block scalar, whose lines it indents.
        let source = format!("origin\nline{brk}superseded_by: ep-forged{brk}state: invalidated");
        // Entities refuse control characters (NEL, CR) with a typed error; LS and PS are text.
        let entity = if brk.chars().any(char::is_control) { "Anna".to_string() } else { format!("Anna{brk}revised_by: ep-forged") };
        let written = m
            .write_episode(&NewEpisode { source: Some(source.clone()), entities: vec![entity.clone()], ..episode("Anna moved", &[]) })
            .unwrap()
            .json();
        let path = written["episode"]["path"].as_str().unwrap().to_string();
        let back = query(&m, EpisodeQuery { entities: vec![entity.clone()], ..Default::default() });
        let back = back.iter().find(|e| e["path"] == path.as_str()).unwrap_or_else(|| panic!("{brk:?}: not found by its entity"));
        assert_eq!((back["source"].as_str(), back["state"].as_str()), (Some(source.as_str()), Some("open")), "{brk:?}: {back}");
        assert_eq!(back["superseded_by"], Value::Null, "{brk:?}: {back}");
        assert_eq!(back["entities"], serde_json::json!([entity]), "{brk:?}: {back}");
        let note = std::fs::read_to_string(dir.path().join(&path)).unwrap();
        assert_eq!(note.matches("superseded_by:").count(), 2, "{brk:?}: the field and the text in the source: {note:?}");
    }
}

/// Every note the engine stamps takes the vault's clock (`VaultOptions::now`, `PARAVAULT_NOW`),
/// so a reproducible run stamps memory notes, vaultspec documents and healed notes alike.
#[test]
fn engine_stamped_notes_take_the_vaults_clock() {
    let dir = tempfile::tempdir().unwrap();
    for folder in ["00_Inbox", "01_Projects", "02_Areas", "03_Resources", "04_Archive", "06_Daily_Logs", "PROTOCOLS"] {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
    }
    let now: chrono::DateTime<chrono::Utc> = "2031-02-03T04:05:06Z".parse().unwrap();
    let vault = Vault::open(dir.path(), VaultOptions { today: None, now: Some(now), ..Default::default() }).unwrap();
    let spec = paravault::specdocs::authoring::CreateSpec {
        feature: "clock".into(),
        doc_type: Some("research".into()),
        date: Some("2031-02-03".into()),
        ..Default::default()
    };
    assert_eq!(paravault::specdocs::authoring::create(&vault, &[spec]).unwrap().status, paravault::specdocs::envelope::BatchStatus::Ok);
    let document = std::fs::read_to_string(dir.path().join("01_Projects/clock/research/2031-02-03-clock-research.md")).unwrap();
    assert!(document.contains("timestamp: 2031-02-03T04:05:06Z"), "{document}");
    let options = vault.options().clone();
    let m = MemoryVault::new(vault);
    let written = write(&m, "Anna moved to Padova", &["Anna"]);
    let note = std::fs::read_to_string(dir.path().join(written["path"].as_str().unwrap())).unwrap();
    assert!(note.contains("\ntimestamp: 2031-02-03T04:05:06Z\n"), "{note}");
    // A registered vault the ctxvault surface opens takes the server's clock too.
    let (_open, _secret, registry) = two_vaults();
    let set = VaultSet::new(registry, None, false).with_options(options);
    let notes = set.open("notes", Authority::Apply, "write_episode", VaultType::Any).unwrap();
    let written = write(&notes, "Bruno moved to Verona", &["Bruno"]);
    let note = std::fs::read_to_string(notes.vault.root().join(written["path"].as_str().unwrap())).unwrap();
    assert!(note.contains("\ntimestamp: 2031-02-03T04:05:06Z\n"), "{note}");
}
