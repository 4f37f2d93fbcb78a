//! Independent runs on all cores, one thread each.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `job` on every item, `workers` at a time on their own threads (at least one, at most
/// one per item), with faer's global parallelism set to sequential meanwhile (one thread per
/// run: on a shared 2-core machine this is faster than one run on two threads), and returns
/// the results in the order of `items`, or the first error in that order.
///
/// Each job should draw from its own seeded stream, so that the results do not depend on the
/// order in which the threads take the items.
///
/// # Panics
/// If a job panics (the panic is propagated).
pub fn run_parallel<T: Sync, U: Send, E: Send>(
    items: &[T],
    workers: usize,
    job: impl Fn(&T) -> Result<U, E> + Sync,
) -> Result<Vec<U>, E> {
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<Result<U, E>>>> = items.iter().map(|_| Mutex::new(None)).collect();
    let previous = faer::get_global_parallelism();
    faer::set_global_parallelism(faer::Par::Seq);
    std::thread::scope(|scope| {
        for _ in 0..workers.clamp(1, items.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let out = job(item);
                    *slots[i].lock().expect("a slot is written once") = Some(out);
                }
            });
        }
    });
    faer::set_global_parallelism(previous);
    slots.into_iter().map(|m| m.into_inner().expect("no job panicked").expect("every item was run")).collect()
}

/// Number of runs to make at a time: the cores available to the process (1 if unknown).
pub fn available_workers() -> usize {
    std::thread::available_parallelism().map(|c| c.get()).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_back_in_order_and_errors_surface() {
        let items: Vec<u64> = (0..20).collect();
        let out: Vec<u64> = run_parallel(&items, 3, |&i| Ok::<_, String>(i * i)).unwrap();
        assert_eq!(out, items.iter().map(|i| i * i).collect::<Vec<_>>());
        let err = run_parallel(&items, 2, |&i| if i % 7 == 3 { Err(i) } else { Ok(i) }).unwrap_err();
        assert_eq!(err, 3);
        assert!(run_parallel(&[] as &[u8], 4, |_| Ok::<u8, ()>(0)).unwrap().is_empty());
    }
}
