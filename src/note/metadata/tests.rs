//! Unit tests for OKF metadata validation.

use super::*;
use crate::note::frontmatter::{parse, split};

fn check(yaml: &str) -> (NoteMeta, Vec<MetaProblem>) {
    let text = format!("---\n{yaml}---\nbody\n");
    let s = split(&text).unwrap();
    let fm = parse(&s).unwrap();
    validate(&fm, &LoadedPolicy::from_texts(None).unwrap())
}

const VALID: &str = "type: Project\ntitle: Alpha\ndescription: The alpha plan\ntimestamp: 2024-05-01T10:00:00Z\n";

#[test]
fn valid_note_has_no_problems() {
    let (meta, problems) = check(VALID);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(meta.note_type.as_deref(), Some("Project"));
    assert_eq!(meta.timestamp.unwrap().to_rfc3339(), "2024-05-01T10:00:00+00:00");
}

#[test]
fn quoted_and_unquoted_dates_mean_the_same() {
    let (unquoted, p1) = check(&format!("{VALID}expiry: 2020-01-01\n"));
    let (quoted, p2) = check(&format!("{VALID}expiry: \"2020-01-01\"\n"));
    assert!(p1.is_empty() && p2.is_empty());
    assert_eq!(unquoted.expiry, quoted.expiry);
    assert!(quoted.expiry.is_some());
    let (q, p) = check("type: Project\ntitle: A\ndescription: B\ntimestamp: '2024-05-01T10:00:00Z'\n");
    assert!(p.is_empty(), "{p:?}");
    assert!(q.timestamp.is_some());
}

#[test]
fn problems_name_their_field() {
    let fields = |yaml: &str| check(yaml).1.into_iter().map(|p| p.field).collect::<Vec<_>>();
    assert_eq!(fields("title: A\ndescription: B\ntimestamp: 2024-05-01T10:00:00Z\n"), ["type"]);
    assert_eq!(fields(&VALID.replace("Project", "project")), ["type"]);
    assert_eq!(fields(&VALID.replace("2024-05-01T10:00:00Z", "2024-05-01")), ["timestamp"]);
    assert_eq!(fields(&format!("{VALID}status: done\n")), ["status"]);
    assert_eq!(fields(&format!("{VALID}resource: ftp://x\n")), ["resource"]);
    assert_eq!(fields(&format!("{VALID}tags: [a, 3]\n")), ["tags"]);
    assert_eq!(fields(&format!("{VALID}memory:\n  kind: semantic\n  write_policy: agent-proposed\n")), ["memory.write_policy"]);
    assert_eq!(fields(&VALID.replace("Alpha", &"x".repeat(201))), ["title"]);
    assert!(fields(&format!("{VALID}custom_key: {{nested: [1]}}\n")).is_empty());
}
