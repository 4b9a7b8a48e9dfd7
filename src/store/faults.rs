//! Fault injection for the failure-path tests: fail the k-th filesystem mutation.
//!
//! Inert unless armed. Tests arm it with `arm_fail_at(k)`; every `durable` operation calls
//! `check` first, and the k-th one returns an injected I/O error. Thread-local, so parallel tests
//! do not interfere.

use std::cell::Cell;
use std::io;

thread_local! {
    static COUNTDOWN: Cell<u64> = const { Cell::new(0) };
    static SEEN: Cell<u64> = const { Cell::new(0) };
}

/// Arms the injector: the `k`-th (1-based) mutation from now fails. `0` disarms.
#[doc(hidden)]
pub fn arm_fail_at(k: u64) {
    COUNTDOWN.with(|c| c.set(k));
    SEEN.with(|s| s.set(0));
}

/// Number of mutations seen since the last `arm_fail_at`.
#[doc(hidden)]
pub fn mutations_seen() -> u64 {
    SEEN.with(Cell::get)
}

/// Called before every filesystem mutation.
pub(crate) fn check(operation: &'static str) -> io::Result<()> {
    SEEN.with(|s| s.set(s.get() + 1));
    COUNTDOWN.with(|c| {
        let left = c.get();
        if left == 0 {
            return Ok(());
        }
        if left == 1 {
            c.set(0);
            return Err(io::Error::other(format!("injected fault at {operation}")));
        }
        c.set(left - 1);
        Ok(())
    })
}
