//! Unit tests of the error-code table.

use super::*;

#[test]
fn every_code_is_in_the_table_once_and_found_by_name() {
    let mut seen = std::collections::BTreeSet::new();
    for row in codes::ALL {
        assert!(seen.insert(row.code), "{} is in the table twice", row.code);
        assert_eq!(row_of(row.code), Some(row));
        assert!(!row.remediation.is_empty(), "{} has no remediation", row.code);
    }
    assert_eq!(row_of("no_such_code"), None);
}

#[test]
fn exit_codes_and_retryability_are_the_documented_ones() {
    let io = Error::io("reading", "x", io::Error::other("boom"));
    assert_eq!((io.code(), io.row().exit as u8, io.retryable()), ("io_error", 4, true));
    let full = Error::io("writing", "x", io::Error::from(io::ErrorKind::StorageFull));
    assert_eq!((full.code(), full.row().exit as u8, full.retryable()), ("disk_full", 4, true));
    let gate = Error::GateRejected { path: "a.md".into(), summary: String::new(), findings: Vec::new() };
    assert_eq!((gate.code(), gate.row().exit as u8, gate.retryable()), ("lint_gate_rejected", 2, false));
    let sync = Error::SyncRefused { excluded: Vec::new() };
    assert_eq!((sync.row().exit as u8, sync.retryable()), (1, false));
    let boundary = Error::VaultBoundary { path: String::new(), reason: String::new() };
    assert_eq!((boundary.code(), boundary.row().exit as u8), ("vault_boundary", 3));
    assert_eq!(codes::RATE_LIMITED.code, "rate_limited");
    assert_eq!((row_of("rate_limited").map(|r| r.retryable), row_of("internal").map(|r| r.retryable)), (Some(true), Some(true)));
}

#[test]
fn the_exit_column_of_errors_md_is_the_table_s() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/errors.md")).unwrap();
    let mut checked = 0;
    for line in doc.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        let (Some(code), Some(Ok(exit))) = (cells.first().map(|c| c.trim_matches('`')), cells.last().map(|c| c.parse::<u8>())) else {
            continue;
        };
        let row = row_of(code).unwrap_or_else(|| panic!("docs/errors.md names `{code}`, which is not in error::codes"));
        assert_eq!(row.exit as u8, exit, "docs/errors.md gives `{code}` exit {exit}, the table {}", row.exit as u8);
        checked += 1;
    }
    assert!(checked >= 30, "only {checked} rows of docs/errors.md were read");
}
