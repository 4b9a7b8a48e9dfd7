//! Unit tests for the approval rules, plan ids and approver secrets.

use super::*;
use crate::policy::approvals::{RuledChange, approver_of, governed_operations};
use crate::policy::{ApprovalRule, ApprovalsPolicy, LoadedPolicy};

fn rule(operations: &[&str], paths: &[&str], approver: Approver) -> ApprovalRule {
    ApprovalRule {
        operations: operations.iter().map(|s| s.to_string()).collect(),
        paths: paths.iter().map(|s| s.to_string()).collect(),
        approver,
    }
}

#[test]
fn no_rule_means_the_caller_approves_except_a_replication_conflict() {
    let policy = ApprovalsPolicy::default();
    for op in Operation::ALL {
        let want = if op == Operation::ReplicationConflict { Approver::Human } else { Approver::Caller };
        assert_eq!(approver_for(&policy, op, ["01_Projects/a.md"]), want, "{}", op.name());
    }
    // Not even a rule can hand a conflict to the caller.
    let caller = ApprovalsPolicy { rules: vec![rule(&["replication_conflict"], &[], Approver::Caller)], review_url: None };
    assert_eq!(approver_for(&caller, Operation::ReplicationConflict, ["01_Projects/a.md"]), Approver::Human);
}

#[test]
fn the_first_matching_rule_decides_per_path_and_one_human_path_wins() {
    let policy = ApprovalsPolicy {
        rules: vec![
            rule(&["apply"], &["01_Projects/public/**"], Approver::Caller),
            rule(&["apply", "archive"], &["01_Projects/**"], Approver::Human),
        ],
        review_url: None,
    };
    assert_eq!(approver_for(&policy, Operation::Apply, ["01_Projects/public/x.md"]), Approver::Caller);
    assert_eq!(approver_for(&policy, Operation::Apply, ["01_Projects/secret/x.md"]), Approver::Human);
    assert_eq!(approver_for(&policy, Operation::Apply, ["03_Resources/x.md"]), Approver::Caller);
    // Another operation is not governed by an apply rule.
    assert_eq!(approver_for(&policy, Operation::Heal, ["01_Projects/secret/x.md"]), Approver::Caller);
    // A multi-note operation needs a person when any one path does.
    assert_eq!(approver_for(&policy, Operation::Archive, ["03_Resources/a.md", "01_Projects/public/b.md"]), Approver::Human);
    assert_eq!(approver_for(&policy, Operation::Archive, ["03_Resources/a.md"]), Approver::Caller);
}

#[test]
fn a_single_star_stays_inside_one_folder_and_no_pattern_means_every_path() {
    let policy = ApprovalsPolicy { rules: vec![rule(&["apply"], &["01_Projects/*.md"], Approver::Human)], review_url: None };
    assert_eq!(approver_for(&policy, Operation::Apply, ["01_Projects/a.md"]), Approver::Human);
    assert_eq!(approver_for(&policy, Operation::Apply, ["01_Projects/deep/a.md"]), Approver::Caller);
    let everything = ApprovalsPolicy { rules: vec![rule(&["heal"], &[], Approver::Human)], review_url: None };
    assert_eq!(approver_for(&everything, Operation::Heal, ["02_Areas/z.md"]), Approver::Human);
}

#[test]
fn an_operation_over_no_path_is_decided_by_a_rule_without_patterns() {
    let none: [&str; 0] = [];
    let policy = ApprovalsPolicy {
        rules: vec![rule(&["link_rot"], &["01_Projects/**"], Approver::Human), rule(&["infra_replicate"], &[], Approver::Human)],
        review_url: None,
    };
    assert_eq!(approver_for(&policy, Operation::InfraReplicate, none), Approver::Human);
    // A pattern rule never decides an empty path set.
    assert_eq!(approver_for(&policy, Operation::LinkRot, none), Approver::Caller);
    assert_eq!(approver_for(&ApprovalsPolicy::default(), Operation::InfraReplicate, none), Approver::Caller);
}

#[test]
fn the_policy_refuses_unknown_and_malformed_rules() {
    let load = |yaml: &str| LoadedPolicy::from_texts(Some(yaml)).map(|_| ()).map_err(|e| e.to_string());
    assert!(load("approvals:\n  rules:\n    - { operations: [apply], paths: [\"01_Projects/**\"], approver: human }\n").is_ok());
    let unknown = load("approvals:\n  rules:\n    - { operations: [deploy], approver: human }\n").unwrap_err();
    assert!(unknown.contains("unknown operation 'deploy'"), "{unknown}");
    // Every operation the issues name is governed now, the goal lifecycle ones included.
    for op in Operation::ALL {
        assert!(load(&format!("approvals:\n  rules:\n    - {{ operations: [{}], approver: human }}\n", op.name())).is_ok(), "{op:?}");
    }
    // infra_replicate changes no note: a path pattern for it could never match, so it is refused.
    let pathed =
        load("approvals:\n  rules:\n    - { operations: [infra_replicate], paths: [\"01_Projects/**\"], approver: human }\n").unwrap_err();
    assert!(pathed.contains("takes no path patterns") || pathed.contains("take no path patterns"), "{pathed}");
    let glob = load("approvals:\n  rules:\n    - { operations: [apply], paths: [\"01_Projects/[\"], approver: human }\n").unwrap_err();
    assert!(glob.contains("path pattern"), "{glob}");
    let empty = load("approvals:\n  rules:\n    - { operations: [], approver: human }\n").unwrap_err();
    assert!(empty.contains("names no operation"), "{empty}");
    let approver = load("approvals:\n  rules:\n    - { operations: [apply], approver: anyone }\n").unwrap_err();
    assert!(approver.contains("anyone"), "{approver}");
}

#[test]
fn a_plan_id_ignores_order_and_after_images_but_not_the_versions() {
    let change = |path: &str, before: &str, text: &str| NoteChange {
        path: VaultPath::parse(path).unwrap(),
        content: Some(text.into()),
        require_absent: false,
        expected_sha256: Some(before.into()),
    };
    let a = [change("01_Projects/a.md", "1", "x"), change("01_Projects/b.md", "2", "y")];
    let b = [change("01_Projects/b.md", "2", "other"), change("01_Projects/a.md", "1", "text")];
    assert_eq!(plan_id_for(Operation::Heal, &a, None), plan_id_for(Operation::Heal, &b, None));
    assert_ne!(plan_id_for(Operation::Heal, &a, None), plan_id_for(Operation::Archive, &a, None));
    let moved = [change("01_Projects/a.md", "3", "x"), change("01_Projects/b.md", "2", "y")];
    assert_ne!(plan_id_for(Operation::Heal, &a, None), plan_id_for(Operation::Heal, &moved, None));
    // A request key tells apart two different requests over the same version of the notes.
    assert_ne!(
        plan_id_for(Operation::GoalsComplete, &a, Some("complete a1")),
        plan_id_for(Operation::GoalsComplete, &a, Some("complete b2"))
    );
    assert_ne!(plan_id_for(Operation::GoalsComplete, &a, Some("complete a1")), plan_id_for(Operation::GoalsComplete, &a, None));
}

#[test]
fn secrets_are_argon2_hashes_and_a_wrong_secret_or_name_is_one_refusal() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(secrets::verify(dir.path(), "alice", "whatever-secret").unwrap_err().code(), "not_configured");
    assert_eq!(secrets::add_approver(dir.path(), "alice", "short").unwrap_err().code(), "invalid_argument");
    assert_eq!(secrets::add_approver(dir.path(), "Alice!", "a long enough secret").unwrap_err().code(), "invalid_argument");
    secrets::add_approver(dir.path(), "alice", "correct horse battery").unwrap();
    let stored = std::fs::read_to_string(dir.path().join(secrets::APPROVERS_FILE)).unwrap();
    assert!(stored.contains("$argon2id$") && !stored.contains("correct horse"), "{stored}");
    secrets::verify(dir.path(), "alice", "correct horse battery").unwrap();
    assert_eq!(secrets::verify(dir.path(), "alice", "correct horse batterY").unwrap_err().code(), "approver_refused");
    assert_eq!(secrets::verify(dir.path(), "mallory", "correct horse battery").unwrap_err().code(), "approver_refused");
    // An approver is never silently replaced.
    assert_eq!(secrets::add_approver(dir.path(), "alice", "another long secret").unwrap_err().code(), "invalid_argument");
    secrets::verify(dir.path(), "alice", "correct horse battery").unwrap();
    assert_eq!(secrets::approver_names(dir.path()).unwrap(), vec!["alice".to_string()]);
}

#[test]
fn a_stored_record_is_read_only_under_its_own_id() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let folder = layout::join(root, layout::APPROVAL_DECISIONS_DIR);
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("aaa.json"), br#"{"proposal_id": "aaa"}"#).unwrap();
    // The same record copied under another id.
    std::fs::write(folder.join("bbb.json"), br#"{"proposal_id": "aaa"}"#).unwrap();
    let read = |id: &str| {
        let belongs = |record: &serde_json::Value| record["proposal_id"] == id;
        read_record(root, layout::APPROVAL_DECISIONS_DIR, id, "a decision record for this proposal", belongs)
    };
    let (record, bytes) = read("aaa").unwrap().expect("its own record");
    assert_eq!((record["proposal_id"].as_str(), bytes.len()), (Some("aaa"), 22));
    match read("bbb").unwrap_err() {
        Error::ProposalInvalid { reason } => {
            assert_eq!(reason, format!("{}/bbb.json is not a decision record for this proposal", layout::APPROVAL_DECISIONS_DIR))
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(read("ccc").unwrap().is_none(), "an absent record is none, not an error");
}

#[test]
fn what_a_change_is_does_not_depend_on_the_tool_that_makes_it() {
    let change = |path, touches_existing, removes| RuledChange { path, touches_existing, removes };
    let worklist = "01_Projects/Project Goals.md";
    let lifecycle = [Operation::GoalsDelete];
    // A creation is only the writer's own operation.
    assert!(governed_operations("04_Archive", None, &[change("01_Projects/new.md", false, false)], worklist, &lifecycle).is_empty());
    // Any edit of an existing note is `apply`, whoever writes it.
    assert_eq!(
        governed_operations("04_Archive", None, &[change("01_Projects/a.md", true, false)], worklist, &lifecycle),
        vec![(Operation::Apply, "01_Projects/a.md".to_string())]
    );
    // A move into the archive is `archive` on both paths (and `apply` on the removed note).
    let moved = governed_operations(
        "04_Archive",
        None,
        &[change("01_Projects/a.md", true, true), change("04_Archive/01_Projects/a.md", false, false)],
        worklist,
        &lifecycle,
    );
    assert!(moved.contains(&(Operation::Archive, "01_Projects/a.md".to_string())), "{moved:?}");
    assert!(moved.contains(&(Operation::Archive, "04_Archive/01_Projects/a.md".to_string())), "{moved:?}");
    // An edit of the worklist is the lifecycle change its goals show, besides `apply`.
    let edited = governed_operations("04_Archive", Some(Operation::Apply), &[change(worklist, true, false)], worklist, &lifecycle);
    assert_eq!(edited, vec![(Operation::Apply, worklist.to_string()), (Operation::GoalsDelete, worklist.to_string())]);
    // The first operation a human rule decides is what a held proposal is recorded as.
    let policy = ApprovalsPolicy { rules: vec![rule(&["goals_delete"], &[worklist], Approver::Human)], review_url: None };
    assert_eq!(approver_of(&policy, &edited), (Approver::Human, Some(Operation::GoalsDelete)));
    assert_eq!(approver_of(&ApprovalsPolicy::default(), &edited), (Approver::Caller, None));
}

#[test]
fn a_worklist_edit_is_the_lifecycle_change_its_goals_show() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("01_Projects")).unwrap();
    let frame = crate::note::worklist::new_frame("Project");
    let goal = |id: &str, status: crate::note::worklist::GoalStatus| crate::note::worklist::Goal {
        id: id.to_string(),
        title: format!("goal {id}"),
        description: None,
        group: None,
        status,
        active: false,
        depends_on: Vec::new(),
        links: Vec::new(),
        created_at: "2026-01-01T00:00:00Z".into(),
        updated_at: "2026-01-01T00:00:00Z".into(),
    };
    let render = |goals: Vec<crate::note::worklist::Goal>| {
        crate::note::worklist::render(&frame, &crate::note::worklist::Worklist { revision: 1, goals }, "2026-01-01T00:00:00Z")
    };
    use crate::note::worklist::GoalStatus::{Archived, Done, Open};
    let before = render(vec![goal("aaaaaaaaaa", Open), goal("bbbbbbbbbb", Open), goal("cccccccccc", Done)]);
    std::fs::write(root.join("01_Projects/Project Goals.md"), &before).unwrap();
    let change = |after: Option<String>| NoteChange {
        path: VaultPath::parse("01_Projects/Project Goals.md").unwrap(),
        content: after,
        require_absent: false,
        expected_sha256: None,
    };
    let ops = |after: Option<String>| goal_lifecycle_changes(root, &change(after)).unwrap();
    // One goal deleted, one completed, one reopened.
    let after = render(vec![goal("aaaaaaaaaa", Done), goal("cccccccccc", Open)]);
    let mut found = ops(Some(after));
    found.sort_by_key(|o| o.name());
    assert_eq!(found, vec![Operation::GoalsComplete, Operation::GoalsDelete, Operation::GoalsReopen]);
    // Archiving; an added open goal is no lifecycle change.
    let after = render(vec![goal("aaaaaaaaaa", Archived), goal("bbbbbbbbbb", Open), goal("cccccccccc", Done), goal("dddddddddd", Open)]);
    assert_eq!(ops(Some(after)), vec![Operation::GoalsArchive]);
    assert!(ops(Some(before.clone())).is_empty());
    // A text that is no worklist could mean anything: every lifecycle operation.
    assert_eq!(ops(Some("free text\n".into())), Operation::GOAL_LIFECYCLE.to_vec());
    // Removing the worklist deletes its goals.
    assert_eq!(ops(None), vec![Operation::GoalsDelete]);
}
