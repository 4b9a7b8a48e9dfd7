//! Tasks P.O.W.E.R. left in the vault, read where they lie (reference §1.5, §9.1).
//!
//! P.O.W.E.R. keeps a task either as a Task v2 snapshot `.power/tasks/<task_id>.json` (3.6 and
//! later) or as a legacy v1 work packet `.power/work-packets/<task_id>.md` (Markdown with YAML
//! frontmatter, `control_plane: power-work-packet`). Neither file is ever written, moved or
//! deleted here:
//!
//! - `show` and `list` answer a P.O.W.E.R. task as a paravault task snapshot (`imported_from`
//!   names the file and the sha256 of its bytes), reading only; nothing is written.
//! - The first change (`resume`, `checkpoint`, …) imports it once: the task's paravault journal
//!   starts with an `import` event whose result is that snapshot, at P.O.W.E.R.'s revision (so
//!   an agent's `expected_revision` read from P.O.W.E.R. still holds), and the change follows.
//!   From then on paravault's journal is the task; the P.O.W.E.R. file stays as it was.
//!
//! The reference names the states and the fields of both generations; it does not fix every
//! key of the v2 snapshot. The mapping takes the fields the reference names (and v2's `kind:
//! maintenance` / `external_refs.maintenance_phase` for the maintenance profile), ignores the
//! ones paravault has no place for (leases, attempts, priority, execution state), and refuses a
//! file whose named fields are malformed with `power_task_unread` saying which — it never
//! guesses a state.

use serde_json::{Map, Value};

use super::{Authority, Phase, Profile, RequiredInput, TASK_SCHEMA, Task, TaskState, valid_task_id};
use crate::error::{Error, Result};

/// Where P.O.W.E.R.'s Task v2 snapshots lie.
pub(crate) const POWER_TASKS_DIR: &str = ".power/tasks";
/// Where P.O.W.E.R.'s legacy v1 work packets lie.
pub(crate) const POWER_PACKETS_DIR: &str = ".power/work-packets";

/// The two files a P.O.W.E.R. task can be, in the order they are read (v2 first, as
/// P.O.W.E.R. 3.6+ does).
fn candidates(task_id: &str) -> [String; 2] {
    [format!("{POWER_TASKS_DIR}/{task_id}.json"), format!("{POWER_PACKETS_DIR}/{task_id}.md")]
}

/// P.O.W.E.R.'s task `task_id` as a paravault snapshot, if P.O.W.E.R. left one; a file that
/// is there but cannot be read as a task is `power_task_unread` naming it and why.
pub(crate) fn read(root: &std::path::Path, task_id: &str) -> Result<Option<Task>> {
    for rel in candidates(task_id) {
        let Some(bytes) = crate::store::beneath::read(root, &rel)? else { continue };
        let unread = |reason: String| Error::PowerTaskUnread { task_id: task_id.to_string(), file: rel.clone(), reason };
        let fields = if rel.ends_with(".json") { v2_fields(&bytes) } else { v1_fields(&bytes) }.map_err(unread)?;
        let mut task = map_task(task_id, &fields).map_err(unread)?;
        task.imported_from = Some(super::ImportedFrom { file: rel.clone(), sha256: crate::hex::sha256_hex(&bytes) });
        return Ok(Some(task));
    }
    Ok(None)
}

/// The ids of every task P.O.W.E.R. left (both generations), unsorted, deduplicated by the
/// caller.
pub(crate) fn task_ids(root: &std::path::Path) -> Result<Vec<String>> {
    let mut ids = Vec::new();
    for (dir, suffix) in [(POWER_TASKS_DIR, ".json"), (POWER_PACKETS_DIR, ".md")] {
        let listed = crate::store::beneath::Folder::open(root, dir, false).and_then(|f| f.entries());
        match listed {
            Ok(entries) => ids.extend(
                entries.into_iter().filter_map(|(name, _)| name.strip_suffix(suffix).map(str::to_string)).filter(|id| valid_task_id(id)),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(crate::store::nofollow::io_error("reading", dir, e)),
        }
    }
    Ok(ids)
}

/// A Task v2 snapshot's fields.
fn v2_fields(bytes: &[u8]) -> std::result::Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("the snapshot is not a JSON object".into()),
        Err(e) => Err(format!("the snapshot is not valid JSON: {e}")),
    }
}

/// A v1 work packet's frontmatter fields (its body is P.O.W.E.R.'s rendering of them).
fn v1_fields(bytes: &[u8]) -> std::result::Result<Map<String, Value>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "the work packet is not UTF-8".to_string())?;
    let split = crate::note::frontmatter::split(text).map_err(|e| format!("the work packet has no frontmatter block: {e:?}"))?;
    let yaml: serde_yaml::Value =
        serde_yaml::from_str(split.yaml).map_err(|e| format!("the work packet's frontmatter is not YAML: {e}"))?;
    match serde_json::to_value(yaml) {
        Ok(Value::Object(map)) => {
            if let Some(plane) = map.get("control_plane").and_then(Value::as_str)
                && plane != "power-work-packet"
            {
                return Err(format!("control_plane is '{plane}', not power-work-packet"));
            }
            Ok(map)
        }
        Ok(_) => Err("the work packet's frontmatter is not a mapping".into()),
        Err(e) => Err(format!("the work packet's frontmatter has no JSON form: {e}")),
    }
}

fn text(map: &Map<String, Value>, key: &str) -> std::result::Result<Option<String>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(format!("{key} is {other}, not a string")),
    }
}

fn texts(map: &Map<String, Value>, key: &str) -> std::result::Result<Vec<String>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!("{key} holds {other}, not a string")),
            })
            .collect(),
        Some(other) => Err(format!("{key} is {other}, not a list")),
    }
}

/// A kebab-case enum value named by `key`, through serde (the same names paravault's own
/// snapshots use; P.O.W.E.R.'s states and phases are spelled the same).
fn named<T: serde::de::DeserializeOwned>(map: &Map<String, Value>, key: &str, what: &str) -> std::result::Result<Option<T>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => serde_json::from_value(value.clone()).map(Some).map_err(|_| format!("{key} is {value}, not a {what}")),
    }
}

/// P.O.W.E.R.'s fields as a paravault task snapshot (`imported_from` is set by the caller).
fn map_task(task_id: &str, map: &Map<String, Value>) -> std::result::Result<Task, String> {
    match text(map, "task_id")? {
        Some(id) if id == task_id => {}
        Some(id) => return Err(format!("the file holds task '{id}', not '{task_id}'")),
        None => return Err("the file names no task_id".into()),
    }
    let state: TaskState = named(map, "state", "Task v2 state")?.ok_or("the file has no state")?;
    let revision = match map.get("revision") {
        None | Some(Value::Null) => 1,
        Some(value) => value.as_u64().filter(|r| *r >= 1).ok_or_else(|| format!("revision is {value}, not a positive integer"))?,
    };
    let objective = text(map, "objective")?.or(text(map, "title")?).ok_or("the file has neither an objective nor a title")?;
    let title = text(map, "title")?.unwrap_or_else(|| objective.chars().take(256).collect());
    // The maintenance profile: v1's `profile`, or v2's `kind: maintenance`; its phase is v1's
    // `maintenance_phase` or v2's `external_refs.maintenance_phase`.
    let kind = text(map, "kind")?;
    let profile = match named::<Profile>(map, "profile", "profile (standard|maintenance)")? {
        Some(profile) => profile,
        None if kind.as_deref() == Some("maintenance") => Profile::Maintenance,
        None => Profile::Standard,
    };
    let refs = map.get("external_refs").and_then(Value::as_object);
    let phase: Option<Phase> = match named(map, "maintenance_phase", "maintenance phase")? {
        Some(phase) => Some(phase),
        None => match refs {
            Some(refs) => named(refs, "maintenance_phase", "maintenance phase")?,
            None => None,
        },
    };
    // What an input-required task waits for: v2's `required_input`, or v1's blocker fields.
    let required_input = match map.get("required_input").and_then(Value::as_object) {
        Some(input) => Some(RequiredInput {
            blocker: text(input, "blocker")?.unwrap_or_default(),
            required_approval: text(input, "required_approval")?.unwrap_or_else(|| "caller".into()),
        }),
        None if state == TaskState::InputRequired => Some(RequiredInput {
            blocker: text(map, "blocker")?.unwrap_or_default(),
            required_approval: text(map, "required_approval")?.unwrap_or_else(|| "caller".into()),
        }),
        None => None,
    };
    let error_ref = match text(map, "error_ref")? {
        Some(error) => Some(error),
        None if state == TaskState::Failed => text(map, "blocker")?,
        None => None,
    };
    let human_interventions = match map.get("human_interventions") {
        None | Some(Value::Null) => 0,
        Some(value) => {
            value.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(|| format!("human_interventions is {value}, not a count"))?
        }
    };
    let created_at = text(map, "created_at")?.unwrap_or_default();
    let updated_at = text(map, "updated_at")?.unwrap_or_else(|| created_at.clone());
    Ok(Task {
        schema: TASK_SCHEMA.to_string(),
        task_id: task_id.to_string(),
        revision,
        title,
        objective,
        owner: text(map, "owner")?.unwrap_or_else(|| "unknown".into()),
        actor: text(map, "actor")?.unwrap_or_else(|| "agent".into()),
        scope: texts(map, "scope")?,
        authority: named::<Authority>(map, "authority", "authority (read-only|propose|apply)")?.unwrap_or_default(),
        profile,
        state,
        maintenance_phase: phase,
        source_revision: text(map, "source_revision")?.unwrap_or_else(|| "unknown".into()),
        next_action: text(map, "next_action")?,
        required_input,
        error_ref,
        receipt_ids: texts(map, "receipt_ids")?,
        completion: None,
        changed_artifacts: texts(map, "changed_artifacts")?,
        open_gates: texts(map, "open_gates")?,
        human_interventions,
        last_action: text(map, "last_action")?.unwrap_or_else(|| "create".into()),
        last_idempotency_key: text(map, "last_idempotency_key")?.unwrap_or_default(),
        content_capture: "disabled".into(),
        created_at,
        updated_at,
        imported_from: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().unwrap()
    }

    #[test]
    fn a_v2_snapshot_maps_its_named_fields_and_keeps_its_revision() {
        let task = map_task(
            "migrate-db",
            &object(json!({"task_id": "migrate-db", "revision": 7, "state": "input-required", "objective": "Migrate",
                           "owner": "ops", "kind": "maintenance", "external_refs": {"maintenance_phase": "dry-run"},
                           "required_input": {"blocker": "which replica?"}, "priority": 3, "lease": {"holder": "x"}})),
        )
        .unwrap();
        assert_eq!((task.revision, task.state, task.profile), (7, TaskState::InputRequired, Profile::Maintenance));
        assert_eq!(task.maintenance_phase, Some(Phase::DryRun));
        assert_eq!(task.required_input, Some(RequiredInput { blocker: "which replica?".into(), required_approval: "caller".into() }));
        assert_eq!((task.owner.as_str(), task.title.as_str()), ("ops", "Migrate"));
    }

    #[test]
    fn a_v1_packet_reads_from_its_frontmatter() {
        let packet = "---\ncontrol_plane: power-work-packet\nschema_version: 1\ntask_id: rotate-keys\nobjective: Rotate the keys\n\
                      owner: sec\nstate: failed\nblocker: the HSM is offline\nscope: [02_Areas/security]\nauthority: propose\n---\n\n# Rotate\n";
        let task = map_task("rotate-keys", &v1_fields(packet.as_bytes()).unwrap()).unwrap();
        assert_eq!((task.state, task.revision, task.authority), (TaskState::Failed, 1, Authority::Propose));
        assert_eq!(task.error_ref.as_deref(), Some("the HSM is offline"));
        assert_eq!(task.scope, vec!["02_Areas/security".to_string()]);
    }

    #[test]
    fn malformed_fields_are_refused_with_the_reason_never_guessed() {
        for (fields, why) in [
            (json!({"task_id": "t", "revision": 1, "objective": "x"}), "no state"),
            (json!({"task_id": "t", "state": "paused", "objective": "x"}), "not a Task v2 state"),
            (json!({"task_id": "u", "state": "working", "objective": "x"}), "not 't'"),
            (json!({"task_id": "t", "state": "working", "objective": "x", "revision": 0}), "positive integer"),
            (json!({"task_id": "t", "state": "working"}), "neither an objective"),
            (json!({"task_id": "t", "state": "working", "objective": "x", "scope": "a"}), "not a list"),
        ] {
            let err = map_task("t", &object(fields)).unwrap_err();
            assert!(err.contains(why), "{err} should say {why}");
        }
        assert!(v1_fields(b"---\ncontrol_plane: other\n---\n").unwrap_err().contains("not power-work-packet"));
        assert!(v2_fields(b"[1]").unwrap_err().contains("not a JSON object"));
    }
}
