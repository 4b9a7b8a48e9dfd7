//! The vault's folder journal: `paravault watch`, a resident process that keeps, from inotify,
//! which folders had an entry created, removed, renamed or written to since a position, and the
//! client a one-shot write asks instead of a stat of every folder and of every file it consults
//! (git's fsmonitor, for the vault).
//!
//! Why it exists: a CLI write proves the vault's file set by a stat of every folder (what the
//! persisted keyed copy holds must still be the disk); at 100,000 notes that is 2,400 cold path
//! walks, 4–6 ms of CPU, more than the rest of the write grows (docs/benchmarks.md). A process
//! that outlives the write can watch instead, and answer in one round trip.
//!
//! The protocol (one question per connection on `.paravault/folders.sock`, text lines):
//! `since <epoch> <seq>` (or `since -`, no position) → `paravault-folder-journal 3 <epoch>
//! <seq> changed`, then per folder changed since the position either one `d <folder>` line
//! (list it again: its own attributes changed, or more of its entries than the journal keeps
//! by name; `d ` alone is the root) or one `e <folder>/<name>` line per entry created, removed,
//! renamed, written to or with its attributes changed (`e <name>` for the root's), then `end`;
//! or `…
//! unknown` and `end` when the journal cannot say (another run, or a run that lost events: a
//! queue overflow, a folder moved or removed). Every event of an edit that finished before the
//! question was sent is in the answer: inotify queues events in the process that makes the
//! change, before its call returns, and the journal reads its whole queue after it reads the
//! question. A name the protocol cannot carry (not UTF-8, or with a control character) makes
//! its folder a `d` line.
//!
//! Trust: the client asks only a socket owned by this user in the engine's own folder (never
//! through a link); any answer it cannot parse, a timeout, or no journal at all means "no
//! journal" (the write stats every folder, as before). Edits made on another machine of a
//! network share reach no inotify queue, so the journal refuses network and FUSE file systems.

mod service;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::inventory::JournalToken;
use crate::inventory::changes::FolderChange;
use crate::inventory_cache::keyed::JournalAnswer;
use crate::store::layout;

pub use service::{FolderJournal, Stop};

/// The first word of every answer, and the protocol's version: 3 names the entries written to
/// in place (a version 2 journal, still running from an older engine, does not, and is no
/// journal to this one).
const GREETING: &str = "paravault-folder-journal 3";

/// How long a write waits for the journal's answer before it stats every folder instead. A
/// journal that is not running is refused at once (no socket, or nobody listening); this bounds
/// only one that is alive but stalled, and is generous so that a loaded machine, where the
/// journal may wait for a core, still gets its answer.
const ASK_TIMEOUT: Duration = Duration::from_secs(1);

/// The most an answer may hold (a line per changed folder): past it, no journal.
const ANSWER_LIMIT: u64 = 64 << 20;

/// What `paravault watch` prints once it watches (one JSON line on stdout).
#[derive(Debug, Clone, Serialize)]
pub struct FolderJournalReady {
    /// "watching".
    pub state: &'static str,
    pub vault: String,
    /// The socket writes ask.
    pub socket: String,
    /// Folders under watch (the engine's own folder aside).
    pub folders: usize,
    pub pid: u32,
}

/// Asks the vault's folder journal what changed since `since`; `None` when no journal
/// answered in time (none runs, or its answer was not understood).
pub fn ask(root: &Path, since: Option<JournalToken>) -> Option<JournalAnswer> {
    let socket = layout::join(root, layout::FOLDER_JOURNAL_SOCKET);
    let meta = std::fs::symlink_metadata(&socket).ok()?;
    if !meta.file_type().is_socket() || meta.uid() != rustix::process::geteuid().as_raw() {
        return None;
    }
    let mut stream = std::os::unix::net::UnixStream::connect(&socket).ok()?;
    stream.set_read_timeout(Some(ASK_TIMEOUT)).ok()?;
    stream.set_write_timeout(Some(ASK_TIMEOUT)).ok()?;
    stream.write_all(question(since).as_bytes()).ok()?;
    let mut text = String::new();
    stream.take(ANSWER_LIMIT).read_to_string(&mut text).ok()?;
    let answer = parse_answer(&text);
    if answer.is_none() {
        tracing::debug!(bytes = text.len(), "the folder journal's answer was not understood; checking every folder");
    }
    answer
}

fn question(since: Option<JournalToken>) -> String {
    match since {
        Some(token) => format!("since {:016x} {}\n", token.epoch, token.seq),
        None => "since -\n".to_string(),
    }
}

/// The position a question names (`Some(None)`: none), or `None` when it is not a question.
fn parse_question(line: &str) -> Option<Option<JournalToken>> {
    let rest = line.strip_suffix('\n').unwrap_or(line).strip_prefix("since ")?;
    if rest == "-" {
        return Some(None);
    }
    let (epoch, seq) = rest.split_once(' ')?;
    Some(Some(JournalToken { epoch: u64::from_str_radix(epoch, 16).ok()?, seq: seq.parse().ok()? }))
}

fn render_answer(now: JournalToken, changed: Option<&BTreeMap<String, FolderChange>>) -> String {
    let mut out = format!("{GREETING} {:016x} {} {}\n", now.epoch, now.seq, if changed.is_some() { "changed" } else { "unknown" });
    for (dir, change) in changed.into_iter().flatten() {
        match change {
            FolderChange::Whole => {
                out.push_str("d ");
                out.push_str(dir);
                out.push('\n');
            }
            FolderChange::Entries(names) => {
                for name in names {
                    out.push_str("e ");
                    if !dir.is_empty() {
                        out.push_str(dir);
                        out.push('/');
                    }
                    out.push_str(name);
                    out.push('\n');
                }
            }
        }
    }
    out.push_str("end\n");
    out
}

/// Whether the protocol carries `name` as an entry line (a line of its own, read back as
/// written).
fn carried(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && !name.chars().any(char::is_control)
}

/// An answer as `render_answer` writes it; anything else (truncated, another version, a folder
/// given both as a whole and by entries) is `None`.
fn parse_answer(text: &str) -> Option<JournalAnswer> {
    let mut lines = text.strip_suffix("end\n")?.lines();
    let head = lines.next()?.strip_prefix(GREETING)?.strip_prefix(' ')?;
    let mut words = head.split(' ');
    let now = JournalToken { epoch: u64::from_str_radix(words.next()?, 16).ok()?, seq: words.next()?.parse().ok()? };
    let changed = match (words.next()?, words.next()) {
        ("changed", None) => {
            let mut changed: BTreeMap<String, FolderChange> = BTreeMap::new();
            for line in lines {
                if let Some(dir) = line.strip_prefix("d ") {
                    if changed.insert(dir.to_string(), FolderChange::Whole).is_some() {
                        return None;
                    }
                } else {
                    let entry = line.strip_prefix("e ")?;
                    let (dir, name) = entry.rsplit_once('/').unwrap_or(("", entry));
                    if !carried(name) {
                        return None;
                    }
                    match changed.entry(dir.to_string()).or_insert_with(|| FolderChange::Entries(Default::default())) {
                        FolderChange::Entries(names) => names.insert(name.to_string()),
                        FolderChange::Whole => return None,
                    };
                }
            }
            Some(changed)
        }
        ("unknown", None) if lines.next().is_none() => None,
        _ => return None,
    };
    Some(JournalAnswer::new(now, changed))
}

#[cfg(test)]
mod tests;
