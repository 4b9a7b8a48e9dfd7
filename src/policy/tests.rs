//! Unit tests for policy loading and override merging.

use super::*;

#[test]
fn default_policy_loads_and_knows_every_rule() {
    let loaded = LoadedPolicy::from_texts(None).unwrap();
    assert_eq!(loaded.policy.layout.para_folders.len(), 6);
    assert_eq!(loaded.severity("orphan"), Severity::Warning);
    assert_eq!(loaded.severity("broken-link"), Severity::Blocking);
    assert_eq!(loaded.policy.rate_limits["ingest_note"], 10);
    assert!(loaded.root_daily_log.is_match("2024-05-01_standup.md"));
    assert!(!loaded.root_daily_log.is_match("notes.md"));
}

#[test]
fn override_merges_maps_by_key() {
    let loaded = LoadedPolicy::from_texts(Some("lint:\n  rules:\n    orphan: blocking\n")).unwrap();
    assert_eq!(loaded.severity("orphan"), Severity::Blocking);
    assert_eq!(loaded.severity("stale"), Severity::Blocking);
    assert_eq!(loaded.policy.layout.para_folders.len(), 6);
}

#[test]
fn invalid_override_names_file_line_and_reason() {
    let err = LoadedPolicy::from_texts(Some("lint:\n  rules:\n    orphan: sometimes\n")).unwrap_err();
    match err {
        Error::PolicyInvalid { file, line, reason } => {
            assert_eq!(file, ".paravault/policy.yaml");
            assert_eq!(line, 3);
            assert!(reason.contains("sometimes") || reason.contains("variant"), "{reason}");
        }
        other => panic!("unexpected {other:?}"),
    }
    let err = LoadedPolicy::from_texts(Some("lint:\n  rules:\n    no-such-rule: warning\n")).unwrap_err();
    assert!(matches!(err, Error::PolicyInvalid { line: 3, .. }), "{err:?}");
    let err = LoadedPolicy::from_texts(Some("limits:\n  unknown_limit: 3\n")).unwrap_err();
    assert!(matches!(err, Error::PolicyInvalid { line: 2, .. }), "{err:?}");
    let err = LoadedPolicy::from_texts(Some("rate_limits:\n  ingest_note: 0\n")).unwrap_err();
    assert!(matches!(err, Error::PolicyInvalid { line: 2, .. }), "{err:?}");
    let err = LoadedPolicy::from_texts(Some("- just\n- a list\n")).unwrap_err();
    assert!(matches!(err, Error::PolicyInvalid { line: 1, .. }), "{err:?}");
}

#[test]
fn handoff_and_infra_policy_is_validated() {
    let loaded = LoadedPolicy::from_texts(None).unwrap();
    assert_eq!(loaded.policy.handoff.objective_chars_max, 1000);
    assert_eq!(loaded.policy.handoff.scope_items_max, 64);
    assert_eq!(loaded.policy.infra.broker_socket, None);
    assert_eq!(loaded.policy.infra.response_bytes_max, 65536);
    let loaded = LoadedPolicy::from_texts(Some("infra:\n  broker_socket: /run/infra.sock\n")).unwrap();
    assert_eq!(loaded.policy.infra.broker_socket.as_deref(), Some("/run/infra.sock"));
    assert_eq!(loaded.policy.infra.timeout_ms, 5000, "maps merge by key");
    for bad in [
        "infra:\n  broker_socket: relative.sock\n",
        "infra:\n  timeout_ms: 0\n",
        "infra:\n  response_bytes_max: 10\n",
        "handoff:\n  scope_items_max: 0\n",
        "infra:\n  host: example.org\n",
    ] {
        let err = LoadedPolicy::from_texts(Some(bad)).unwrap_err();
        assert!(matches!(err, Error::PolicyInvalid { .. }), "{bad}: {err:?}");
    }
}

#[test]
fn every_handoff_and_goals_bound_must_be_positive_and_the_error_names_its_section() {
    for (section, key) in [
        ("handoff", "objective_chars_max"),
        ("handoff", "list_tasks_max"),
        ("goals", "list_items_max"),
        ("goals", "goals_max"),
        ("goals", "plan_entries_max"),
    ] {
        let err = LoadedPolicy::from_texts(Some(&format!("{section}:\n  {key}: 0\n"))).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::PolicyInvalid { .. }) && text.contains(&format!("{section}.{key} must be at least 1")), "{text}");
    }
}

#[test]
fn embedding_section_is_pinned_and_validated() {
    let loaded = LoadedPolicy::from_texts(None).unwrap();
    let e = &loaded.policy.embedding;
    assert_eq!(e.repo, "sentence-transformers/all-MiniLM-L6-v2");
    assert_eq!(e.revision, "c9745ed1d9f207416be6d2e6f8de32d1f16199bf");
    assert_eq!((e.dimension, e.max_tokens), (384, 256));
    assert!(e.batch_size >= 1 && e.threads >= 1);
    assert!(e.local_dir.is_empty());
    assert_eq!(e.sha256.model_safetensors, "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db");
    assert_eq!(loaded.policy.egress, EgressPolicy::Deny);

    let refused = |text: &str, needle: &str| {
        let err = LoadedPolicy::from_texts(Some(text)).unwrap_err();
        match &err {
            Error::PolicyInvalid { reason, .. } => assert!(reason.contains(needle), "{needle}: {reason}"),
            other => panic!("unexpected {other:?}"),
        }
    };
    refused("embedding:\n  revision: main\n", "commit hash");
    refused("embedding:\n  repo: no-owner\n", "owner/name");
    refused("embedding:\n  repo: a/../b\n", "owner/name");
    refused("embedding:\n  dimension: 768\n", "dimension");
    refused("embedding:\n  max_tokens: 0\n", "max_tokens");
    refused("embedding:\n  max_tokens: 1024\n", "max_tokens");
    refused("embedding:\n  batch_size: 0\n", "batch_size");
    refused("embedding:\n  threads: 0\n", "threads");
    refused("embedding:\n  sha256:\n    config.json: abc\n", "config.json");
    // A precision this engine does not run is refused by name, never read as f32.
    refused("embedding:\n  precision: int4\n", "unknown variant `int4`, expected `f32` or `int8`");
    refused("embedding:\n  precision: F32\n", "unknown variant `F32`");
    // The reranker is pinned by the same rules, and its errors name its own section.
    refused("reranker:\n  revision: main\n", "reranker.revision 'main' must be a commit hash");
    refused("reranker:\n  repo: a/../b\n", "reranker.repo 'a/../b' must be");
    refused("reranker:\n  sha256:\n    config.json: ABC\n", "reranker.sha256 of config.json");
    let err = LoadedPolicy::from_texts(Some("embedding:\n  sha256:\n    vocab.txt: abc\n")).unwrap_err();
    assert!(matches!(err, Error::PolicyInvalid { line: 3, .. }), "{err:?}");
    let ok = LoadedPolicy::from_texts(Some("embedding:\n  local_dir: models/minilm\n  threads: 1\negress: allow-public\n")).unwrap();
    assert_eq!(ok.policy.embedding.local_dir, "models/minilm");
    assert_eq!(ok.policy.embedding.threads, 1);
    assert_eq!(ok.policy.egress, EgressPolicy::AllowPublic);
    assert_eq!(e.precision, EmbeddingPrecision::F32, "the shipped default");
    let int8 = LoadedPolicy::from_texts(Some("embedding:\n  precision: int8\n")).unwrap();
    assert_eq!(int8.policy.embedding.precision, EmbeddingPrecision::Int8);
}

#[test]
fn domain_registry_merges_policy_and_power_file_and_fails_closed() {
    use domains::DomainRegistry;
    let policy = LoadedPolicy::from_texts(Some(
        "domains:\n  - name: ops\n    path: 02_Areas/ops\n    rules: [{terms: [deploy], weight: 1.5}, {contains: [outage]}]\n",
    ))
    .unwrap();
    let vault = tempfile::tempdir().unwrap();
    let registry = DomainRegistry::load(vault.path(), &policy.policy.domains).unwrap();
    let ops = registry.get("ops").unwrap();
    assert_eq!((ops.folder(), ops.search_priority.as_slice()), ("02_Areas/ops", ["fts".to_string(), "semantic".to_string()].as_slice()));
    assert_eq!(registry.route("Deploy failed").map(|d| d.name.as_str()), Some("ops"), "terms is an alias of keywords");
    assert!(registry.route("tomatoes").is_none());
    let unknown = registry.get("garden").unwrap_err().to_string();
    assert!(unknown.contains("known domains: ops"), "{unknown}");

    std::fs::create_dir_all(vault.path().join(".power")).unwrap();
    let file = vault.path().join(domains::POWER_DOMAINS_FILE);
    std::fs::write(&file, "version: 1\ndomains:\n  - {name: garden, path: 02_Areas/garden, search_priority: [hybrid_reranked]}\n").unwrap();
    let merged = DomainRegistry::load(vault.path(), &policy.policy.domains).unwrap();
    assert_eq!(merged.domains.len(), 2);
    for (text, wanted) in [
        ("version: 2\ndomains: []\n", "version 2"),
        ("version: 1\ndomains:\n  - {name: ops, path: x}\n", "defined twice"),
        ("version: 1\ndomains:\n  - {name: a, path: ../x}\n", "not a vault-relative folder"),
        ("version: 1\ndomains:\n  - {name: a, path: x, search_priority: []}\n", "must not be empty"),
        ("version: 1\ndomains:\n  - {name: a, path: x, rules: [{keywords: [k], weight: 0}]}\n", "must be positive"),
        ("version: 1\ndomains:\n  - {name: a, path: x, colour: red}\n", "colour"),
    ] {
        std::fs::write(&file, text).unwrap();
        let error = DomainRegistry::load(vault.path(), &policy.policy.domains).unwrap_err();
        assert_eq!(error.code(), "policy_invalid", "{text}");
        assert!(error.to_string().contains(wanted), "{text}: {error}");
    }
}

#[test]
fn accepted_search_mode_names_are_the_canonical_ones_and_the_alias_and_all_parse() {
    let canonical: Vec<&str> = SearchMode::CANONICAL.iter().map(|m| m.name()).collect();
    assert_eq!(&SearchMode::ACCEPTED_NAMES[..canonical.len()], canonical.as_slice());
    assert_eq!(SearchMode::ACCEPTED_NAMES[canonical.len()..], ["hybrid_reranked"]);
    for name in SearchMode::ACCEPTED_NAMES {
        assert!(SearchMode::parse(name).is_ok(), "{name}");
    }
    assert!(SearchMode::parse("dense").is_err());
}

#[test]
fn init_skips_the_folders_the_policy_names() {
    let policy = LoadedPolicy::from_texts(None).unwrap().policy;
    assert_eq!(policy.layout.not_created_at_init, ["brain"]);
    let loaded = LoadedPolicy::from_texts(Some("layout:\n  not_created_at_init: []\n")).unwrap();
    assert!(loaded.policy.layout.not_created_at_init.is_empty());
}

#[test]
fn the_default_typed_from_its_text_equals_the_default_typed_from_its_yaml_value() {
    let direct = serde_json::to_value(parse_default().unwrap()).unwrap();
    let (value, _) = parse_layer(DEFAULT_POLICY_YAML, DEFAULT_POLICY_NAME).unwrap();
    let via_value = serde_json::to_value(serde_yaml::from_value::<Policy>(value).unwrap()).unwrap();
    assert_eq!(direct, via_value);
    // An empty override merges nothing: the same policy, another digest.
    let empty = LoadedPolicy::from_texts(Some("")).unwrap();
    assert_eq!(serde_json::to_value(&empty.policy).unwrap(), direct);
    assert_ne!(empty.digest, LoadedPolicy::from_texts(None).unwrap().digest);
}

/// A vault with its state folder (where the parse is kept) and nothing else.
fn vault_with_state_folder() -> tempfile::TempDir {
    #![allow(clippy::disallowed_methods)] // a fixture, written with std::fs
    let vault = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(vault.path().join(".paravault")).unwrap();
    vault
}

#[test]
fn the_kept_parse_is_reused_only_for_the_same_texts_and_never_when_edited() {
    #![allow(clippy::disallowed_methods)] // the test edits the vault's state files with std::fs
    let vault = vault_with_state_folder();
    let root = vault.path();
    let cache = root.join(crate::store::layout::POLICY_CACHE);
    let as_json = |loaded: &LoadedPolicy| serde_json::to_value(&loaded.policy).unwrap();

    // An earlier engine's JSON copy is removed when this engine first keeps its own.
    let retired = root.join(crate::store::layout::RETIRED_POLICY_CACHE);
    std::fs::write(&retired, b"{\"engine\": \"0.0.1\"}").unwrap();
    let first = LoadedPolicy::load(root).unwrap();
    assert!(cache.is_file(), "the parse is kept");
    assert!(!retired.exists(), "the retired JSON copy is gone");
    let again = LoadedPolicy::load(root).unwrap();
    assert_eq!(as_json(&again), as_json(&first));
    assert_eq!(again.digest, first.digest);
    assert_eq!(again.root_daily_log.as_str(), first.root_daily_log.as_str());

    // An override changes the texts: parsed again, exactly as from the texts.
    let override_text = "lint:\n  rules:\n    orphan: blocking\n";
    std::fs::write(root.join(".paravault/policy.yaml"), override_text).unwrap();
    let overridden = LoadedPolicy::load(root).unwrap();
    assert_eq!(overridden.severity("orphan"), Severity::Blocking);
    assert_eq!(as_json(&overridden), as_json(&LoadedPolicy::from_texts(Some(override_text)).unwrap()));
    assert_eq!(LoadedPolicy::load(root).unwrap().severity("orphan"), Severity::Blocking, "the kept parse of the override");

    // The kept parse is what a later load uses: one written for these texts with a rule
    // changed (and its checksum made to match) is the policy in force.
    let kept = std::fs::read(&cache).unwrap();
    let mut parsed = ParsedPolicy::decode(&kept).expect("the kept parse decodes");
    assert_eq!(serde_json::to_value(&parsed.policy).unwrap(), as_json(&overridden), "it round-trips");
    parsed.policy.lint.rules.insert("orphan".into(), Severity::Warning);
    std::fs::write(&cache, parsed.encode().unwrap()).unwrap();
    assert_eq!(LoadedPolicy::load(root).unwrap().severity("orphan"), Severity::Warning, "the kept parse is used");
    // Edited by hand (the checksum no longer matching): parsed again, not used.
    let mut edited = parsed.encode().unwrap();
    edited[0] ^= 0xff;
    std::fs::write(&cache, &edited).unwrap();
    assert_eq!(LoadedPolicy::load(root).unwrap().severity("orphan"), Severity::Blocking);
    // Garbage is parsed again too; an invalid override is still refused.
    std::fs::write(&cache, b"not a kept parse").unwrap();
    assert_eq!(LoadedPolicy::load(root).unwrap().severity("orphan"), Severity::Blocking);
    std::fs::write(root.join(".paravault/policy.yaml"), "lint:\n  rules:\n    orphan: sometimes\n").unwrap();
    assert!(LoadedPolicy::load(root).is_err());
}

#[test]
fn the_root_daily_log_pattern_of_a_kept_parse_compiles_on_first_use_and_is_still_checked() {
    #![allow(clippy::disallowed_methods)] // the test edits the vault's state files with std::fs
    let vault = vault_with_state_folder();
    let root = vault.path();
    // Typed from its texts: compiled at load.
    let first = LoadedPolicy::load(root).unwrap();
    assert!(first.root_daily_log.compiled.get().is_some_and(Option::is_some));
    // The kept parse: compiled on its first use, matching as the compiled one does.
    let kept = LoadedPolicy::load(root).unwrap();
    assert!(kept.root_daily_log.compiled.get().is_none(), "not compiled at load");
    for name in ["2024-05-01_standup.md", "notes.md", "2024-5-1_x.md", "٢٠٢٤-05-01_x.md"] {
        assert_eq!(kept.root_daily_log.is_match(name), first.root_daily_log.is_match(name), "{name}");
    }
    assert!(kept.root_daily_log.compiled.get().is_some());

    // A kept parse whose pattern was edited (its checksum recomputed) is still checked at load:
    // a syntax error is refused as the texts' would be.
    let cache = root.join(crate::store::layout::POLICY_CACHE);
    let mut parsed = ParsedPolicy::decode(&std::fs::read(&cache).unwrap()).expect("the kept parse decodes");
    parsed.policy.layout.root_daily_log_pattern = "^(unclosed".into();
    std::fs::write(&cache, parsed.encode().unwrap()).unwrap();
    let error = LoadedPolicy::load(root).unwrap_err();
    assert!(error.to_string().contains("invalid pattern"), "{error}");
    // From its texts, a pattern past the regex size limit is refused at load (never kept).
    let huge = "layout:\n  root_daily_log_pattern: '(\\w{200}){200}'\n";
    let error = LoadedPolicy::from_texts(Some(huge)).unwrap_err();
    assert!(error.to_string().contains("invalid pattern"), "{error}");
}
