//! Link resolution: relative, then vault root, then unique case-insensitive basename; broken and
//! ambiguous reported apart; embeds of non-Markdown files resolve to the file itself.

use crate::support::{note, vault};

fn link_findings(fixture: &str) -> Vec<(String, String, String)> {
    let (_dir, vault) = vault(fixture);
    let report = vault.lint().unwrap();
    report
        .findings
        .into_iter()
        .filter(|f| f.rule.ends_with("-link"))
        .map(|f| (f.rule.to_string(), f.path, f.target.unwrap_or_default()))
        .collect()
}

#[test]
fn resolution_order_and_kinds() {
    let a = note(
        "Project",
        "A",
        "[[b]] [[sub/c]] [[01_Projects/sub/c]] [[C|alias]] [[b#Heading]] [[./sub/c]] [[../02_Areas/d]]\n\
         ![[diagram.png]] ![[b]] [md](sub/c.md) [md2](./sub/c.md#frag) [root](/02_Areas/d.md) ![img](pics/photo.jpg)\n\
         [web](https://example.com/x.md) [mail](mailto:a@b.c) [anchor](#x)\n",
    );
    let fixture = format!(
        "-- 01_Projects/a.md --\n{a}\
         -- 01_Projects/b.md --\n{}\
         -- 01_Projects/sub/c.md --\n{}\
         -- 02_Areas/d.md --\n{}\
         -- 03_Resources/assets/diagram.png --\nPNG\n\
         -- 01_Projects/pics/photo.jpg --\nJPG\n",
        note("Project", "B", "[[a]]\n"),
        note("Project", "C", "[[a]]\n"),
        note("Area", "D", "[[a]]\n"),
    );
    assert_eq!(link_findings(&fixture), vec![]);
}

#[test]
fn broken_and_ambiguous_are_reported_apart() {
    let fixture = format!(
        "-- 01_Projects/a.md --\n{}-- 01_Projects/x/dup.md --\n{}-- 02_Areas/y/dup.md --\n{}",
        note("Project", "A", "[[missing]] [[dup]] [gone](nowhere.md) ![[img.png]]\n"),
        note("Project", "Dup one", "[[a]]\n"),
        note("Area", "Dup two", "[[a]]\n"),
    );
    assert_eq!(
        link_findings(&fixture),
        vec![
            ("ambiguous-link".into(), "01_Projects/a.md".into(), "dup".into()),
            ("broken-link".into(), "01_Projects/a.md".into(), "missing".into()),
            ("broken-link".into(), "01_Projects/a.md".into(), "nowhere.md".into()),
            ("broken-link".into(), "01_Projects/a.md".into(), "img.png".into()),
        ]
    );
}

#[test]
fn image_embed_resolves_to_the_file_not_a_note() {
    // P.O.W.E.R. appends .md and reports ![[img.png]] broken; the file exists, so it resolves.
    let fixture = format!("-- 01_Projects/a.md --\n{}-- 01_Projects/img.png --\nPNG\n", note("Project", "A", "![[img.png]]\n"));
    assert_eq!(link_findings(&fixture), vec![]);
}

#[test]
fn links_in_code_are_ignored_and_lines_are_exact() {
    let fixture = format!("-- 01_Projects/a.md --\n{}", note("Project", "A", "`[[nope]]`\n\n```\n[[nope2]]\n```\n\n[[broken]]\n"));
    let (_dir, vault) = vault(&fixture);
    let report = vault.lint().unwrap();
    let link = report.findings.iter().find(|f| f.rule == "broken-link").unwrap();
    assert_eq!(link.target.as_deref(), Some("broken"));
    assert_eq!(link.line, Some(13));
    assert_eq!(report.findings.iter().filter(|f| f.rule == "broken-link").count(), 1);
}

#[test]
fn relative_links_that_escape_the_vault_are_broken() {
    let fixture = format!("-- 01_Projects/a.md --\n{}", note("Project", "A", "[up](../../../etc/passwd) [[../../x]]\n"));
    let rules: Vec<_> = link_findings(&fixture).into_iter().map(|(r, _, _)| r).collect();
    assert_eq!(rules, ["broken-link", "broken-link"]);
}
