//! Criterion benchmarks of the vault core: full lint, full and one-note catalog regeneration,
//! a long-lived process's refresh after outside edits (watcher + barrier, and the stat-walk
//! fallback), and the physical floor (one durable 4 KiB atomic replace), on a synthetic vault
//! and FOLDOC.
//!
//! Run: `cargo bench --bench vault_core` (see docs/benchmarks.md for the figures and targets).

// Bench fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

#[path = "support/mod.rs"]
mod support;

use std::collections::BTreeSet;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::NaiveDate;
use criterion::measurement::WallTime;
use criterion::{BatchSize, BenchmarkGroup, Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use paravault::catalog::{self, CatalogState};
use paravault::inventory::Inventory;
use paravault::lint;
use paravault::note::path::VaultPath;
use paravault::policy::LoadedPolicy;
use paravault::store::{beneath, durable};
use paravault::vault::{Vault, VaultOptions};

fn today() -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 6, 1).expect("valid date")
}

fn options() -> VaultOptions {
    VaultOptions { today: Some(today()), ..Default::default() }
}

/// A group tuned for slow, whole-vault iterations: 10 samples of one iteration each.
fn slow_group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(4));
    group
}

/// A group for millisecond-scale iterations.
fn fast_group<'a>(c: &'a mut Criterion, name: &str) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    group
}

struct Fixtures {
    /// (label, root, notes) for whole-vault benches.
    vaults: Vec<(String, PathBuf, u64)>,
}

fn note_count(root: &Path) -> u64 {
    let policy = LoadedPolicy::load(root).expect("policy");
    let inventory = Inventory::load(root, &policy).expect("inventory");
    let report = lint::health_report(&inventory, &policy, today());
    eprintln!(
        "[fixture] {}: notes={} valid={} files={} lint counts={:?}",
        root.display(),
        report.notes_total,
        report.notes_valid,
        inventory.files.len(),
        report.counts
    );
    report.notes_total as u64
}

fn fixtures() -> Fixtures {
    let mut vaults = Vec::new();
    let generated = support::fresh_generated_vault(support::DEFAULT_NOTES);
    let n = note_count(&generated);
    vaults.push((format!("gen-{}", support::DEFAULT_NOTES), generated, n));
    if let Some(foldoc) = support::foldoc_working_copy() {
        let n = note_count(&foldoc);
        vaults.push(("foldoc".to_string(), foldoc, n));
    }
    Fixtures { vaults }
}

/// (d) The physical floor: one fsync'd 4 KiB atomic file replace (temp, fsync, rename, fsync dir).
fn bench_floor(c: &mut Criterion) {
    let dir = support::bench_data_dir().join("work").join("floor");
    std::fs::create_dir_all(&dir).expect("floor dir");
    let path = dir.join("page.md");
    let bytes = vec![b'a'; 4096];
    let mut group = fast_group(c, "floor");
    group.bench_function("durable_replace_4KiB", |b| b.iter(|| durable::replace(&dir, &path, black_box(&bytes)).expect("replace")));
    group.finish();
}

/// (a) Full lint: `Inventory::load` (scan + parallel read/parse) + `lint::health_report`.
fn bench_lint(c: &mut Criterion, fx: &Fixtures) {
    let mut group = slow_group(c, "lint_full");
    for (label, root, notes) in &fx.vaults {
        let policy = LoadedPolicy::load(root).expect("policy");
        group.throughput(Throughput::Elements(*notes));
        group.bench_function(label.as_str(), |b| {
            b.iter(|| {
                let inventory = Inventory::load(root, &policy).expect("inventory");
                let report = lint::health_report(&inventory, &policy, today());
                black_box(report.findings.len())
            })
        });
        // Phase split, to see where the time goes.
        group.bench_function(format!("{label}/inventory_load_only"), |b| {
            b.iter(|| black_box(Inventory::load(root, &policy).expect("inventory").records.len()))
        });
        let inventory = Inventory::load(root, &policy).expect("inventory");
        group.bench_function(format!("{label}/health_report_only"), |b| {
            b.iter(|| black_box(lint::health_report(&inventory, &policy, today()).findings.len()))
        });
        // The note reads, paired: every note read by its path (one open; the floor) and through
        // folder handles beneath the root (one `openat` per folder, `O_NOFOLLOW`; what
        // `Inventory::load`, `read_note` and `check_markdown` do), one thread each.
        let notes: Vec<String> = inventory.notes().map(|r| r.path.to_string()).collect();
        group.bench_function(format!("{label}/read_notes_by_path_floor"), |b| {
            b.iter(|| notes.iter().map(|rel| std::fs::read(root.join(rel)).expect("read").len()).sum::<usize>())
        });
        group.bench_function(format!("{label}/read_notes_through_handles"), |b| {
            b.iter(|| notes.iter().map(|rel| beneath::read(root, rel).expect("read").expect("a note").len()).sum::<usize>())
        });
        // What the inventory's scan does (`inventory::read_all`): one folder handle per run of
        // notes in the same folder, one `openat` per note.
        group.bench_function(format!("{label}/read_notes_one_handle_per_folder"), |b| {
            b.iter(|| {
                let mut folder: Option<beneath::Folder> = None;
                let mut total = 0;
                for rel in &notes {
                    let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
                    if folder.as_ref().is_none_or(|f| f.rel() != dir) {
                        folder = Some(beneath::Folder::open(root, dir, false).expect("folder"));
                    }
                    total += folder.as_ref().map_or(0, |f| f.read(name).expect("read").len());
                }
                total
            })
        });
        // What the note readers above the inventory do (`beneath::FolderCursor`, the same walk
        // behind one type: check_markdown, heal, archive, rot's link list, the Markdown fix and
        // search's source reads).
        group.bench_function(format!("{label}/read_notes_folder_cursor"), |b| {
            b.iter(|| {
                let mut cursor = beneath::FolderCursor::new(root);
                notes.iter().map(|rel| cursor.read(rel).expect("read").expect("a note").len()).sum::<usize>()
            })
        });
    }
    group.finish();
}

/// (b) Full catalog generation from scratch: catalogs and state deleted before each iteration,
/// then `Vault::open` + `generate_index` (inventory load, render, fsync'd page writes).
fn bench_catalog_full(c: &mut Criterion, fx: &Fixtures) {
    let mut group = slow_group(c, "catalog_full");
    for (label, root, notes) in &fx.vaults {
        group.throughput(Throughput::Elements(*notes));
        support::remove_catalogs(root);
        let report = Vault::open(root, options()).expect("open").generate_index().expect("index");
        eprintln!(
            "[catalog_full] {label}: dirs={} pages_written={} conflicts={}",
            report.dirs_total,
            report.pages_written.len(),
            report.conflicts.len()
        );
        group.bench_function(format!("{label}/open_load_render_write"), |b| {
            b.iter_batched(
                || support::remove_catalogs(root),
                |()| {
                    let vault = Vault::open(root, options()).expect("open");
                    black_box(vault.generate_index().expect("index").pages_written.len())
                },
                BatchSize::PerIteration,
            )
        });
        // The pure part: plan every directory from an empty state, no page on disk.
        let policy = LoadedPolicy::load(root).expect("policy");
        let inventory = Inventory::load(root, &policy).expect("inventory");
        let state = CatalogState::default();
        group.bench_function(format!("{label}/plan_only"), |b| {
            b.iter(|| {
                black_box(
                    catalog::plan(&inventory, &policy, &state, None, &|_| None, &catalog::CatalogMemo::default())
                        .expect("plan")
                        .writes
                        .len(),
                )
            })
        });
    }
    group.finish();
}

fn load_state(root: &Path) -> CatalogState {
    let bytes = std::fs::read(root.join(".paravault").join("catalog-state.json")).expect("catalog state");
    serde_json::from_slice(&bytes).expect("catalog state JSON")
}

/// (c) One-note catalog regeneration at 2,000 and 20,000 notes.
fn bench_catalog_incremental(c: &mut Criterion, fx: &Fixtures) {
    let mut group = fast_group(c, "catalog_one_note");
    for n in [2_000usize, support::DEFAULT_NOTES] {
        let root = match fx.vaults.iter().find(|(label, _, _)| *label == format!("gen-{n}")) {
            Some((_, root, _)) => root.clone(),
            None => support::fresh_generated_vault(n),
        };
        let vault = Vault::open(&root, options()).expect("open");
        vault.generate_index().expect("index");
        // Note 3 lives in 03_Resources/topic-00/sub-0/.
        let index = 3;
        let rel = support::note_rel_path(n, index);
        let path = VaultPath::parse(&rel).expect("note path");
        let absolute = root.join(&rel);
        let mut version = 0u64;
        let edit = |version: &mut u64| {
            *version += 1;
            std::fs::write(&absolute, support::note_text(n, index, &format!(" v{version}"))).expect("rewrite note");
        };

        edit(&mut version);
        let dirs = vault.refresh_path(&path).expect("refresh");
        let report = vault.regenerate_catalogs(Some(&dirs)).expect("regenerate");
        eprintln!("[catalog_one_note] {n}: dirs={dirs:?} pages_written={:?}", report.pages_written);
        assert!(report.pages_written.iter().any(|p| p.ends_with("sub-0/_index.md")), "the note's catalog page is rewritten");

        // Full one-note path: refresh the inventory, plan, write the changed page(s) + state, fsync.
        group.bench_function(format!("refresh_and_regenerate/{n}"), |b| {
            b.iter_batched(
                || edit(&mut version),
                |()| {
                    let dirs = vault.refresh_path(&path).expect("refresh");
                    black_box(vault.regenerate_catalogs(Some(&dirs)).expect("regenerate").pages_written.len())
                },
                BatchSize::PerIteration,
            )
        });

        // Before fsync: plan (tree, digest, render, verify existing pages) for the changed note's
        // directories against the state remembered before the change, so the page is re-rendered.
        let previous = load_state(&root);
        edit(&mut version);
        let dirs: BTreeSet<String> = vault.refresh_path(&path).expect("refresh");
        let read_page = |p: &VaultPath| std::fs::read(p.under(&root)).ok();
        let planned = vault
            .with_inventory(|inv| catalog::plan(inv, vault.policy(), &previous, Some(&dirs), &read_page, &catalog::CatalogMemo::default()))
            .expect("inventory")
            .expect("plan");
        assert!(planned.rendered_dirs >= 1 && !planned.writes.is_empty(), "the plan re-renders the note's directory");
        group.bench_function(format!("plan_before_fsync/{n}"), |b| {
            b.iter(|| {
                vault
                    .with_inventory(|inv| {
                        black_box(
                            catalog::plan(inv, vault.policy(), &previous, Some(&dirs), &read_page, &catalog::CatalogMemo::default())
                                .expect("plan")
                                .writes
                                .len(),
                        )
                    })
                    .expect("inventory")
            })
        });
        // Phase split: the whole-vault catalog tree that `plan` builds first.
        group.bench_function(format!("tree_only/{n}"), |b| {
            b.iter(|| vault.with_inventory(|inv| black_box(catalog::tree(inv, vault.policy()).counts.len())).expect("inventory"))
        });
        // Restore the catalogs to match the inventory for later runs.
        vault.regenerate_catalogs(Some(&dirs)).expect("regenerate");
    }
    group.finish();
}

/// (e) A long-lived process's view of outside edits: `observe_disk` with nothing changed (the
/// barrier round trip: this bench's floor), after one note was edited outside the engine
/// (barrier + stat + re-read of that note), and the stat-walk fallback over the whole vault
/// (a simulated watcher overflow, nothing changed: what a walk costs per note).
fn bench_freshness(c: &mut Criterion, fx: &Fixtures) {
    let mut group = fast_group(c, "observe_disk");
    for (label, root, _) in &fx.vaults {
        let vault = Vault::open(root, options()).expect("open");
        vault.watch_disk();
        assert_eq!(vault.freshness().mode, "watch", "the watcher must start");
        vault.lint().expect("load");
        let victim = vault.with_inventory(|inv| inv.notes().find(|r| r.valid).map(|r| r.path.clone())).expect("inventory").expect("a note");
        let victim = victim.under(root);
        let original = std::fs::read(&victim).expect("victim");
        group.bench_function(format!("{label}/unchanged_barrier_floor"), |b| b.iter(|| vault.observe_disk().expect("observe")));
        let mut round = 0u64;
        group.bench_function(format!("{label}/one_outside_edit"), |b| {
            b.iter_batched(
                || {
                    round += 1;
                    let mut bytes = original.clone();
                    bytes.extend_from_slice(format!("\nedit {round}\n").as_bytes());
                    std::fs::write(&victim, bytes).expect("outside edit");
                },
                |()| vault.observe_disk().expect("observe"),
                BatchSize::PerIteration,
            )
        });
        std::fs::write(&victim, &original).expect("restore");
        vault.observe_disk().expect("observe");
    }
    group.finish();
    let mut group = slow_group(c, "observe_disk_stat_walk");
    for (label, root, notes) in &fx.vaults {
        let vault = Vault::open(root, options()).expect("open");
        vault.watch_disk();
        vault.lint().expect("load");
        group.throughput(Throughput::Elements(*notes));
        group.bench_function(label.as_str(), |b| {
            b.iter(|| {
                vault.disk_watch().expect("watch").simulate_overflow();
                vault.observe_disk().expect("observe")
            })
        });
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    bench_floor(c);
    let fx = fixtures();
    bench_freshness(c, &fx);
    bench_lint(c, &fx);
    bench_catalog_full(c, &fx);
    bench_catalog_incremental(c, &fx);
}

criterion_group!(vault_core, benches);
criterion_main!(vault_core);
