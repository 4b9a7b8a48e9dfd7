//! ctxvault 0.8.1's own answer field names, added beside paravault's (never instead of them),
//! so a client written against the peer that reads its answers by key works unchanged.
//!
//! The seed (../shared/seeds/003_*.txt) names no answer field but `disputed_with`, which
//! paravault uses as it is. These names come from the peer itself (its pydantic response
//! models, compared in docs/compatibility.md "Against ctxvault 0.8.1 itself"): `vault_name`
//! on every vault answer; `results` and `order_by` (query_episodes); `chain`
//! (episode_history); `total`, `episode_count` and `entity_norm` (list_entities);
//! `recorded_at` / `invalidated_at` on an episode (paravault's `known_at` /
//! `closed_known_at`: when the vault learned it and when it stopped holding it, both receipt
//! times); `skill` (read_skill); `filename` (write_skill); `source` and `filetype` (list_docs).
//! The peer's scores, recall counters and metadata have no paravault meaning and are not
//! invented.

use serde_json::{Map, Value, json};

/// `answer` of ctxvault tool `tool` on vault `vault_name` with the peer's names added.
pub fn added(tool: &str, vault_name: &str, mut answer: Value) -> Value {
    let Value::Object(map) = &mut answer else { return answer };
    map.entry("vault_name").or_insert_with(|| json!(vault_name));
    if let Some(Value::Object(episode)) = map.get_mut("episode") {
        episode_names(episode);
    }
    for list in ["episodes", "versions"] {
        if let Some(Value::Array(episodes)) = map.get_mut(list) {
            episodes.iter_mut().filter_map(Value::as_object_mut).for_each(episode_names);
        }
    }
    match tool {
        "query_episodes" => {
            alias(map, "episodes", "results");
            if let Some(order) = map.get("ranking").and_then(|r| r.get("order_by")).cloned() {
                map.entry("order_by").or_insert(order);
            }
        }
        "episode_history" => alias(map, "versions", "chain"),
        "list_entities" => {
            alias(map, "count", "total");
            if let Some(Value::Array(entities)) = map.get_mut("entities") {
                for entity in entities.iter_mut().filter_map(Value::as_object_mut) {
                    alias(entity, "episodes", "episode_count");
                    if let Some(name) = entity.get("entity").and_then(Value::as_str) {
                        // The key paravault matches entities on (case-insensitive).
                        let norm = name.to_lowercase();
                        entity.entry("entity_norm").or_insert_with(|| json!(norm));
                    }
                }
            }
        }
        "read_skill" => {
            let skill = json!({
                "name": map.get("skill_name"), "description": map.get("description"),
                "instructions": map.get("instructions"), "path": map.get("path"),
            });
            map.entry("skill").or_insert(skill);
        }
        "write_skill" => {
            if let Some(name) = map.get("path").and_then(Value::as_str).and_then(|p| p.rsplit('/').next()).map(str::to_string) {
                map.entry("filename").or_insert_with(|| json!(name));
            }
        }
        "list_docs" => {
            if let Some(Value::Array(docs)) = map.get_mut("documents") {
                for doc in docs.iter_mut().filter_map(Value::as_object_mut) {
                    alias(doc, "file_path", "source");
                    if let Some(format) = doc.get("format").and_then(Value::as_str) {
                        let filetype = format!(".{format}");
                        doc.entry("filetype").or_insert_with(|| json!(filetype));
                    }
                }
            }
        }
        _ => {}
    }
    answer
}

/// An episode object with the peer's names for its knowledge times.
fn episode_names(episode: &mut Map<String, Value>) {
    alias(episode, "known_at", "recorded_at");
    alias(episode, "closed_known_at", "invalidated_at");
}

/// Copies `ours` to `theirs` when the answer has the one and not the other.
fn alias(map: &mut Map<String, Value>, ours: &str, theirs: &str) {
    if let Some(value) = map.get(ours).cloned() {
        map.entry(theirs).or_insert(value);
    }
}
