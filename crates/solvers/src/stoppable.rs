//! Dense factorizations that a stop request can leave: faer's eigendecompositions cannot be
//! polled from inside, and one of a large matrix (the exact kernel PCA's `n × n` kernel matrix,
//! Nyström's `m × m` landmark kernel at m = 3000) takes seconds to minutes.

use std::sync::mpsc;
use std::time::Duration;

use crate::SolverError;
use crate::interrupt;

/// How often the caller asks for a stop request while the factorization runs.
const WAIT: Duration = Duration::from_millis(50);

/// `f(input)`, computed so that a stop request ends the wait promptly: when a front end has a
/// stop hook ([`interrupt::has_hook`]: Python), `f` runs on a thread of its own while this
/// thread polls the hook every 50 ms; on a request this returns [`SolverError::Stopped`] at
/// once and the thread finishes in the background, its result dropped (its CPU time is spent,
/// the caller is free). Without a hook (the command-line tool) `f` runs on this thread. The
/// result is the same bits either way.
///
/// # Errors
/// [`SolverError::Stopped`] naming `what` on a stop request.
///
/// # Panics
/// If `f` panics (the panic is resumed on this thread).
pub(crate) fn stoppable<T, R>(what: &'static str, input: T, f: fn(T) -> R) -> Result<R, SolverError>
where
    T: Send + 'static,
    R: Send + 'static,
{
    if !interrupt::has_hook() {
        return Ok(f(input));
    }
    if interrupt::poll() {
        return Err(SolverError::Stopped { what });
    }
    let (send, receive) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = send.send(f(input));
    });
    loop {
        match receive.recv_timeout(WAIT) {
            Ok(result) => return Ok(result),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if interrupt::poll() {
                    return Err(SolverError::Stopped { what });
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(()) => unreachable!("the worker sends its result before it ends"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_hook_the_result_is_computed_here() {
        // The library's own tests register no hook: the call is f(input) itself.
        assert!(!interrupt::has_hook());
        assert_eq!(stoppable("a sum", vec![1.0, 2.0, 3.5], |v: Vec<f64>| v.iter().sum::<f64>()).unwrap(), 6.5);
    }
}
