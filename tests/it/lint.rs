//! Lint: metadata, freshness, orphans, bad input files, the write gate, and a vault laid out
//! exactly as P.O.W.E.R. lays it out.

use std::collections::BTreeSet;

use paravault::inventory::of_whole;
use paravault::lint;
use paravault::note::path::VaultPath;

use crate::support::{note, rules, snapshot_tree, today, vault};

#[test]
fn metadata_problems_are_named_per_field_and_blocking() {
    let fixture = "-- 01_Projects/no-fm.md --\nno frontmatter here\n\
                   -- 01_Projects/no-type.md --\n---\ntitle: X\ndescription: Y\ntimestamp: 2026-01-01T00:00:00Z\n---\nbody\n\
                   -- 01_Projects/bad-type.md --\n---\ntype: project\ntitle: X\ndescription: Y\ntimestamp: 2026-01-01T00:00:00Z\n---\nbody\n\
                   -- 01_Projects/quoted.md --\n---\ntype: Project\ntitle: X\ndescription: Y\ntimestamp: \"2026-01-01T00:00:00Z\"\n---\n[[no-fm]] [[no-type]] [[bad-type]]\n";
    let (_dir, vault) = vault(fixture);
    let report = vault.lint().unwrap();
    assert!(report.blocking);
    let metadata: Vec<_> =
        report.findings.iter().filter(|f| f.rule.starts_with("metadata")).map(|f| (f.rule, f.path.as_str(), f.message.as_str())).collect();
    assert_eq!(
        metadata,
        vec![
            (
                "metadata-invalid",
                "01_Projects/bad-type.md",
                "type: 'project' is not one of: Archive, Area, Daily Log, Project, Resource, System Guide (did you mean Project?)"
            ),
            ("metadata-missing", "01_Projects/no-fm.md", "no YAML frontmatter block (the note must start with a '---' line)"),
            ("metadata-missing", "01_Projects/no-type.md", "type: is required"),
        ]
    );
    assert_eq!(report.notes_valid, 1, "the quoted timestamp is as valid as an unquoted one");
}

#[test]
fn bad_input_files_are_named_findings_and_never_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("01_Projects")).unwrap();
    let p = dir.path().join("01_Projects");
    std::fs::write(p.join("yaml.md"), "---\ntitle: [unclosed\n---\n").unwrap();
    std::fs::write(p.join("list.md"), "---\n- a\n- b\n---\n").unwrap();
    std::fs::write(p.join("open.md"), "---\ntitle: x\nno close\n").unwrap();
    std::fs::write(
        p.join("bom.md"),
        "\u{feff}---\r\ntype: Project\r\ntitle: B\r\ndescription: D\r\ntimestamp: 2026-01-01T00:00:00Z\r\n---\r\nbody\r\n",
    )
    .unwrap();
    std::fs::write(p.join("latin1.md"), b"---\ntitle: caf\xe9\n---\n").unwrap();
    std::fs::write(p.join("binary.md"), [0u8, 159, 146, 150, 0, 1, 2]).unwrap();
    std::fs::write(p.join("huge.md"), vec![b'a'; 2 * 1024 * 1024]).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", p.join("link.md")).unwrap();
    let before = snapshot_tree(dir.path());
    let vault = paravault::Vault::open(dir.path(), Default::default()).unwrap();
    let report = vault.lint().unwrap();
    let _ = vault.check_markdown().unwrap();
    let found: BTreeSet<_> = report.findings.iter().filter(|f| f.rule != "orphan").map(|f| (f.rule, f.path.as_str())).collect();
    let expected: BTreeSet<_> = [
        ("utf8-bom", "01_Projects/bom.md"),
        ("note-unreadable", "01_Projects/binary.md"),
        ("note-too-large", "01_Projects/huge.md"),
        ("note-unreadable", "01_Projects/latin1.md"),
        ("symlinked-note", "01_Projects/link.md"),
        ("metadata-invalid", "01_Projects/list.md"),
        ("metadata-missing", "01_Projects/open.md"),
        ("metadata-invalid", "01_Projects/yaml.md"),
    ]
    .into_iter()
    .collect();
    assert_eq!(found, expected);
    let yaml = report.findings.iter().find(|f| f.path == "01_Projects/yaml.md" && f.rule != "orphan").unwrap();
    assert!(yaml.message.starts_with("malformed YAML at line 3"), "{}", yaml.message);
    assert_eq!(snapshot_tree(dir.path()), before, "reading and linting never rewrite a file");
}

#[test]
fn freshness_respects_archive_status_and_quotes() {
    let stale =
        |extra: &str| format!("---\ntype: Project\ntitle: S\ndescription: D\ntimestamp: 2026-01-01T00:00:00Z\n{extra}---\n[[hub]]\n");
    let fixture = format!(
        "-- 01_Projects/hub.md --\n{}-- 01_Projects/expired.md --\n{}-- 01_Projects/quoted.md --\n{}-- 01_Projects/archived.md --\n{}-- 04_Archive/old.md --\n{}-- 01_Projects/future.md --\n{}",
        note("Project", "Hub", "[[expired]] [[quoted]] [[archived]] [[future]]\n"),
        stale("expiry: 2026-01-01\n"),
        stale("expiry: '2026-01-01'\n"),
        stale("expiry: 2026-01-01\nstatus: archived\n"),
        stale("expiry: 2026-01-01\n"),
        stale("expiry: 2027-01-01\n"),
    );
    let (_dir, vault) = vault(&fixture);
    let report = vault.lint().unwrap();
    let stale: Vec<_> = report.findings.iter().filter(|f| f.rule == "stale").map(|f| (f.path.as_str(), f.message.as_str())).collect();
    assert_eq!(stale, vec![("01_Projects/expired.md", "expired on 2026-01-01"), ("01_Projects/quoted.md", "expired on 2026-01-01")]);
}

#[test]
fn orphans_ignore_links_from_generated_catalogs() {
    let fixture = format!(
        "-- 01_Projects/a.md --\n{}-- 01_Projects/b.md --\n{}-- 06_Daily_Logs/day.md --\n{}",
        note("Project", "A", "[[b]]\n"),
        note("Project", "B", "no links\n"),
        note("Daily Log", "Day", "exempt folder\n"),
    );
    let (_dir, vault) = vault(&fixture);
    vault.generate_index().unwrap();
    vault.reload();
    let orphans: Vec<_> = rules(&vault.lint().unwrap()).into_iter().filter(|(r, _)| r == "orphan").map(|(_, p)| p).collect();
    assert_eq!(orphans, vec!["01_Projects/a.md".to_string()], "a is listed by a catalog, which does not count");
}

#[test]
fn the_gate_judges_only_the_touched_note_and_links_it_changes() {
    let fixture = format!(
        "-- 01_Projects/bad-elsewhere.md --\n{}-- 03_Resources/linker.md --\n{}-- 01_Projects/target.md --\n{}",
        note("Project", "Bad", "[[does-not-exist]]\n"),
        note("Resource", "Linker", "[[target]]\n"),
        note("Project", "Target", "x\n"),
    );
    let (dir, vault) = vault(&fixture);
    let policy = vault.policy().clone();
    // Writing a good new note passes even though another note has a broken link.
    std::fs::write(dir.path().join("01_Projects/new.md"), note("Project", "New", "[[target]]\n")).unwrap();
    let new = VaultPath::parse("01_Projects/new.md").unwrap();
    let baseline = vault.with_inventory(|inv| of_whole(lint::baseline(inv, &policy, std::slice::from_ref(&new), today()))).unwrap();
    vault.refresh_path(&new).unwrap();
    let verdict = vault.with_inventory(|inv| of_whole(lint::gate(inv, &policy, std::slice::from_ref(&new), &baseline, today()))).unwrap();
    assert!(verdict.passed(), "{verdict:?}");
    // A second note with the same basename makes linker's [[target]] (resolved by name) ambiguous:
    // blocked. new.md's [[target]] still resolves relative to its own folder.
    std::fs::create_dir_all(dir.path().join("02_Areas")).unwrap();
    std::fs::write(dir.path().join("02_Areas/target.md"), note("Area", "Other target", "x\n")).unwrap();
    let dup = VaultPath::parse("02_Areas/target.md").unwrap();
    let baseline = vault.with_inventory(|inv| of_whole(lint::baseline(inv, &policy, std::slice::from_ref(&dup), today()))).unwrap();
    vault.refresh_path(&dup).unwrap();
    let verdict = vault.with_inventory(|inv| of_whole(lint::gate(inv, &policy, std::slice::from_ref(&dup), &baseline, today()))).unwrap();
    let blocked: BTreeSet<_> = verdict.blocking.iter().map(|f| (f.rule, f.path.as_str())).collect();
    assert_eq!(blocked, [("ambiguous-link", "03_Resources/linker.md")].into_iter().collect());
    // An invalid touched note blocks on its own metadata.
    std::fs::write(dir.path().join("01_Projects/new.md"), "---\ntype: Project\n---\n").unwrap();
    vault.refresh_path(&new).unwrap();
    let verdict = vault
        .with_inventory(|inv| of_whole(lint::gate(inv, &policy, std::slice::from_ref(&new), &lint::LinkBaseline::default(), today())))
        .unwrap();
    assert_eq!(verdict.blocking.iter().filter(|f| f.rule == "metadata-invalid" || f.rule == "metadata-missing").count(), 3);
}

/// A vault in P.O.W.E.R.'s exact layout (reference §1): system folders, templates, .power state,
/// root daily logs, a `brain/` vault, `.powerignore`, P.O.W.E.R.-generated catalogs.
#[test]
fn a_power_layout_vault_lints_as_power_would_minus_its_defects() {
    let fixture = format!(
        "-- index.md --\n---\ntype: System Guide\ntitle: Second Brain Index\ntimestamp: 2026-01-01T00:00:00Z\n---\n| Category | Notes | Sub-Index |\n\
         -- log.md --\n---\ntype: System Guide\ntitle: Change Log\ndescription: log\ntimestamp: 2026-01-01T00:00:00Z\n---\n## [2026-01-01] ingest | Created A\n\
         -- 05_Templates/default.md --\nnot a note, never scanned [[nowhere]]\n\
         -- .power/vault.json --\n{{}}\n\
         -- .powerignore --\n03_Resources/private/\n*.draft.md\n\
         -- 03_Resources/private/secret.md --\nno frontmatter, ignored\n\
         -- 01_Projects/plan.draft.md --\nno frontmatter, ignored\n\
         -- 2026-01-02_standup.md --\n{}\
         -- brain/idea.md --\n{}\
         -- 01_Projects/alpha.md --\n{}\
         -- 01_Projects/_index.md --\n---\nx-generated-by: power\nx-index-pages: 1\n---\n[[alpha]]\n\
         -- 03_Resources/img-note.md --\n{}\
         -- 03_Resources/img.png --\nPNG\n\
         -- 04_Archive/old.md --\n{}\
         -- README.md --\nroot readme, out of scope\n",
        note("Daily Log", "Standup", "[[alpha]]\n"),
        note("Resource", "Idea", "[[alpha]]\n"),
        note("Project", "Alpha", "[[idea]] [[img-note]]\n"),
        note("Resource", "Image note", "![[img.png]] [[alpha]]\n"),
        "---\ntype: Archive\ntitle: Old\ndescription: D\ntimestamp: 2020-01-01T00:00:00Z\nexpiry: 2021-01-01\n---\nold\n",
    );
    let (_dir, vault) = vault(&fixture);
    let report = vault.lint().unwrap();
    // P.O.W.E.R. would report the image embed as broken (defect) and the archived expired note
    // as stale, locking all writes (defect). Everything else matches: no findings.
    assert_eq!(rules(&report), vec![]);
    assert_eq!(report.notes_total, 5);
    assert!(!report.blocking);
}
