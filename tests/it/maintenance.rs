//! Maintenance through the transaction: rot audit, archive (P.O.W.E.R.'s lock-out scenario,
//! links kept resolving), heal (freshness keeps working), Markdown fixes.

use paravault::Error;
use paravault::maintenance::archive::ArchiveRequest;
use paravault::maintenance::heal::HealRequest;
use paravault::maintenance::markdown_fix::MarkdownRequest;
use paravault::maintenance::rot::{RotRequest, audit};
use paravault::write::operations::IngestRequest;

use crate::support::{note, today, vault};

fn expired(title: &str, body: &str) -> String {
    format!("---\ntype: Project\ntitle: {title}\ndescription: D\ntimestamp: 2026-01-01T00:00:00Z\nexpiry: 2026-02-01 # review\n---\n{body}")
}

#[test]
fn power_lockout_scenario_ends_writable_and_healthy() {
    let fixture = format!(
        "-- 01_Projects/old.md --\n{}-- 01_Projects/img.png --\nPNG\n-- 01_Projects/hub.md --\n{}-- 02_Areas/area.md --\n{}",
        expired("Old plan", "![[img.png]]\n"),
        note("Project", "Hub", "[[old]] and [[01_Projects/old]] and [file](old.md)\n"),
        note("Area", "Area", "[[hub]] [the old plan](../01_Projects/old.md)\n"),
    );
    let (dir, vault) = vault(&fixture);
    assert!(vault.lint().unwrap().blocking, "the expired note is stale");
    // A write elsewhere is not locked out (unlike P.O.W.E.R.).
    vault
        .ingest_note(&IngestRequest {
            name: "00_Inbox/x".into(),
            note_type: "Resource".into(),
            title: "X".into(),
            description: "d".into(),
            content: "[[hub]]".into(),
            ..Default::default()
        })
        .unwrap();
    let preview = vault.archive_notes(&ArchiveRequest::default()).unwrap();
    assert!(preview.dry_run && preview.receipt.is_none());
    assert_eq!(preview.moves.len(), 1);
    assert_eq!(preview.moves[0].to, "04_Archive/01_Projects/old.md");
    assert!(dir.path().join("01_Projects/old.md").exists(), "a dry run moves nothing");
    assert!(matches!(
        vault.archive_notes(&ArchiveRequest { dry_run: false, approved: false }).unwrap_err(),
        Error::ApprovalRequired { .. }
    ));
    let done = vault.archive_notes(&ArchiveRequest { dry_run: false, approved: true }).unwrap();
    assert_eq!(done.receipt.as_ref().unwrap()["status"], "ok");
    assert_eq!(done.link_rewrites.len(), 3, "{:?}", done.link_rewrites);
    let moved = std::fs::read_to_string(dir.path().join("04_Archive/01_Projects/old.md")).unwrap();
    assert!(moved.contains("status: archived") && moved.contains("expiry: 2026-02-01 # review"), "{moved}");
    assert!(!dir.path().join("01_Projects/old.md").exists());
    // The image moved with the note? No: it stays, and the embed must still resolve.
    let reopened =
        paravault::Vault::open(dir.path(), paravault::vault::VaultOptions { today: Some(today()), ..Default::default() }).unwrap();
    let report = reopened.lint().unwrap();
    assert!(!report.blocking, "{:?}", report.findings);
    assert!(!report.findings.iter().any(|f| f.rule.ends_with("-link")), "every link still resolves: {:?}", report.findings);
    let hub = std::fs::read_to_string(dir.path().join("01_Projects/hub.md")).unwrap();
    assert!(
        hub.contains("[[old]]") && hub.contains("[[04_Archive/01_Projects/old]]") && hub.contains("(../04_Archive/01_Projects/old.md)"),
        "{hub}"
    );
    // Catalogs and receipts are current; the vault stays writable.
    assert!(std::fs::read_to_string(dir.path().join("04_Archive/01_Projects/_index.md")).unwrap().contains("old.md"));
    assert!(reopened.verify_history().unwrap().ok);
    reopened
        .ingest_note(&IngestRequest {
            name: "00_Inbox/y".into(),
            note_type: "Resource".into(),
            title: "Y".into(),
            description: "d".into(),
            content: "fine".into(),
            ..Default::default()
        })
        .unwrap();
}

#[test]
fn heal_repairs_and_keeps_freshness_checks_working() {
    let fixture = "-- 01_Projects/2026-03-04_team_sync.md --\n---\ntype: project\nexpiry: '2026-02-01'\ntags: [a, 7]\nstatus: Done\ncustom: {keep: me}   # untouched\n---\n# Heading\n\nFirst paragraph of the note.\n\n[[other]]\n\
                   -- 01_Projects/other.md --\n---\ntype: Project\ntitle: Other\ndescription: D\ntimestamp: 2026-01-01\n---\n[[2026-03-04_team_sync]]\n\
                   -- 01_Projects/broken.md --\n---\ntitle: [unclosed\n---\n";
    let (dir, vault) = vault(fixture);
    let preview = vault.heal_frontmatter(&HealRequest::default()).unwrap();
    assert_eq!(preview.notes.len(), 2, "{preview:?}");
    assert_eq!(preview.refused.len(), 1, "malformed YAML is refused, not guessed");
    let fields: Vec<_> =
        preview.notes.iter().find(|n| n.path.contains("team_sync")).unwrap().repairs.iter().map(|r| r.field.as_str()).collect();
    assert_eq!(fields, ["type", "title", "description", "timestamp", "tags", "status"]);
    assert!(matches!(
        vault.heal_frontmatter(&HealRequest { dry_run: false, approved: false }).unwrap_err(),
        Error::ApprovalRequired { .. }
    ));
    let done = vault.heal_frontmatter(&HealRequest { dry_run: false, approved: true }).unwrap();
    assert_eq!(done.receipt.as_ref().unwrap()["status"], "ok");
    let healed = std::fs::read_to_string(dir.path().join("01_Projects/2026-03-04_team_sync.md")).unwrap();
    assert!(healed.contains("title: \"Team Sync\"") && healed.contains("description: \"First paragraph of the note.\""), "{healed}");
    assert!(healed.contains("expiry: '2026-02-01'\n"), "untouched keys keep their exact text: {healed}");
    assert!(healed.contains("custom: {keep: me}   # untouched\n"));
    assert!(healed.contains("x-status: Done"));
    let other = std::fs::read_to_string(dir.path().join("01_Projects/other.md")).unwrap();
    assert!(other.contains("timestamp: 2026-01-01T00:00:00Z\n"), "dates stay unquoted date-times: {other}");
    // Freshness still works on the healed note: its (quoted) past expiry is reported stale.
    let report = vault.lint().unwrap();
    let stale: Vec<_> = report.findings.iter().filter(|f| f.rule == "stale").map(|f| f.path.as_str()).collect();
    assert_eq!(stale, ["01_Projects/2026-03-04_team_sync.md"]);
    assert_eq!(report.findings.iter().filter(|f| f.rule.starts_with("metadata")).count(), 1, "only the refused note stays invalid");
}

#[test]
fn rot_audit_finds_redundant_outdated_trivial_and_stale_notes() {
    let old = "---\ntype: Daily Log\ntitle: Standup notes March\ndescription: D\ntimestamp: 2025-01-01T00:00:00Z\n---\nA long enough body to not be trivial at all, really.\n";
    let fixture = format!(
        "-- 01_Projects/a.md --\n{}-- 01_Projects/b.md --\n{}-- 01_Projects/c.md --\n{}-- 06_Daily_Logs/old.md --\n{}",
        note("Project", "Quarterly roadmap planning", "A long enough body to not be trivial at all, really.\n"),
        note("Project", "Roadmap planning quarterly review", "A long enough body to not be trivial at all, really.\n"),
        expired("Tiny", "short\n"),
        old,
    );
    let (_dir, vault) = vault(&fixture);
    let report = vault.with_inventory(|inv| audit(inv, vault.policy(), &RotRequest::default(), today())).unwrap().unwrap();
    assert_eq!(report.redundant.len(), 1);
    assert_eq!((report.redundant[0].a.as_str(), report.redundant[0].b.as_str()), ("01_Projects/a.md", "01_Projects/b.md"));
    assert_eq!(report.outdated.iter().map(|o| o.path.as_str()).collect::<Vec<_>>(), ["01_Projects/c.md"]);
    assert_eq!(report.trivial.iter().map(|t| t.path.as_str()).collect::<Vec<_>>(), ["01_Projects/c.md"]);
    assert_eq!(report.stale_freshness.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(), ["06_Daily_Logs/old.md"]);
    let extended = vault
        .with_inventory(|inv| {
            audit(inv, vault.policy(), &RotRequest { extended: true, allow_link_rot: true, ..Default::default() }, today())
        })
        .unwrap()
        .unwrap();
    assert_eq!(extended.skipped.len(), 2, "{:?}", extended.skipped);
    let llm = vault
        .with_inventory(|inv| audit(inv, vault.policy(), &RotRequest { allow_remote_llm: true, ..Default::default() }, today()))
        .unwrap()
        .expect("allow_remote_llm reports its section as skipped instead of failing the audit");
    let skipped: Vec<_> = llm.skipped.iter().map(|s| (s.section, s.reason.starts_with("not_configured"))).collect();
    assert_eq!(skipped, [("semantic_contradictions", true)]);
    assert_eq!(llm.notes_audited, report.notes_audited, "the other sections still ran");
}

#[test]
fn markdown_fix_goes_through_the_transaction() {
    let fixture = format!("-- 01_Projects/a.md --\n{}", note("Project", "A", "text  \n- one\n* two\n"));
    let (dir, vault) = vault(&fixture);
    let report = vault.check_markdown_tool(&MarkdownRequest::default()).unwrap();
    assert_eq!(report.report.findings.len(), 2);
    assert!(matches!(
        vault.check_markdown_tool(&MarkdownRequest { fix: true, approved: false }).unwrap_err(),
        Error::ApprovalRequired { .. }
    ));
    let fixed = vault.check_markdown_tool(&MarkdownRequest { fix: true, approved: true }).unwrap();
    assert_eq!(fixed.fixed_notes, ["01_Projects/a.md"]);
    assert!(fixed.report.findings.is_empty());
    assert!(std::fs::read_to_string(dir.path().join("01_Projects/a.md")).unwrap().ends_with("text\n- one\n- two\n"));
    assert!(vault.verify_history().unwrap().ok);
}

/// The reports a job made: (stage, done, total) in order.
type Reports = std::cell::RefCell<Vec<(&'static str, usize, usize)>>;

/// Each stage's reports start at 0, never go back, and end at the stage's total.
fn assert_stages(reports: &[(&'static str, usize, usize)], stages: &[&str]) {
    let seen: Vec<&str> = reports.iter().map(|r| r.0).fold(Vec::new(), |mut v, s| {
        if v.last() != Some(&s) {
            v.push(s);
        }
        v
    });
    assert_eq!(seen, stages, "{reports:?}");
    for stage in stages {
        let of: Vec<_> = reports.iter().filter(|r| r.0 == *stage).collect();
        assert_eq!(of.first().unwrap().1, 0, "{stage} starts at 0: {of:?}");
        let last = of.last().unwrap();
        assert_eq!(last.1, last.2, "{stage} ends at its total: {of:?}");
        assert!(of.windows(2).all(|w| w[0].1 <= w[1].1 && w[0].2 == w[1].2), "{stage} never goes back: {of:?}");
    }
}

/// Heal and archive say how far they are (issue 46): the CLI draws it, MCP sends it as
/// `notifications/progress`; a stage reports its first, every 64th and its last item.
#[test]
fn heal_and_archive_report_progress_stage_by_stage() {
    let mut fixture = String::new();
    for i in 0..150 {
        fixture.push_str(&format!("-- 00_Inbox/quick-{i:03}.md --\na quick note {i}\n"));
    }
    for i in 0..3 {
        fixture.push_str(&format!("-- 01_Projects/old-{i}.md --\n{}", expired(&format!("Old {i}"), "done long ago\n")));
    }
    let (_dir, vault) = vault(&fixture);
    let reports = Reports::default();
    let healed = vault
        .heal_frontmatter_with_progress(&HealRequest { dry_run: false, approved: true }, &|s, d, t| reports.borrow_mut().push((s, d, t)))
        .unwrap();
    assert_eq!(healed.notes.len(), 150, "{:?}", healed.refused);
    let reports = reports.into_inner();
    assert_stages(&reports, &["reading", "writing"]);
    assert_eq!(reports.iter().filter(|r| r.0 == "reading").count(), 4, "0, 64, 128 and 150 of 150: {reports:?}");
    assert_eq!(reports.last(), Some(&("writing", 150, 150)));

    let reports = Reports::default();
    let archived = vault
        .archive_notes_with_progress(&ArchiveRequest { dry_run: false, approved: true }, &|s, d, t| reports.borrow_mut().push((s, d, t)))
        .unwrap();
    assert_eq!(archived.moves.len(), 3, "{archived:?}");
    let reports = reports.into_inner();
    assert_stages(&reports, &["planning", "writing"]);
    assert_eq!(reports.last(), Some(&("writing", 6, 6)), "three removals and three creations");

    // A dry run reports its reading and nothing it did not do.
    let reports = Reports::default();
    vault.heal_frontmatter_with_progress(&HealRequest::default(), &|s, d, t| reports.borrow_mut().push((s, d, t))).unwrap();
    assert_stages(&reports.into_inner(), &["reading"]);
}
