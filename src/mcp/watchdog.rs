//! The stdio parent watchdog: exit when the process that launched the server is gone.
//!
//! A stdio server normally ends on stdin EOF, but when the client dies while another process
//! still holds the pipe open (a shell wrapper, a forked helper), EOF never comes. Every second
//! the watchdog reads the parent pid from `/proc/self/stat` (field 4) and, with `--parent-pid`,
//! checks `/proc/<pid>`. Two consecutive conclusive "parent gone" readings are required, so a
//! transient read error never kills the server. `PARAVAULT_STDIO_WATCHDOG=0` disables it.

use std::path::Path;
use std::time::Duration;

/// The parent pid of this process, from `/proc/self/stat` (`None` when it cannot be read).
pub(crate) fn current_ppid() -> Option<u32> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // `pid (comm) state ppid ...`: comm may contain spaces and parentheses, so split after the
    // last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// What one look at the parent says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    Alive,
    Gone(&'static str),
    Inconclusive,
}

fn read_once(original_ppid: Option<u32>, parent_pid: Option<u32>) -> Reading {
    if let Some(pid) = parent_pid {
        let proc_root = Path::new("/proc");
        if !proc_root.join("self").exists() {
            return Reading::Inconclusive;
        }
        if !proc_root.join(pid.to_string()).exists() {
            return Reading::Gone("parent_pid_exited");
        }
    }
    match (original_ppid, current_ppid()) {
        (_, None) => Reading::Inconclusive,
        // Started by init (or a reaper as pid 1): re-parenting cannot be observed.
        (Some(1) | None, Some(_)) => Reading::Alive,
        (Some(original), Some(now)) if now != original => Reading::Gone("reparented"),
        _ => Reading::Alive,
    }
}

/// Starts the watchdog thread unless `PARAVAULT_STDIO_WATCHDOG=0`.
pub fn spawn(parent_pid: Option<u32>) {
    if std::env::var("PARAVAULT_STDIO_WATCHDOG").is_ok_and(|v| v == "0") {
        tracing::info!("stdio watchdog disabled by PARAVAULT_STDIO_WATCHDOG=0");
        return;
    }
    let original = current_ppid();
    let watched = parent_pid.or(original).unwrap_or(0);
    let spawned = std::thread::Builder::new().name("stdio-watchdog".into()).spawn(move || {
        let mut streak = 0u32;
        loop {
            std::thread::sleep(Duration::from_secs(1));
            match read_once(original, parent_pid) {
                Reading::Gone(reason) => {
                    streak += 1;
                    if streak >= 2 {
                        eprintln!("{}", serde_json::json!({"event": "watchdog_exit", "reason": reason, "parent_pid": watched}));
                        std::process::exit(0);
                    }
                }
                Reading::Alive | Reading::Inconclusive => streak = 0,
            }
        }
    });
    if let Err(error) = spawned {
        tracing::warn!(%error, "could not start the stdio watchdog");
    }
}

#[cfg(test)]
mod tests;
