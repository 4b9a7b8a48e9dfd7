//! Tests of the receipt log's open: the chain's tip read back from the end of the file is
//! what reading the whole log gives (torn, empty and foreign last lines included), and an
//! idempotency key is still found though the open read only the tip.

// Fixtures are written with std::fs (clippy.toml names this exception).
#![allow(clippy::disallowed_methods)]

use std::io::Write;
use std::path::Path;

use super::*;

fn receipt(i: u64) -> Receipt {
    Receipt {
        operation: "ingest_note".into(),
        path: format!("03_Resources/note-{i}.md"),
        receipt_schema: RECEIPT_SCHEMA.into(),
        status: if i % 10 == 3 { "aborted".into() } else { "ok".into() },
        idempotency_key: (i.is_multiple_of(5) || i % 10 == 3).then(|| format!("k-{i}")),
        ..Default::default()
    }
}

/// A vault root whose log holds `n` chained receipts, as the writer appends them.
fn vault_with_receipts(n: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(layout::STATE_DIR)).unwrap();
    let mut log = ReceiptLog::load(dir.path()).unwrap();
    for i in 1..=n {
        let mut next = receipt(i);
        next.seq = log.last_seq + 1;
        log.append(dir.path(), next, false).unwrap();
    }
    dir
}

fn read_whole(root: &Path) -> ReceiptLog {
    let mut whole = ReceiptLog { last_hash: GENESIS.to_string(), ..Default::default() };
    whole.catch_up(root).unwrap();
    whole
}

fn append_raw(root: &Path, bytes: &[u8]) {
    std::fs::OpenOptions::new().append(true).open(root.join(layout::RECEIPTS)).unwrap().write_all(bytes).unwrap();
}

fn assert_same_tip(root: &Path, case: &str) {
    let (tip, whole) = (ReceiptLog::load(root).unwrap(), read_whole(root));
    assert_eq!((tip.last_seq, &tip.last_hash, tip.len), (whole.last_seq, &whole.last_hash, whole.len), "{case}");
}

#[test]
fn the_tip_read_back_from_the_end_is_what_reading_the_whole_log_gives() {
    // 600 receipts span several of the blocks the log is read back by.
    let vault = vault_with_receipts(600);
    let root = vault.path();
    assert!(std::fs::metadata(root.join(layout::RECEIPTS)).unwrap().len() > 64 << 10);
    assert_same_tip(root, "whole lines");
    assert_eq!(ReceiptLog::load(root).unwrap().last_seq, 600);
    // A killed append's torn line is left out (and cut by the next append).
    append_raw(root, br#"{"operation":"ingest_note","seq":3"#);
    assert_same_tip(root, "torn last line");
    // A blank line and a line that is not JSON are stepped over, as reading the whole log does.
    append_raw(root, b"\n\n");
    assert_same_tip(root, "empty last line");
    append_raw(root, b"not json\n");
    assert_same_tip(root, "a last line that is not JSON");
    // A line another engine version wrote moves the chain on.
    append_raw(root, b"{\"seq\":601,\"status\":\"ok\",\"future_field\":1}\n");
    assert_same_tip(root, "another version's line");
    assert_eq!(ReceiptLog::load(root).unwrap().last_seq, 601);
    // The next append chains to the tip the open read, and the chain verifies.
    let mut log = ReceiptLog::load(root).unwrap();
    let mut next = receipt(602);
    next.seq = log.last_seq + 1;
    let tip_hash = log.last_hash.clone();
    let appended = log.append(root, next, false).unwrap();
    assert_eq!(appended.prev.as_deref(), Some(tip_hash.as_str()));
    let reread = read_whole(root);
    assert_eq!((reread.last_seq, reread.len), (602, log.len));
}

#[test]
fn a_log_with_no_whole_line_or_one_long_line_has_its_tip_found() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(layout::STATE_DIR)).unwrap();
    let root = dir.path();
    std::fs::write(root.join(layout::RECEIPTS), b"").unwrap();
    assert_same_tip(root, "empty file");
    std::fs::write(root.join(layout::RECEIPTS), br#"{"seq":1"#).unwrap();
    assert_same_tip(root, "one torn line");
    // A line longer than the blocks it is read back by.
    let mut long = receipt(1);
    long.seq = 1;
    long.path = "x".repeat(40 << 10);
    let mut bytes = serde_json::to_vec(&long).unwrap();
    bytes.push(b'\n');
    std::fs::write(root.join(layout::RECEIPTS), &bytes).unwrap();
    assert_same_tip(root, "one long line");
    assert_eq!(ReceiptLog::load(root).unwrap().len, bytes.len() as u64);
}

#[test]
fn an_idempotency_key_is_found_though_the_open_read_only_the_tip() {
    let vault = vault_with_receipts(120);
    let root = vault.path();
    let mut log = ReceiptLog::load(root).unwrap();
    let found = log.first_with_key(root, "k-40").unwrap().cloned().unwrap();
    assert_eq!((found.seq, found.path.as_str()), (40, "03_Resources/note-40.md"));
    // Only an ok receipt replays: an aborted one's key is free.
    assert!(log.first_with_key(root, "k-13").unwrap().is_none());
    assert!(log.first_with_key(root, "k-never").unwrap().is_none());
    // Receipts appended after the index was built (by this process or caught up from
    // another) are indexed too.
    let mut next = receipt(125);
    next.seq = log.last_seq + 1;
    log.append(root, next, false).unwrap();
    assert_eq!(log.first_with_key(root, "k-125").unwrap().map(|r| r.seq), Some(121));
    let mut other = ReceiptLog::load(root).unwrap();
    let mut theirs = receipt(130);
    theirs.seq = other.last_seq + 1;
    other.append(root, theirs, false).unwrap();
    log.catch_up(root).unwrap();
    assert_eq!(log.first_with_key(root, "k-130").unwrap().map(|r| r.seq), Some(122));
}

/// `history` as it was: the whole log read, every line parsed, the newest `limit` kept.
fn history_by_whole_read(root: &Path, limit: usize, after_seq: u64) -> Vec<Value> {
    let text = String::from_utf8_lossy(&read_log(root).unwrap()).into_owned();
    let mut out: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("seq").and_then(Value::as_u64).is_some_and(|s| s > after_seq))
        .collect();
    if out.len() > limit {
        out.drain(..out.len() - limit);
    }
    out
}

#[test]
fn the_history_read_back_from_the_end_is_the_history_read_whole() {
    let vault = vault_with_receipts(2_000);
    let root = vault.path();
    // Lines a reader must step over: garbage, a blank line, a line with bytes that are not
    // UTF-8 inside a string, an out-of-order seq, a torn tail.
    append_raw(root, b"garbage\n\n{\"seq\":2001,\"path\":\"caf\xe9\"}\n{\"seq\":5}\n");
    append_raw(root, br#"{"seq":2002,"torn"#);
    let cases = [(0, 0), (1, 0), (10, 0), (10, 1_990), (3, 2_000), (700, 1_000), (5_000, 0), (50, 10_000)];
    for (limit, after_seq) in cases {
        let got = ReceiptLog::history(root, limit, after_seq).unwrap();
        assert_eq!(got, history_by_whole_read(root, limit, after_seq), "limit {limit}, after {after_seq}");
    }
    assert_eq!(ReceiptLog::history(root, 2, 0).unwrap().iter().map(|v| v["seq"].as_u64()).collect::<Vec<_>>(), [Some(2001), Some(5)]);
    // No log yet: no history.
    let empty = tempfile::tempdir().unwrap();
    assert!(ReceiptLog::history(empty.path(), 10, 0).unwrap().is_empty());
}

/// A receipt at `at` (RFC 3339) with the counts a write records.
fn dated(at: &str, status: &str, notes: usize, approved: bool, counts: Option<(u64, u64, u64)>) -> Receipt {
    let mut r = receipt(1);
    r.at = at.into();
    r.status = status.into();
    if notes > 1 {
        r.notes = Some((0..notes).map(|i| NoteHashes { path: format!("n{i}.md"), ..Default::default() }).collect());
    }
    if approved {
        r.approval = Some(serde_json::json!({"approver": "alice", "channel": "web"}));
    }
    if let Some((scanned, excluded, orphans)) = counts {
        r.notes_scanned = Some(scanned.to_string());
        r.notes_excluded = Some(excluded.to_string());
        r.lint_orphans = Some(orphans.to_string());
    }
    r
}

fn append_all(root: &Path, receipts: Vec<Receipt>) {
    let mut log = ReceiptLog::load(root).unwrap();
    for mut next in receipts {
        next.seq = log.last_seq + 1;
        log.append(root, next, false).unwrap();
    }
}

fn date(text: &str) -> chrono::NaiveDate {
    text.parse().unwrap()
}

#[test]
fn receipt_days_count_each_day_of_the_window_and_catch_up_from_the_logs_length() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(layout::STATE_DIR)).unwrap();
    let root = dir.path();
    append_all(
        root,
        vec![
            dated("2026-11-01T10:00:00Z", "ok", 1, false, Some((10, 1, 1))),
            dated("2026-11-30T23:59:00Z", "ok", 1, false, Some((11, 1, 0))),
            dated("2026-12-01T08:00:00Z", "ok", 3, true, Some((14, 2, 2))),
            dated("2026-12-01T09:00:00Z", "aborted", 1, false, None),
            dated("2026-12-01T10:00:00+02:00", "ok", 1, false, Some((15, 3, 1))),
            dated("2026-12-03T12:00:00Z", "ok", 1, true, None),
        ],
    );
    let counts = ReceiptLog::days(root, date("2026-12-01"), 100).unwrap();
    assert!(!counts.cut);
    let first = &counts.days[&date("2026-12-01")];
    // 10:00+02:00 is 08:00 UTC, the same UTC day; the counts are the last write's (by seq).
    assert_eq!(
        (
            first.receipts,
            first.aborted,
            first.notes_written,
            first.approved_writes,
            first.notes,
            first.invalid_notes,
            first.orphans_written
        ),
        (3, 1, 4, 1, Some(15), Some(3), Some(3))
    );
    let third = &counts.days[&date("2026-12-03")];
    assert_eq!((third.receipts, third.notes_written, third.approved_writes, third.notes, third.orphans_written), (1, 1, 1, None, None));
    assert_eq!(counts.days.keys().copied().collect::<Vec<_>>(), vec![date("2026-12-01"), date("2026-12-03")], "only the window's days");
    assert_eq!(counts.len, std::fs::metadata(root.join(layout::RECEIPTS)).unwrap().len());

    // Caught up with what was appended since: equal to counting again.
    let mut kept = counts.clone();
    append_all(root, vec![dated("2026-12-03T13:00:00Z", "ok", 2, false, Some((16, 0, 0)))]);
    assert!(ReceiptLog::days_catch_up(root, &mut kept, date("2026-12-01")).unwrap());
    let again = ReceiptLog::days(root, date("2026-12-01"), 100).unwrap();
    assert_eq!(kept.days, again.days);
    assert_eq!(kept.len, again.len);
    assert_eq!(again.days[&date("2026-12-03")].notes_written, 3);
    assert_eq!(again.days[&date("2026-12-03")].invalid_notes, Some(0));

    // The cap: the newest receipts only, and `cut` says so.
    let capped = ReceiptLog::days(root, date("2026-12-01"), 2).unwrap();
    assert!(capped.cut);
    assert_eq!(capped.days.values().map(|d| d.receipts).sum::<usize>(), 2);
    // A log shorter than the counts reach is counted again by the caller.
    let mut ahead = again.clone();
    ahead.len += 10;
    assert!(!ReceiptLog::days_catch_up(root, &mut ahead, date("2026-12-01")).unwrap());
}
