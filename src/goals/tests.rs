//! Unit and property tests of the goal model: the worklist format round trip, prefix
//! resolution, and the dependency layering (waves, ready, next).

use proptest::prelude::*;

use super::format;
use super::graph::{Analysis, Unreachable};
use super::*;

fn goal(id: &str, status: GoalStatus, deps: &[&str]) -> Goal {
    Goal {
        id: id.to_string(),
        title: format!("Goal {id}"),
        description: None,
        group: None,
        status,
        active: false,
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        links: Vec::new(),
        created_at: "2026-01-01T00:00:00.000Z".into(),
        updated_at: "2026-01-01T00:00:00.000Z".into(),
    }
}

fn worklist(goals: Vec<Goal>) -> Worklist {
    Worklist { revision: 7, goals }
}

#[test]
fn a_rendered_worklist_parses_back_to_itself_and_keeps_the_frame() {
    let mut first = goal("aaaa1111", GoalStatus::Open, &["bbbb2222"]);
    first.description = Some("Line one\n\n## not a heading\n> quoted\n trailing space \n".into());
    first.group = Some("engine".into());
    first.links = vec!["https://example.com/a,b".into()];
    first.active = true;
    let w = worklist(vec![first, goal("bbbb2222", GoalStatus::Done, &[])]);
    let mut frame = format::new_frame("Project");
    frame.kept_frontmatter.push("owner: ada  # a comment\n".into());
    frame.preamble = "# Project Goals\n\nA person's note about the plan.\n\n".into();
    let text = format::render(&frame, &w, "2026-12-02T04:40:00Z");
    let (parsed_frame, parsed) = format::parse(&text).expect("parses");
    assert_eq!(parsed, w);
    assert_eq!(parsed_frame, frame);
    assert_eq!(format::render(&parsed_frame, &parsed, "2026-12-02T04:40:00Z"), text);
}

#[test]
fn unknown_text_and_a_wrong_schema_are_problems_with_lines_never_dropped() {
    let w = worklist(vec![goal("aaaa1111", GoalStatus::Open, &[])]);
    let text = format::render(&format::new_frame("Project"), &w, "2026-12-02T04:40:00Z");
    let edited = text.replace("- status: open\n", "- status: open\nsome stray text\n");
    let problems = format::parse(&edited).unwrap_err();
    assert!(problems.iter().any(|p| p.message.contains("stray text") && p.line > 5), "{problems:?}");
    let old_schema = text.replace("goals_schema: 1", "goals_schema: 2");
    assert!(format::parse(&old_schema).unwrap_err()[0].message.contains("goals_schema must be 1"));
    let two_active = text.replace("- status: open\n", "- status: open\n- active: true\n");
    let twice = format!("{two_active}\n{}", &two_active[two_active.find("## ").unwrap()..].replace("aaaa1111", "cccc3333"));
    assert!(format::parse(&twice).unwrap_err().iter().any(|p| p.message.contains("more than one goal")));
}

#[test]
fn an_id_or_a_unique_prefix_resolves_and_an_ambiguous_prefix_lists_candidates() {
    let w = worklist(vec![
        goal("abcd1111", GoalStatus::Open, &[]),
        goal("abcd2222", GoalStatus::Open, &[]),
        goal("ffff0000", GoalStatus::Open, &[]),
    ]);
    assert_eq!(resolve(&w, "ABCD2", "id").unwrap(), 1);
    assert_eq!(resolve(&w, "ffff0000", "id").unwrap(), 2);
    let ambiguous = resolve(&w, "abcd", "id").unwrap_err();
    assert_eq!(ambiguous.code, "AMBIGUOUS_ID");
    assert_eq!(ambiguous.details.unwrap()["candidates"].as_array().unwrap().len(), 2);
    assert_eq!(resolve(&w, "0000", "id").unwrap_err().code, "NOT_FOUND");
    assert_eq!(resolve(&w, "  ", "id").unwrap_err().code, "INVALID_INPUT");
}

#[test]
fn waves_place_cycles_missing_and_archived_dependencies_in_unreachable() {
    let w = worklist(vec![
        goal("a000", GoalStatus::Open, &[]),
        goal("b000", GoalStatus::Open, &["a000"]),
        goal("c000", GoalStatus::Open, &["d000"]),
        goal("d000", GoalStatus::Open, &["c000"]),
        goal("e000", GoalStatus::Open, &["gone"]),
        goal("f000", GoalStatus::Archived, &[]),
        goal("g000", GoalStatus::Open, &["f000"]),
        goal("h000", GoalStatus::Open, &["e000", "b000"]),
        goal("i000", GoalStatus::Done, &[]),
        goal("j000", GoalStatus::Open, &["i000"]),
    ]);
    let analysis = Analysis::of(&w);
    let (waves, unreachable) = analysis.waves(&w.goals);
    assert_eq!(waves, vec![vec![0, 9], vec![1]]);
    assert_eq!(unreachable, vec![2, 3, 4, 6, 7]);
    assert_eq!(analysis.unreachable[4], vec![Unreachable::MissingDependency("gone".into())]);
    assert_eq!(analysis.unreachable[6], vec![Unreachable::ArchivedDependency("f000".into())]);
    assert_eq!(analysis.unreachable[2], vec![Unreachable::Cycle]);
    assert_eq!(analysis.unreachable[7], vec![Unreachable::UnreachableDependency("e000".into())]);
    assert_eq!(analysis.ready(&w.goals), vec![0, 9]);
    assert_eq!(analysis.blocks[0], vec![1]);
    assert!(analysis.blocks[8].is_empty(), "a done goal blocks nothing");
}

#[test]
fn the_active_goal_is_claimed_never_ready_and_next_skips_it() {
    let mut first = goal("a000", GoalStatus::Open, &[]);
    first.active = true;
    let w = worklist(vec![first, goal("b000", GoalStatus::Open, &[])]);
    let analysis = Analysis::of(&w);
    assert_eq!(analysis.ready(&w.goals), vec![1]);
    assert_eq!(analysis.next(&w.goals), Some(1));
    assert_eq!(analysis.waves(&w.goals).0, vec![vec![0, 1]], "claimed goals stay in their wave");
}

#[test]
fn revisions_advance_even_within_one_millisecond() {
    assert_eq!(later("2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01.000Z"), "2026-01-01T00:00:01.000Z");
    assert_eq!(later("2026-01-01T00:00:01.000Z", "2026-01-01T00:00:01.000Z"), "2026-01-01T00:00:01.001Z");
    assert_eq!(later("2026-01-01T00:00:05.000Z", "2026-01-01T00:00:01.000Z"), "2026-01-01T00:00:05.001Z");
}

fn arbitrary_worklist() -> impl Strategy<Value = Worklist> {
    (1usize..40).prop_flat_map(|n| {
        let statuses = proptest::collection::vec(0u8..6, n);
        let deps = proptest::collection::vec(proptest::collection::vec(0usize..n + 3, 0..4), n);
        let active = proptest::option::of(0..n);
        (statuses, deps, active).prop_map(move |(statuses, deps, active)| {
            let goals = (0..n)
                .map(|i| {
                    let status = match statuses[i] {
                        0 => GoalStatus::Done,
                        1 => GoalStatus::Archived,
                        _ => GoalStatus::Open,
                    };
                    let depends_on: Vec<String> = deps[i].iter().map(|d| format!("g{d:04}")).collect();
                    let mut g = goal(&format!("g{i:04}"), status, &[]);
                    g.depends_on = depends_on;
                    g.active = active == Some(i) && status == GoalStatus::Open;
                    g
                })
                .collect();
            worklist(goals)
        })
    })
}

fn text_strategy() -> impl Strategy<Value = Option<String>> {
    proptest::option::of("[a-zA-Z0-9 #>\\-\n\t*:]{0,40}".prop_map(|s| s).prop_filter("non-blank", |s| !s.trim().is_empty()))
}

proptest! {
    #[test]
    fn waves_are_a_valid_topological_layering(w in arbitrary_worklist()) {
        let analysis = Analysis::of(&w);
        let goals = &w.goals;
        let (waves, unreachable) = analysis.waves(goals);
        let mut seen = vec![0usize; goals.len()];
        for (k, wave) in waves.iter().enumerate() {
            prop_assert!(!wave.is_empty(), "wave {k} is empty");
            for &i in wave {
                seen[i] += 1;
                prop_assert_eq!(analysis.wave[i], Some(k));
                // Every dependency is done or sits in an earlier wave; one sits in k - 1.
                let mut deepest = None;
                for dep in &goals[i].depends_on {
                    let d = w.position(dep);
                    prop_assert!(d.is_some(), "a placed goal has a missing dependency");
                    let d = d.unwrap();
                    match goals[d].status {
                        GoalStatus::Done => {}
                        GoalStatus::Open => {
                            let dw = analysis.wave[d];
                            prop_assert!(dw.is_some_and(|dw| dw < k), "dependency {dep} of wave {k} is in {dw:?}");
                            deepest = deepest.max(dw);
                        }
                        GoalStatus::Archived => prop_assert!(false, "a placed goal depends on an archived goal"),
                    }
                }
                prop_assert_eq!(deepest.map(|d| d + 1).unwrap_or(0), k, "a goal sits in its earliest wave");
            }
        }
        for &i in &unreachable {
            seen[i] += 1;
            prop_assert!(!analysis.unreachable[i].is_empty());
        }
        for (i, goal) in goals.iter().enumerate() {
            let expected = usize::from(goal.status == GoalStatus::Open);
            prop_assert_eq!(seen[i], expected, "goal {} is in {} places", goal.id, seen[i]);
        }
        for i in analysis.ready(goals) {
            prop_assert_eq!(analysis.wave[i], Some(0), "ready goal {} is not in wave 0", &goals[i].id);
        }
        prop_assert_eq!(analysis.next(goals), analysis.ready(goals).first().copied());
    }

    #[test]
    fn any_worklist_renders_and_parses_back(w in arbitrary_worklist(), texts in proptest::collection::vec(text_strategy(), 40)) {
        let mut w = w;
        for (goal, text) in w.goals.iter_mut().zip(texts) {
            goal.description = text.map(|t| t.replace('\r', ""));
            goal.title = format!("Title {} # with > marks", goal.id);
        }
        let frame = format::new_frame("Project");
        let text = format::render(&frame, &w, "2026-12-02T04:40:00Z");
        let (parsed_frame, parsed) = format::parse(&text).map_err(|p| TestCaseError::fail(format!("{p:?}\n{text}")))?;
        prop_assert_eq!(parsed, w);
        prop_assert_eq!(parsed_frame, frame);
    }
}
