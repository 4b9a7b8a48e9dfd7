//! Catalogs: paging at the byte limit, headers and navigation, ownership of hand-written pages,
//! no churn on unchanged vaults, incremental regeneration, read/ensure_sub_index failing closed.

use paravault::Error;
use paravault::note::path::VaultPath;

use crate::support::{note, snapshot_tree, vault};

fn many_notes(n: usize) -> String {
    (0..n)
        .map(|i| {
            let body = format!("[[n{}]]\n", (i + 1) % n);
            let text = format!(
                "---\ntype: Project\ntitle: Note number {i:04}\ndescription: {}\ntimestamp: 2026-01-01T00:00:00Z\ntags: [alpha, beta]\n---\n{body}",
                "a long description that fills the catalog ".repeat(4)
            );
            format!("-- 01_Projects/big/n{i}.md --\n{text}")
        })
        .collect()
}

#[test]
fn pages_stay_under_the_limit_and_link_to_each_other() {
    let (dir, vault) = vault(&many_notes(300));
    let report = vault.generate_index().unwrap();
    assert!(report.conflicts.is_empty());
    let landing = std::fs::read_to_string(dir.path().join("01_Projects/big/_index.md")).unwrap();
    let pages: usize = landing.lines().find_map(|l| l.strip_prefix("x-index-pages: ")).unwrap().parse().unwrap();
    assert!(pages >= 3, "300 entries of ~400 bytes need several 32 KiB pages, got {pages}");
    let mut seen = 0;
    for n in 1..=pages {
        let name = if n == 1 { "_index.md".to_string() } else { format!("_index-{n}.md") };
        let text = std::fs::read_to_string(dir.path().join("01_Projects/big").join(&name)).unwrap();
        assert!(text.len() <= 32 * 1024, "{name} is {} bytes", text.len());
        assert!(text.contains(&format!("x-index-page: {n}\n")));
        assert!(text.contains("x-generated-by: paravault"));
        assert!(text.contains("x-index-directory: \"01_Projects/big\""));
        assert_eq!(text.contains("Next: [page"), n < pages, "page {n}");
        assert_eq!(text.contains("Previous: [page"), n > 1, "page {n}");
        assert!(text.contains("Parent catalog: [up](<../_index.md>)"));
        seen += text.matches("\n### Note number").count();
    }
    assert_eq!(seen, 300, "every note is listed exactly once");
    assert!(!dir.path().join(format!("01_Projects/big/_index-{}.md", pages + 1)).exists());
    // The category landing page lists the child folder with its note count.
    let top = vault.read_sub_index("01_Projects", 1).unwrap();
    assert!(top.contains("[big/](<./big/_index.md>) — 300 notes"), "{top}");
}

#[test]
fn regenerating_an_unchanged_vault_changes_no_byte() {
    let (dir, vault) = vault(&many_notes(40));
    vault.generate_index().unwrap();
    let before = snapshot_tree(dir.path());
    let mtimes: Vec<_> = ["index.md", "01_Projects/_index.md", ".paravault/catalog-state.json"]
        .iter()
        .map(|p| std::fs::metadata(dir.path().join(p)).unwrap().modified().unwrap())
        .collect();
    let again = paravault::Vault::open(dir.path(), Default::default()).unwrap();
    let report = again.generate_index().unwrap();
    assert!(report.pages_written.is_empty() && report.pages_deleted.is_empty(), "{report:?}");
    assert_eq!(report.dirs_rendered, 0, "remembered digests skip unchanged directories");
    // The kept policy parse is written by the first open that finds the state folder (this
    // vault was first opened before it existed); it is engine state, not a page or a note.
    let kept_parse = |tree: Vec<(String, Vec<u8>)>| -> Vec<(String, Vec<u8>)> {
        tree.into_iter().filter(|(path, _)| path != ".paravault/policy.parsed.bin").collect()
    };
    assert_eq!(kept_parse(snapshot_tree(dir.path())), kept_parse(before));
    let after: Vec<_> = ["index.md", "01_Projects/_index.md", ".paravault/catalog-state.json"]
        .iter()
        .map(|p| std::fs::metadata(dir.path().join(p)).unwrap().modified().unwrap())
        .collect();
    assert_eq!(mtimes, after, "no file was rewritten, not even with identical bytes");
}

#[test]
fn one_changed_note_re_renders_only_its_directories() {
    let fixture: String = (0..6).map(|d| format!("-- 02_Areas/d{d}/n.md --\n{}", note("Area", &format!("N{d}"), "x\n"))).collect();
    let (dir, vault) = vault(&fixture);
    let first = vault.generate_index().unwrap();
    assert_eq!(first.dirs_total, 7);
    std::fs::write(dir.path().join("02_Areas/d3/n.md"), note("Area", "Renamed", "x\n")).unwrap();
    let path = VaultPath::parse("02_Areas/d3/n.md").unwrap();
    let dirs = vault.refresh_path(&path).unwrap();
    let report = vault.regenerate_catalogs(Some(&dirs)).unwrap();
    assert_eq!(report.dirs_rendered, 1, "02_Areas/d3 only: the parent's inputs (child names and counts) are unchanged");
    assert_eq!(report.pages_written, vec!["02_Areas/d3/_index.md".to_string()], "the parent's bytes did not change");
    assert!(std::fs::read_to_string(dir.path().join("02_Areas/d3/_index.md")).unwrap().contains("### Renamed"));
}

#[test]
fn hand_written_catalogs_are_never_overwritten() {
    let hand = "# My own index\n\nI wrote this.\n";
    let fixture = format!("-- 01_Projects/_index.md --\n{hand}-- 01_Projects/a.md --\n{}", note("Project", "A", "x\n"));
    let (dir, vault) = vault(&fixture);
    let report = vault.generate_index().unwrap();
    assert_eq!(report.conflicts, vec!["01_Projects/_index.md".to_string()]);
    assert_eq!(std::fs::read_to_string(dir.path().join("01_Projects/_index.md")).unwrap(), hand);
    // A hand-written page in a folder that needs no catalog is also left alone and reported.
    let fixture = format!("-- 02_Areas/empty/_index.md --\n{hand}-- 01_Projects/a.md --\n{}", note("Project", "A", "x\n"));
    let (dir, vault) = crate::support::vault(&fixture);
    let report = vault.generate_index().unwrap();
    assert_eq!(report.conflicts, vec!["02_Areas/empty/_index.md".to_string()]);
    assert!(dir.path().join("02_Areas/empty/_index.md").exists());
}

#[test]
fn owned_pages_that_are_no_longer_needed_are_deleted() {
    let (dir, vault) = vault(&many_notes(200));
    vault.generate_index().unwrap();
    assert!(dir.path().join("01_Projects/big/_index-2.md").exists());
    for i in 20..200 {
        std::fs::remove_file(dir.path().join(format!("01_Projects/big/n{i}.md"))).unwrap();
    }
    let fresh = paravault::Vault::open(dir.path(), Default::default()).unwrap();
    let report = fresh.generate_index().unwrap();
    assert!(report.pages_deleted.contains(&"01_Projects/big/_index-2.md".to_string()), "{report:?}");
    assert!(!dir.path().join("01_Projects/big/_index-2.md").exists());
    assert!(fresh.read_sub_index("01_Projects", 1).is_ok());
}

/// A vault of `notes` notes in `01_Projects/big` with its catalogs generated and no engine
/// left open (the CLI writes next), and that folder's path.
fn indexed_big_folder(notes: usize) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, vault) = vault(&many_notes(notes));
    vault.generate_index().unwrap();
    let big = dir.path().join("01_Projects/big");
    (dir, big)
}

/// `paravault ingest 01_Projects/big/<name>` (a one-shot process); it must succeed.
fn cli_ingest(root: &std::path::Path, name: &str) {
    let out = crate::support::paravault(
        root,
        &["ingest", &format!("01_Projects/big/{name}"), "--title", name, "--description", "d", "--content", "[[n0]]"],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// A one-shot CLI write never rewrites the whole persisted renderer state, so that state lags
/// the pages such writes render; a later write that shrinks the folder must still delete the
/// pages past its new count (they list notes that are gone), found on disk.
#[test]
fn a_cli_write_deletes_the_pages_an_earlier_cli_write_added() {
    let (dir, big) = indexed_big_folder(20);
    assert!(!big.join("_index-2.md").exists());
    let outside = many_notes(200)
        .split("-- ")
        .skip(21)
        .map(|part| {
            let (path, text) = part.split_once(" --\n").unwrap();
            (path.to_string(), text.to_string())
        })
        .collect::<Vec<_>>();
    for (path, text) in &outside {
        std::fs::write(dir.path().join(path), text).unwrap();
    }
    cli_ingest(dir.path(), "grown");
    let landing = std::fs::read_to_string(big.join("_index.md")).unwrap();
    let pages: usize = landing.lines().find_map(|l| l.strip_prefix("x-index-pages: ")).unwrap().parse().unwrap();
    assert!(pages >= 2 && big.join(format!("_index-{pages}.md")).exists(), "{pages} pages");
    for (path, _) in &outside {
        std::fs::remove_file(dir.path().join(path)).unwrap();
    }
    cli_ingest(dir.path(), "shrunk");
    let landing = std::fs::read_to_string(big.join("_index.md")).unwrap();
    assert!(landing.contains("x-index-pages: 1\n"), "{landing}");
    for n in 2..=pages {
        assert!(!big.join(format!("_index-{n}.md")).exists(), "page {n} of the grown folder was left behind");
    }
    // The engine's own full regeneration then finds nothing left to delete.
    let fresh = paravault::Vault::open(dir.path(), Default::default()).unwrap();
    assert!(fresh.generate_index().unwrap().pages_deleted.is_empty());
}

/// A page past a folder's new count that a person rewrote is theirs: the write that shrinks
/// the folder leaves it as it is, though the remembered state lists it as the engine's.
#[test]
fn a_shrinking_write_leaves_a_rewritten_page_past_the_count_alone() {
    let (dir, big) = indexed_big_folder(200);
    let hand = "# My own second page\n\nI wrote this.\n";
    std::fs::write(big.join("_index-2.md"), hand).unwrap();
    for i in 20..200 {
        std::fs::remove_file(big.join(format!("n{i}.md"))).unwrap();
    }
    cli_ingest(dir.path(), "shrunk");
    assert!(std::fs::read_to_string(big.join("_index.md")).unwrap().contains("x-index-pages: 1\n"));
    assert_eq!(std::fs::read_to_string(big.join("_index-2.md")).unwrap(), hand);
}

#[test]
fn read_sub_index_fails_closed() {
    let (dir, vault) = vault(&format!("-- 01_Projects/a.md --\n{}", note("Project", "A", "x\n")));
    let err = vault.read_sub_index("01_Projects", 1).unwrap_err();
    assert!(matches!(err, Error::CatalogMissing { .. }) && err.to_string().contains("ensure_sub_index"), "{err}");
    let text = vault.ensure_sub_index("01_Projects", 1).unwrap();
    assert!(text.contains("x-index-pages: 1") && text.contains("### A"));
    assert!(matches!(vault.read_sub_index("01_Projects", 2), Err(Error::CatalogMissing { .. })));
    assert!(matches!(vault.read_sub_index("01_Projects", 0), Err(Error::InvalidArgument { .. })));
    assert!(matches!(vault.read_sub_index("PROTOCOLS", 1), Err(Error::InvalidArgument { .. })));
    assert!(matches!(vault.read_sub_index("../etc", 1), Err(Error::InvalidArgument { .. })));
    assert!(matches!(vault.ensure_sub_index("02_Areas", 1), Err(Error::CatalogMissing { .. })));
    // A landing page that declares 3 pages while page 2 is missing fails closed.
    std::fs::write(dir.path().join("01_Projects/_index.md"), "---\nx-generated-by: paravault\nx-index-pages: 3\n---\n").unwrap();
    let err = vault.read_sub_index("01_Projects", 2).unwrap_err();
    assert!(err.to_string().contains("declared but missing"), "{err}");
    std::fs::write(dir.path().join("01_Projects/_index.md"), "---\nx-index-pages: 1\nx-index-pages: 2\n---\n").unwrap();
    assert!(vault.read_sub_index("01_Projects", 1).unwrap_err().to_string().contains("twice"));
}
