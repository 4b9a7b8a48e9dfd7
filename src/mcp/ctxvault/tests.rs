//! Unit tests of the ctxvault surface's declared answers: every output schema is derived from
//! its report type and declares ctxvault 0.8.1's field names beside paravault's.

use serde_json::Value;

use super::catalog;

/// The derived output schema of ctxvault tool `name`.
fn schema_of(name: &str) -> Value {
    let spec = catalog().into_iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no tool {name}"));
    (spec.output_schema)()
}

/// The names of the properties of `schema` (an object schema).
fn properties(schema: &Value) -> Vec<String> {
    schema["properties"].as_object().map(|p| p.keys().cloned().collect()).unwrap_or_default()
}

#[test]
fn every_answer_on_a_named_vault_declares_vault_name() {
    for spec in catalog() {
        let schema = (spec.output_schema)();
        assert_eq!(schema["type"], "object", "{}", spec.name);
        assert!(schema.get("$defs").is_none(), "{}: definitions are inlined", spec.name);
        if spec.name != "list_vaults" {
            assert!(properties(&schema).contains(&"vault_name".to_string()), "{}", spec.name);
        }
    }
}

#[test]
fn the_peers_names_are_declared_beside_ours() {
    let query = schema_of("query_episodes");
    for name in ["episodes", "results", "ranking", "order_by", "count"] {
        assert!(properties(&query).contains(&name.to_string()), "query_episodes: {name}");
    }
    let episode = &query["properties"]["episodes"]["items"];
    for name in ["known_at", "recorded_at", "closed_known_at", "invalidated_at", "disputed_with"] {
        assert!(properties(episode).contains(&name.to_string()), "episode: {name}");
    }
    assert!(properties(&schema_of("episode_history")).contains(&"chain".to_string()));
    let entities = schema_of("list_entities");
    assert!(properties(&entities).contains(&"total".to_string()));
    let entity = &entities["properties"]["entities"]["items"];
    assert_eq!(properties(entity), ["entity", "entity_norm", "episode_count", "episodes", "spellings"]);
    assert!(properties(&schema_of("read_skill")).contains(&"skill".to_string()));
    assert!(properties(&schema_of("write_skill")).contains(&"filename".to_string()));
    let doc = &schema_of("list_docs")["properties"]["documents"]["items"];
    assert!(properties(doc).contains(&"source".to_string()) && properties(doc).contains(&"filetype".to_string()));
}

#[test]
fn a_proposal_is_declared_beside_the_written_answer() {
    for name in ["write_doc", "write_skill", "write_episode", "dispute_episodes"] {
        let schema = schema_of(name);
        for field in ["receipt", "proposal_id", "proposal", "status", "next"] {
            assert!(properties(&schema).contains(&field.to_string()), "{name}: {field}");
        }
    }
}
