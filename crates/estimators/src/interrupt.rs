//! A stop request that loops inside one long iteration poll, for front ends whose observer is
//! called too rarely to stop a run promptly (one VR-PCA epoch reads `n` rows; a streaming
//! pass's Rayleigh–Ritz step reads them all with no observer).
//!
//! A front end registers a hook with [`set_hook`] (Python's: run the pending signal handlers,
//! true after Ctrl-C). [`poll`] calls it at most every [`POLL_INTERVAL`] per thread and
//! remembers a `true` for the rest of the process until [`clear`]. A loop that sees
//! [`poll`] return `true` ends early: the result of that run is incomplete, and the front end
//! that asked discards it. Without a hook, [`poll`] is a load of one atomic and always `false`.

use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The shortest time between two calls of the hook from one thread.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// A hook and the request it reported; the process has one ([`PROCESS`]).
struct StopRequest {
    hook: OnceLock<fn() -> bool>,
    requested: AtomicBool,
}

impl StopRequest {
    const fn new() -> Self {
        Self { hook: OnceLock::new(), requested: AtomicBool::new(false) }
    }

    /// [`poll`], with `last` the time this thread last asked the hook.
    fn poll(&self, last: &Cell<Option<Instant>>) -> bool {
        if self.requested.load(Ordering::Relaxed) {
            return true;
        }
        let Some(hook) = self.hook.get() else {
            return false;
        };
        let now = Instant::now();
        if last.get().is_some_and(|t| now.duration_since(t) < POLL_INTERVAL) {
            return false;
        }
        last.set(Some(now));
        if hook() {
            self.requested.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }
}

static PROCESS: StopRequest = StopRequest::new();

thread_local! {
    static LAST: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Registers `hook`, which returns `true` when the user asked to stop. The first hook of the
/// process stays; later calls are ignored (one front end per process).
pub fn set_hook(hook: fn() -> bool) {
    let _ = PROCESS.hook.set(hook);
}

/// Whether a front end registered a stop hook ([`set_hook`]): only then can a run be stopped.
pub fn has_hook() -> bool {
    PROCESS.hook.get().is_some()
}

/// Whether a stop was requested: asks the hook if [`POLL_INTERVAL`] has passed since this
/// thread last asked, and remembers a `true` until [`clear`].
pub fn poll() -> bool {
    LAST.with(|last| PROCESS.poll(last))
}

/// Whether [`poll`] or [`request`] has recorded a stop request since the last [`clear`]
/// (without asking the hook).
pub fn requested() -> bool {
    PROCESS.requested.load(Ordering::Relaxed)
}

/// Records a stop request the front end saw by itself (its observer's own check), so that the
/// loops still to come in this run see it through [`poll`].
pub fn request() {
    PROCESS.requested.store(true, Ordering::Relaxed);
}

/// Forgets a stop request: a front end calls it before a new run.
pub fn clear() {
    PROCESS.requested.store(false, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    // A request of its own: the process's would stop the other tests' VR-PCA epochs.
    #[test]
    fn a_request_is_seen_once_asked_kept_and_asked_at_most_every_interval() {
        static ASKED: AtomicBool = AtomicBool::new(false);
        fn hook() -> bool {
            ASKED.load(Ordering::Relaxed)
        }
        let stop = StopRequest::new();
        let last = Cell::new(None);
        assert!(!stop.poll(&last), "no hook, no request");
        let _ = stop.hook.set(hook);
        assert!(!stop.poll(&last));
        ASKED.store(true, Ordering::Relaxed);
        // Asked just now: not again within the interval, so the request waits for it.
        last.set(Some(Instant::now()));
        assert!(!stop.poll(&last));
        last.set(Instant::now().checked_sub(POLL_INTERVAL));
        assert!(stop.poll(&last));
        ASKED.store(false, Ordering::Relaxed);
        assert!(stop.poll(&last), "a request is kept after the hook stops reporting it");
        stop.requested.store(false, Ordering::Relaxed);
        assert!(!stop.poll(&Cell::new(None)));
    }
}
