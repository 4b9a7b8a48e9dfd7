//! Tidy checks over the source tree: the module layering of docs/ARCHITECTURE.md and the
//! opening `//!` line of every file.
//!
//! The layering check reads every `crate::<module>` path of `src/` (in `use` declarations,
//! brace groups included, and inline paths) and fails on an edge from a module to one that is
//! not below it in [`LAYERS`]. Unit-test files (`tests.rs`) may reach anything. Within
//! `search`, the reading side (`search/read/`) names only itself and the shared document format,
//! never the building side (`search/build/`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The top-level modules of `src/`, lowest first: a module may use only those before it.
/// docs/ARCHITECTURE.md ("Layers") states the same order.
pub const LAYERS: &[&str] = &[
    "clock",
    "hex",
    "finding",
    "error",
    "user_config",
    "store",
    "policy",
    "note",
    "scan",
    "inventory",
    "inventory_cache",
    "embed",
    "lint",
    "catalog",
    "search",
    "watch",
    "folder_journal",
    "starter",
    "state",
    "write",
    "vault",
    "approvals",
    "retrieval",
    "replicate",
    "maintenance",
    "doctor",
    "handoff",
    "infra",
    "goals",
    "specdocs",
    "memory",
    "api",
    "mcp",
    "web",
    "cli",
];

/// Edges against the order that are known and not yet cut, each with the work that cuts it.
/// The test fails when one of them no longer exists, so this list can only shrink.
const KNOWN_BACK_EDGES: &[(&str, &str, &str)] = &[];

/// The adapters: they speak to the engine through `api` (request and report types), `vault`
/// (`Vault`) and `error` only, besides each other.
const ADAPTERS: &[&str] = &["mcp", "web", "cli"];

/// The engine modules an adapter may name.
const ADAPTER_MAY_USE: &[&str] = &["api", "vault", "error"];

/// Adapter files that still reach past `api`, each with why. The test fails when one of them no
/// longer does, so this list can only shrink.
const ADAPTER_EXCEPTIONS: &[(&str, &str)] = &[];

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of a Rust file with its comments, string literals and char literals blanked
/// (newlines kept, so line numbers hold).
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, span: &[char]| out.extend(span.iter().map(|c| if *c == '\n' { '\n' } else { ' ' }));
    while i < chars.len() {
        let rest = &chars[i..];
        let end = if rest.starts_with(&['/', '/']) {
            i + rest.iter().position(|c| *c == '\n').unwrap_or(rest.len())
        } else if rest.starts_with(&['/', '*']) {
            i + rest.windows(2).position(|w| w == ['*', '/']).map_or(rest.len(), |n| n + 2)
        } else if rest[0] == 'r' && rest.get(1).is_some_and(|c| *c == '"' || *c == '#') && (i == 0 || !chars[i - 1].is_alphanumeric()) {
            let hashes = rest[1..].iter().take_while(|c| **c == '#').count();
            if rest.get(1 + hashes) != Some(&'"') {
                out.push(rest[0]);
                i += 1;
                continue;
            }
            let close: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            let body = 2 + hashes;
            i + body + rest[body..].windows(close.len()).position(|w| w == close.as_slice()).map_or(rest.len() - body, |n| n + close.len())
        } else if rest[0] == '"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != '"' {
                j += if rest[j] == '\\' { 2 } else { 1 };
            }
            i + (j + 1).min(rest.len())
        } else if rest[0] == '\'' && rest.get(1) == Some(&'\\') {
            i + 2 + rest[2..].iter().position(|c| *c == '\'').map_or(rest.len() - 2, |n| n + 1)
        } else if rest[0] == '\'' && rest.get(2) == Some(&'\'') {
            i + 3
        } else {
            out.push(rest[0]);
            i += 1;
            continue;
        };
        blank(&mut out, &chars[i..end.min(chars.len())]);
        i = end;
    }
    out
}

/// The top-level module a file of `src/` belongs to (`None` for the crate roots).
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let module = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (module != "lib" && module != "main").then_some(module)
}

/// The names a path names at `from` (just after a `::`), pushed with their line: the one
/// identifier there, or the first segment of each item of a `{…}` group.
fn names_at(code: &str, from: usize, out: &mut Vec<(usize, String)>) {
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let ident = |s: &str| -> String { s.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect() };
    let rest = &code[from..];
    if let Some(group) = rest.strip_prefix('{') {
        // Items of the group at depth 0, up to its closing brace.
        let mut depth = 0;
        let mut item_start = true;
        for (offset, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => item_start = true,
                c if item_start && (c.is_ascii_alphabetic() || c == '_') => {
                    item_start = false;
                    out.push((line_of(from + 1 + offset), ident(&group[offset..])));
                }
                _ => {}
            }
        }
    } else {
        let name = ident(rest);
        if !name.is_empty() {
            out.push((line_of(from), name));
        }
    }
}

/// The offsets just after each `prefix` in `code` that starts a path (not preceded by an
/// identifier character, `$` or `:`).
fn path_starts<'a>(code: &'a str, prefix: &'a str) -> impl Iterator<Item = usize> + 'a {
    code.match_indices(prefix).filter_map(move |(at, _)| {
        let before = code[..at].chars().next_back();
        (!before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$' || c == ':')).then_some(at + prefix.len())
    })
}

/// Every `(line, module)` a file names through `crate::module`: plain paths and the first
/// segment of each item of a `use crate::{…}` group.
fn crate_references(code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for from in path_starts(code, "crate::") {
        names_at(code, from, &mut out);
    }
    out
}

/// The modules of `src/search/` that its reading side (`src/search/read/`) may name: itself and
/// the shared document format. Not the building side (`build`: sync, publish, GC, the fold,
/// arena appends), nor the facade's path modules (`generation`, `dense`, `tail`), which mix the
/// builders in.
const SEARCH_READ_MAY_USE: &[&str] = &["read", "schema", "stemming", "words", "segment_commit"];

/// Every `(line, module of src/search/)` that the code of the file at `module_path` (its
/// module path below `search`, e.g. `["read", "tail"]`) names, through `crate::search::…` or
/// `super::…` (resolved against `module_path`).
fn search_modules_named(module_path: &[&str], code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for from in path_starts(code, "crate::search::") {
        names_at(code, from, &mut out);
    }
    for mut from in path_starts(code, "super::") {
        let mut up = 1;
        while code[from..].starts_with("super::") {
            from += "super::".len();
            up += 1;
        }
        let Some(base) = module_path.len().checked_sub(up).map(|n| &module_path[..n]) else { continue };
        match base.first() {
            None => names_at(code, from, &mut out),
            Some(top) => out.push((code[..from].matches('\n').count() + 1, top.to_string())),
        }
    }
    out
}

/// The references of the files of `src/search/read/` to modules of search other than
/// [`SEARCH_READ_MAY_USE`], as readable lines, and how many references were read.
fn search_read_violations(src: &Path) -> (Vec<String>, usize) {
    let mut files = Vec::new();
    source_files(&src.join("search").join("read"), &mut files);
    let (mut problems, mut seen) = (Vec::new(), 0);
    for file in files {
        let rel = file.strip_prefix(src.join("search")).unwrap();
        let mut module_path: Vec<&str> = rel.iter().map(|c| c.to_str().unwrap().trim_end_matches(".rs")).collect();
        if module_path.last() == Some(&"mod") {
            module_path.pop();
        }
        let named = search_modules_named(&module_path, &code_only(&std::fs::read_to_string(&file).unwrap()));
        seen += named.len();
        for (line, module) in named {
            if !SEARCH_READ_MAY_USE.contains(&module.as_str()) {
                problems.push(format!("src/search/{}:{line}: the reading side names `search::{module}`", rel.display()));
            }
        }
    }
    (problems, seen)
}

/// `(from, to, "file:line")` for every reference between two top-level modules of `src/`.
fn module_edges(src: &Path) -> Vec<(String, String, String)> {
    let mut files = Vec::new();
    source_files(src, &mut files);
    let mut edges = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src).unwrap();
        if rel.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let Some(module) = module_of(rel) else { continue };
        let code = code_only(&std::fs::read_to_string(&file).unwrap());
        for (line, target) in crate_references(&code) {
            if target != module && !target.starts_with(|c: char| c.is_ascii_uppercase()) {
                edges.push((module.clone(), target, format!("src/{}:{line}", rel.display())));
            }
        }
    }
    edges.sort();
    edges
}

/// The edges of `edges` that go against `layers`, as readable lines.
fn violations(edges: &[(String, String, String)], layers: &[&str]) -> Vec<String> {
    let rank = |m: &str| layers.iter().position(|l| *l == m);
    let mut out = Vec::new();
    for (from, to, at) in edges {
        match (rank(from), rank(to)) {
            (None, _) => out.push(format!("{at}: module `{from}` is not in tidy::LAYERS (add it where it belongs)")),
            (_, None) => out.push(format!("{at}: `{from}` uses `{to}`, which is not in tidy::LAYERS")),
            (Some(a), Some(b)) if b > a && !KNOWN_BACK_EDGES.iter().any(|(f, t, _)| f == from && t == to) => {
                out.push(format!("{at}: `{from}` uses `{to}`, which is above it in the layer order"))
            }
            _ => {}
        }
    }
    out
}

/// The edges from an adapter to an engine module other than `api`, `vault` and `error`, as
/// readable lines (the files of [`ADAPTER_EXCEPTIONS`] aside).
fn adapter_violations(edges: &[(String, String, String)]) -> Vec<String> {
    edges
        .iter()
        .filter(|(from, to, _)| {
            ADAPTERS.contains(&from.as_str()) && !ADAPTERS.contains(&to.as_str()) && !ADAPTER_MAY_USE.contains(&to.as_str())
        })
        .filter(|(_, _, at)| !ADAPTER_EXCEPTIONS.iter().any(|(file, _)| at.starts_with(&format!("{file}:"))))
        .map(|(from, to, at)| format!("{at}: the adapter `{from}` uses the engine module `{to}` (go through crate::api)"))
        .collect()
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_uses_only_modules_below_it() {
    let edges = module_edges(&src_dir());
    assert!(edges.len() > 50, "the parser found only {} edges: it no longer reads the source", edges.len());
    let problems = violations(&edges, LAYERS);
    assert!(problems.is_empty(), "layering violations (docs/ARCHITECTURE.md, Layers):\n{}", problems.join("\n"));
    let present: BTreeSet<(&str, &str)> = edges.iter().map(|(f, t, _)| (f.as_str(), t.as_str())).collect();
    for (from, to, why) in KNOWN_BACK_EDGES {
        assert!(present.contains(&(*from, *to)), "the known back edge {from} -> {to} ({why}) is gone: remove it from KNOWN_BACK_EDGES");
    }
}

#[test]
fn adapters_reach_the_engine_only_through_api_vault_and_error() {
    let edges = module_edges(&src_dir());
    let problems = adapter_violations(&edges);
    assert!(problems.is_empty(), "adapters past the application API (docs/ARCHITECTURE.md, Layers):\n{}", problems.join("\n"));
    for (file, why) in ADAPTER_EXCEPTIONS {
        let still = edges.iter().any(|(from, to, at)| {
            ADAPTERS.contains(&from.as_str())
                && !ADAPTERS.contains(&to.as_str())
                && !ADAPTER_MAY_USE.contains(&to.as_str())
                && at.starts_with(&format!("{file}:"))
        });
        assert!(still, "{file} no longer reaches past api ({why}): remove it from ADAPTER_EXCEPTIONS");
    }
    let planted = vec![("web".to_string(), "search".to_string(), "src/web/pages.rs:1".to_string())];
    assert_eq!(adapter_violations(&planted).len(), 1, "a planted adapter edge to an engine module is reported");
    let allowed = vec![
        ("web".to_string(), "api".to_string(), "src/web/pages.rs:1".to_string()),
        ("cli".to_string(), "mcp".to_string(), "src/cli/mod.rs:1".to_string()),
    ];
    assert!(adapter_violations(&allowed).is_empty(), "api and another adapter are allowed");
}

#[test]
fn search_reading_never_names_the_building_side() {
    let (problems, seen) = search_read_violations(&src_dir());
    assert!(seen > 20, "the parser found only {seen} references in src/search/read/: it no longer reads the source");
    assert!(problems.is_empty(), "search's reading side reaches past itself (docs/internals.md, search/):\n{}", problems.join("\n"));
    let planted = "use super::super::build::arena::ArenaWriter;\nuse crate::search::{read::x, build};\nuse super::dense;\nfn f() { crate::search::tail::fold(); super::super::schema::x(); }\n";
    let named: Vec<String> = search_modules_named(&["read", "tail"], &code_only(planted)).into_iter().map(|(_, m)| m).collect();
    assert_eq!(named, ["read", "build", "tail", "build", "read", "schema"]);
    let refused = named.iter().filter(|m| !SEARCH_READ_MAY_USE.contains(&m.as_str())).count();
    assert_eq!(refused, 3, "the planted paths to build and to the facade's tail are refused");
    let from_mod: Vec<String> = search_modules_named(&["read"], "use super::build::fold;").into_iter().map(|(_, m)| m).collect();
    assert_eq!(from_mod, ["build"], "from read/mod.rs, super is search");
}

#[test]
fn the_layer_list_names_every_module_once() {
    let mut modules = BTreeSet::new();
    for entry in std::fs::read_dir(src_dir()).unwrap() {
        if let Some(module) = module_of(Path::new(&entry.unwrap().file_name())) {
            modules.insert(module);
        }
    }
    let listed: BTreeSet<String> = LAYERS.iter().map(|l| l.to_string()).collect();
    assert_eq!(listed.len(), LAYERS.len(), "a module is listed twice in tidy::LAYERS");
    assert_eq!(modules, listed, "tidy::LAYERS and the modules of src/ differ");
}

#[test]
fn the_parser_sees_use_groups_inline_paths_and_skips_comments() {
    let code = "use crate::{error::Error, search::{self, x}, vault};\n// crate::cli::Cli\n/* crate::api */ fn f<'a>() { crate::mcp::serve(); let s = \"crate::web \\\" crate::web\"; let q = '\"'; let r = r#\"crate::web\"#; crate::Error::X; crate::store::x() }\n";
    let names: Vec<String> = crate_references(&code_only(code)).into_iter().map(|(_, m)| m).collect();
    assert_eq!(names, ["error", "search", "vault", "mcp", "Error", "store"]);
    let edges = vec![("store".to_string(), "vault".to_string(), "src/store/x.rs:1".to_string())];
    assert_eq!(violations(&edges, LAYERS).len(), 1, "a planted upward edge is reported");
    let edges = vec![("vault".to_string(), "store".to_string(), "src/vault.rs:1".to_string())];
    assert!(violations(&edges, LAYERS).is_empty(), "a downward edge is allowed");
}

#[test]
fn every_source_file_opens_with_a_doc_line() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches"] {
        source_files(&root.join(dir), &mut files);
    }
    let missing: Vec<String> = files
        .iter()
        .filter(|f| !std::fs::read_to_string(f).unwrap().starts_with("//!"))
        .map(|f| f.strip_prefix(root).unwrap().display().to_string())
        .collect();
    assert!(missing.is_empty(), "files whose first line is not a `//!` doc line:\n{}", missing.join("\n"));
}

/// Where a write clearance (`write::Cleared`, the proof a mutation passed the approval gate)
/// may be minted: the gate's constructor only in `src/approvals/`, the new-notes one only where
/// `ingest_note` and `synthesize_session` build their mutations, the struct itself only in
/// `write/mod.rs`. Anything else minting one would be a writer past the gate.
const CLEARANCE_MINTS: &[(&str, &str)] = &[
    ("Cleared::by_the_approval_gate", "src/approvals/"),
    ("Cleared::new_notes", "src/write/operations.rs"),
    ("Cleared {", "src/write/mod.rs"),
];

/// `file:line` of every clearance minted outside its place in [`CLEARANCE_MINTS`].
fn clearance_violations(files: &[(String, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (rel, code) in files {
        if rel.ends_with("tests.rs") {
            continue;
        }
        for (mint, place) in CLEARANCE_MINTS {
            for (at, _) in code.match_indices(mint) {
                if !rel.starts_with(place) {
                    out.push(format!("{rel}:{}: `{mint}` outside {place}", code[..at].matches('\n').count() + 1));
                }
            }
        }
    }
    out
}

#[test]
fn only_the_approval_gate_mints_a_write_clearance() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    source_files(&src_dir(), &mut paths);
    let files: Vec<(String, String)> = paths
        .iter()
        .map(|f| (f.strip_prefix(root).unwrap().display().to_string(), code_only(&std::fs::read_to_string(f).unwrap())))
        .collect();
    let minted = files.iter().filter(|(_, code)| code.contains("Cleared::by_the_approval_gate")).count();
    assert!(minted > 0, "the check no longer finds the gate's clearance: it no longer reads the source");
    let problems = clearance_violations(&files);
    assert!(problems.is_empty(), "a write clearance minted past the approval gate (docs/governance.md):\n{}", problems.join("\n"));
    let planted = vec![
        ("src/memory/mod.rs".to_string(), "fn f() { execute(v, m, Cleared::by_the_approval_gate(None)) }".to_string()),
        ("src/specdocs/x.rs".to_string(), "fn g() { Cleared::new_notes(v, &m) }".to_string()),
        ("src/approvals/mod.rs".to_string(), "fn h() { Cleared::by_the_approval_gate(None) }".to_string()),
    ];
    assert_eq!(
        clearance_violations(&planted).len(),
        2,
        "planted mints outside the gate are reported: {:?}",
        clearance_violations(&planted)
    );
}

/// A rule over the source text: where its tokens may appear, and why.
struct Confinement {
    /// What the rule keeps (the assertion message).
    rule: &'static str,
    /// Any of these in a file's code (comments and strings blanked) is a use.
    tokens: &'static [&'static str],
    /// Files or folders (`src/…`, a trailing `/` for a folder) where a use is allowed.
    allowed: &'static [&'static str],
}

/// The invariants docs/ARCHITECTURE.md states about where things happen, each as a
/// [`Confinement`] over `src/` (unit-test files excepted).
const CONFINEMENTS: &[Confinement] = &[
    Confinement {
        rule: "one clock: only src/clock.rs reads the time of day (stamps come from a vault's `Clock`)",
        tokens: &["Utc::now", "SystemTime::now", "Local::now"],
        allowed: &["src/clock.rs"],
    },
    Confinement {
        rule: "the machine's wall clock (never a stamp) only for file ages, generation ages and unique names",
        tokens: &["machine_time(", "machine_nanos(", "machine_utc("],
        allowed: &[
            "src/clock.rs",
            "src/hex.rs",                  // the random source's fallback
            "src/inventory.rs",            // a file is settled once its mtime is older than the walk
            "src/search/build/publish.rs", // a generation's created_at (per-machine state)
            "src/search/read/mod.rs",      // a generation's age; a file's mtime settled
            "src/state/model.rs",          // leftover temporary files older than a bound
        ],
    },
    Confinement {
        rule: "subprocesses only in the gateways: git (store/git.rs) and vaultspec's verbs",
        tokens: &["process::Command", "process::{", "CommandExt", "tokio::process"],
        allowed: &["src/store/git.rs", "src/mcp/vaultspec_gateway.rs"],
    },
    Confinement {
        rule: "async only in the adapters (MCP, web, CLI) and the INFRA-1 socket server",
        tokens: &["async fn", "async move", ".await", "tokio::"],
        allowed: &["src/mcp/", "src/web/", "src/cli/", "src/infra/broker/"],
    },
    Confinement {
        rule: "search is the one engine of ranking: tantivy only in search/ (and the store's directory for it)",
        tokens: &["tantivy::"],
        allowed: &["src/search/", "src/store/tantivy_dir.rs"],
    },
    Confinement {
        rule: "the pure modules (note/, lint/, catalog rendering, findings, hex) do no IO",
        tokens: &[
            "std::fs",
            "fs::",
            "File::",
            "OpenOptions",
            "canonicalize",
            "read_dir",
            "symlink_metadata",
            "std::io::std",
            "std::net",
            "process::Command",
            "durable::",
            "beneath::",
            "nofollow::",
            "journal::",
        ],
        allowed: &[
            "src/clock.rs",
            "src/store/",
            "src/scan.rs",
            "src/inventory",
            "src/embed/",
            "src/search/",
            "src/watch.rs",
            "src/folder_journal/",
            "src/starter.rs",
            "src/state/",
            "src/vault/",
            "src/write/",
            "src/approvals/",
            "src/retrieval.rs",
            "src/replicate/",
            "src/maintenance/",
            "src/doctor.rs",
            "src/handoff/",
            "src/infra/",
            "src/goals/",
            "src/specdocs/",
            "src/memory/",
            "src/api.rs",
            "src/mcp/",
            "src/web/",
            "src/cli/",
            "src/user_config",
            "src/policy/",
            "src/error",
            "src/catalog/mod.rs",
            "src/main.rs",
            "src/lib.rs",
        ],
    },
];

/// The pure modules the last confinement protects: what `allowed` leaves out must be exactly
/// these, so a new module is classified on purpose.
const PURE: &[&str] = &["src/note/", "src/lint/", "src/catalog/render.rs", "src/catalog/entries.rs", "src/finding.rs", "src/hex.rs"];

/// `file:line: token` of every use of a confinement's token outside its allowed places.
fn confinement_violations(files: &[(String, String)], rule: &Confinement) -> Vec<String> {
    let mut out = Vec::new();
    for (rel, code) in files {
        if rel.ends_with("tests.rs") || rule.allowed.iter().any(|place| rel.starts_with(place)) {
            continue;
        }
        for token in rule.tokens {
            for (at, _) in code.match_indices(token) {
                out.push(format!("{rel}:{}: `{token}`", code[..at].matches('\n').count() + 1));
            }
        }
    }
    out
}

fn src_code() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = Vec::new();
    source_files(&src_dir(), &mut paths);
    paths.iter().map(|f| (f.strip_prefix(root).unwrap().display().to_string(), code_only(&std::fs::read_to_string(f).unwrap()))).collect()
}

#[test]
fn clocks_subprocesses_async_and_io_stay_where_the_architecture_puts_them() {
    let files = src_code();
    let mut problems = Vec::new();
    for rule in CONFINEMENTS {
        let found = confinement_violations(&files, rule);
        if !found.is_empty() {
            problems.push(format!("{}:\n  {}", rule.rule, found.join("\n  ")));
        }
        // Each rule still sees what it confines: its tokens occur in an allowed place.
        let seen = files.iter().any(|(rel, code)| {
            !rel.ends_with("tests.rs") && rule.allowed.iter().any(|p| rel.starts_with(p)) && rule.tokens.iter().any(|t| code.contains(t))
        });
        assert!(seen, "the rule '{}' no longer finds its tokens anywhere: it no longer reads the source", rule.rule);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Every source file is either allowed IO or named pure: a new module is classified on purpose.
    let io = CONFINEMENTS.last().unwrap();
    let unclassified: Vec<&String> = files
        .iter()
        .map(|(rel, _)| rel)
        .filter(|rel| !rel.ends_with("tests.rs") && !io.allowed.iter().chain(PURE).any(|p| rel.starts_with(p)))
        .collect();
    assert!(unclassified.is_empty(), "files neither pure nor allowed IO (tidy.rs CONFINEMENTS / PURE): {unclassified:?}");
}

#[test]
fn a_confinement_reports_planted_uses() {
    let planted = vec![
        ("src/memory/mod.rs".to_string(), "fn f() { let t = chrono::Utc::now(); }".to_string()),
        ("src/write/mod.rs".to_string(), "use std::process::Command;\nasync fn g() { x.await }".to_string()),
        ("src/note/body.rs".to_string(), "fn h() { std::fs::read(p) }".to_string()),
        ("src/clock.rs".to_string(), "fn now() { Utc::now() }".to_string()),
        ("src/write/tests.rs".to_string(), "fn t() { Utc::now() }".to_string()),
    ];
    let found: Vec<String> = CONFINEMENTS.iter().flat_map(|rule| confinement_violations(&planted, rule)).collect();
    assert_eq!(
        found,
        [
            "src/memory/mod.rs:1: `Utc::now`",
            "src/write/mod.rs:1: `process::Command`",
            "src/write/mod.rs:2: `async fn`",
            "src/write/mod.rs:2: `.await`",
            "src/note/body.rs:1: `std::fs`",
            "src/note/body.rs:1: `fs::`",
        ],
        "{found:?}"
    );
}
