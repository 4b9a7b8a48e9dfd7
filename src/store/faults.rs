//! Fault injection for the failure-path tests: fail the k-th filesystem mutation, stop at a
//! named crash point.
//!
//! Compiled in only with the `faults` cargo feature, which the tests turn on (Cargo.toml's
//! dev-dependency on this crate) and no build a person runs has: without it `check` and
//! `crash_point` are empty inline functions and `PARAVAULT_CRASH_AT` means nothing.
//!
//! Inert unless armed. Tests arm it with `arm_fail_at(k)`; every `durable` operation calls
//! `check` first, and the k-th one returns an injected I/O error. Thread-local, so parallel tests
//! do not interfere.

#[cfg(feature = "faults")]
use std::cell::Cell;
#[cfg(feature = "faults")]
use std::io;

#[cfg(feature = "faults")]
thread_local! {
    static COUNTDOWN: Cell<u64> = const { Cell::new(0) };
    static SEEN: Cell<u64> = const { Cell::new(0) };
}

#[cfg(feature = "faults")]
/// Arms the injector: the `k`-th (1-based) mutation from now fails. `0` disarms.
#[doc(hidden)]
pub fn arm_fail_at(k: u64) {
    COUNTDOWN.with(|c| c.set(k));
    SEEN.with(|s| s.set(0));
}

#[cfg(feature = "faults")]
/// Number of mutations seen since the last `arm_fail_at`.
#[doc(hidden)]
pub fn mutations_seen() -> u64 {
    SEEN.with(Cell::get)
}

#[cfg(feature = "faults")]
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

#[cfg(feature = "faults")]
/// A test hook: the crash point it waits for and what it runs there.
type CrashHook = (&'static str, Box<dyn FnOnce()>);

#[cfg(feature = "faults")]
thread_local! {
    static HOOK: std::cell::RefCell<Option<CrashHook>> = const { std::cell::RefCell::new(None) };
}

#[cfg(feature = "faults")]
/// Runs `hook` once, on this thread, when the write path reaches crash point `point` (tests
/// use it to change a file outside the engine at an exact instant of a transaction).
#[doc(hidden)]
pub fn arm_hook(point: &'static str, hook: impl FnOnce() + 'static) {
    HOOK.with(|h| *h.borrow_mut() = Some((point, Box::new(hook))));
}

#[cfg(feature = "faults")]
/// The crash point named by `PARAVAULT_CRASH_AT` (read once per process).
fn crash_target() -> Option<&'static str> {
    static TARGET: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    TARGET.get_or_init(|| std::env::var("PARAVAULT_CRASH_AT").ok().filter(|v| !v.is_empty())).as_deref()
}

#[cfg(feature = "faults")]
/// A named crash point for the kill tests. When `PARAVAULT_CRASH_AT` names this point, the
/// process announces it on stderr and waits to be killed (SIGKILL from the test harness).
/// Inert otherwise.
pub(crate) fn crash_point(name: &'static str) {
    let hook = HOOK.with(|h| {
        let mut h = h.borrow_mut();
        if h.as_ref().is_some_and(|(point, _)| *point == name) { h.take().map(|(_, f)| f) } else { None }
    });
    if let Some(hook) = hook {
        hook();
    }
    if crash_target() == Some(name) {
        use std::io::Write;
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "PARAVAULT_CRASH_POINT {name}");
        let _ = stderr.flush();
        loop {
            std::thread::sleep(std::time::Duration::from_secs(60));
        }
    }
}

/// Without the `faults` feature: no fault is ever injected.
#[cfg(not(feature = "faults"))]
#[inline(always)]
pub(crate) fn check(_operation: &'static str) -> std::io::Result<()> {
    Ok(())
}

/// Without the `faults` feature a crash point is nothing: a shipped binary never stops at one,
/// whatever `PARAVAULT_CRASH_AT` says.
#[cfg(not(feature = "faults"))]
#[inline(always)]
pub(crate) fn crash_point(_name: &'static str) {}

/// Every named crash point, in transaction order (the kill test iterates over these).
pub const CRASH_POINTS: &[&str] =
    &["after_lock", "after_plan", "after_commit", "after_apply", "after_publish", "after_receipt", "after_checkpoint"];
