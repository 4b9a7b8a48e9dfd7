//! Replays the committed fuzz seed corpora (`fuzz/corpus/*`) through the fuzz targets' own
//! assertions, so every `cargo test` on stable re-checks them without cargo-fuzz or nightly.

#[path = "../../fuzz/src/lib.rs"]
mod checks;

use std::path::{Path, PathBuf};

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(target: &str, check: fn(&[u8])) {
    let files = corpus(target);
    assert!(files.len() >= 15, "the {target} seed corpus has only {} files", files.len());
    let mut failures = Vec::new();
    for file in &files {
        let data = std::fs::read(file).unwrap();
        if std::panic::catch_unwind(|| check(&data)).is_err() {
            failures.push(file.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    assert!(failures.is_empty(), "{target} corpus files failing their checks: {failures:?}");
}

#[test]
fn frontmatter_corpus_holds_its_invariants() {
    replay("frontmatter", checks::check_frontmatter);
}

#[test]
fn note_path_corpus_holds_its_invariants() {
    replay("note_path", checks::check_note_path);
}

#[test]
fn query_corpus_holds_its_invariants() {
    replay("query", checks::check_query);
}

#[test]
fn proposal_corpus_holds_its_invariants() {
    replay("proposal", checks::check_proposal);
}

#[test]
fn catalog_corpus_holds_its_invariants() {
    replay("catalog", checks::check_catalog);
}

#[test]
fn mcp_framing_corpus_holds_its_invariants() {
    replay("mcp_framing", checks::check_mcp_framing);
}

/// A cheap stand-in for a fuzzer on stable: random edits of the seeds (byte replacements,
/// insertions of interesting fragments, deletions) through the same assertions.
mod mutated_seeds {
    use proptest::prelude::*;

    const FRAGMENTS: &[&[u8]] = &[
        b"---",
        b"...",
        b"\n",
        b"\r\n",
        b"\r",
        b"\xef\xbb\xbf",
        b"\xc2\xa0",
        b"\xe2\x80\xa8",
        b"\xc2\x85",
        b": ",
        b"- ",
        b"'",
        b"\"",
        b"#",
        b"&a",
        b"*a",
        b"!t ",
        b"? ",
        b"|",
        b">",
        b"{",
        b"}",
        b"[",
        b"]",
        b".nan",
        b"~",
        b"\t",
        b"\xff",
        b"/",
        b"\\",
        b"..",
        b".",
        b"%",
        b"%2e",
        b"%2f",
        b"%25",
        b"%00",
        b"%5c",
        b"%c3",
        b"C:",
        b"\0",
    ];

    #[derive(Debug, Clone)]
    enum Edit {
        Replace(usize, u8),
        Insert(usize, usize),
        Delete(usize, usize),
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            (any::<usize>(), any::<u8>()).prop_map(|(at, b)| Edit::Replace(at, b)),
            (any::<usize>(), 0..FRAGMENTS.len()).prop_map(|(at, f)| Edit::Insert(at, f)),
            (any::<usize>(), 1usize..8).prop_map(|(at, n)| Edit::Delete(at, n)),
        ]
    }

    fn mutate(mut data: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
        for e in edits {
            let len = data.len();
            match *e {
                Edit::Replace(at, b) if len > 0 => data[at % len] = b,
                Edit::Insert(at, f) => {
                    let at = at % (len + 1);
                    data.splice(at..at, FRAGMENTS[f].iter().copied());
                }
                Edit::Delete(at, n) if len > 0 => {
                    let at = at % len;
                    data.drain(at..(at + n).min(len));
                }
                _ => {}
            }
        }
        data
    }

    fn seeds(target: &str) -> Vec<Vec<u8>> {
        super::corpus(target).iter().map(|p| std::fs::read(p).unwrap()).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1500))]

        #[test]
        fn frontmatter(seed in any::<prop::sample::Index>(), edits in prop::collection::vec(edit(), 1..6)) {
            let seeds = seeds("frontmatter");
            let data = mutate(seed.get(&seeds).clone(), &edits);
            super::checks::check_frontmatter(&data);
        }

        #[test]
        fn note_path(seed in any::<prop::sample::Index>(), edits in prop::collection::vec(edit(), 1..6)) {
            let seeds = seeds("note_path");
            let data = mutate(seed.get(&seeds).clone(), &edits);
            super::checks::check_note_path(&data);
        }
    }
}
