//! Unit tests of the ctxvault surface's answer shapes: the peer's names are added beside
//! paravault's, never instead of them.

use serde_json::json;

use super::peer_names::added;

#[test]
fn query_episodes_gains_results_order_by_and_episode_times_beside_its_own_names() {
    let ours = json!({"episodes": [{"id": "a", "known_at": "2026-01-01T00:00:00Z", "closed_known_at": null}],
                      "count": 1, "ranking": {"method": "none", "order_by": "newest"}});
    let out = added("query_episodes", "eps", ours.clone());
    assert_eq!(out["vault_name"], "eps");
    assert_eq!(out["order_by"], "newest");
    assert_eq!(out["results"], out["episodes"], "the same episodes under the peer's name");
    assert_eq!(out["episodes"][0]["recorded_at"], "2026-01-01T00:00:00Z");
    assert!(out["episodes"][0]["invalidated_at"].is_null());
    for (key, value) in ours.as_object().unwrap() {
        if key != "episodes" {
            assert_eq!(&out[key], value, "{key} is kept as it was");
        }
    }
    assert_eq!(out["episodes"][0]["known_at"], "2026-01-01T00:00:00Z", "ours kept");
}

#[test]
fn history_entities_skills_and_documents_gain_the_peers_names() {
    let history = added("episode_history", "eps", json!({"episode_id": "a", "versions": [{"id": "a", "known_at": "t"}], "count": 1}));
    assert_eq!(history["chain"], history["versions"]);
    assert_eq!(history["chain"][0]["recorded_at"], "t");
    let entities = added("list_entities", "eps", json!({"entities": [{"entity": "Anna", "episodes": 3}], "count": 1}));
    assert_eq!(entities["total"], 1);
    assert_eq!(entities["entities"][0], json!({"entity": "Anna", "episodes": 3, "episode_count": 3, "entity_norm": "anna"}));
    let skill = added(
        "read_skill",
        "skills",
        json!({"skill_name": "Deploy", "description": "d", "instructions": "i", "path": "PROTOCOLS/skills/deploy.md"}),
    );
    assert_eq!(skill["skill"], json!({"name": "Deploy", "description": "d", "instructions": "i", "path": "PROTOCOLS/skills/deploy.md"}));
    let written = added("write_skill", "skills", json!({"skill_name": "Deploy", "path": "PROTOCOLS/skills/deploy.md"}));
    assert_eq!(written["filename"], "deploy.md");
    let docs = added("list_docs", "notes", json!({"documents": [{"file_path": "a/plan.md", "format": "md"}]}));
    assert_eq!(docs["documents"][0]["source"], "a/plan.md");
    assert_eq!(docs["documents"][0]["filetype"], ".md");
}

#[test]
fn a_name_paravault_already_uses_is_never_overwritten() {
    let out = added("warmup_status", "other", json!({"vault_name": "mine", "status": "ready"}));
    assert_eq!(out["vault_name"], "mine");
    let not_object = added("query_episodes", "eps", json!("text"));
    assert_eq!(not_object, json!("text"));
}
