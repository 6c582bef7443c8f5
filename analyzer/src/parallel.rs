//! A small scoped work queue: map a slice on a few threads, results in input order.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Threads to use when a config says 0: what the machine offers.
pub(crate) fn thread_count(configured: usize) -> usize {
    if configured > 0 {
        configured
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// Free `value` on a thread of its own: dropping many small allocations (every loaded payload's
/// JSON tree) no longer holds up the caller, which has results to store. Should no thread
/// start, it is freed here.
pub(crate) fn drop_in_background<T: Send + 'static>(value: T) {
    let freeing = std::thread::Builder::new()
        .name("chainweaver-free".into())
        .spawn(move || drop(value));
    drop(freeing);
}

/// Below this many steps a miner runs on one thread (threads cost more than they save).
pub(crate) const MINING_PARALLEL_MIN_STEPS: usize = 20_000;

/// Threads for mining `steps` steps: all the machine offers from
/// [`MINING_PARALLEL_MIN_STEPS`] on, else one.
pub(crate) fn mining_threads(steps: usize) -> usize {
    if steps >= MINING_PARALLEL_MIN_STEPS {
        thread_count(0)
    } else {
        1
    }
}

/// `f` over every item, on up to `threads` threads taking items one at a time (so uneven items
/// balance), results in the items' order. One thread (or one item) runs inline.
pub(crate) fn map<T, R, F>(items: &[T], threads: usize, f: F) -> Vec<R>
where
    T: Sync,
    R: Send,
    F: Fn(&T) -> R + Sync,
{
    let threads = threads.min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    // Equal costs: the (stable) order is the items' own.
    map_indices_with(items.len(), threads, |_| 0, || (), |(), at| f(&items[at]))
}

/// `work(state, i)` for every `i` in `0..n`, on up to `threads` threads that each make their
/// own state with `init` (it never crosses threads), taking the indices costliest first (by
/// `cost`, so the threads finish together); results in index order.
pub(crate) fn map_indices_with<S, R, I, W>(
    n: usize,
    threads: usize,
    cost: impl Fn(usize) -> usize,
    init: I,
    work: W,
) -> Vec<R>
where
    R: Send,
    I: Fn() -> S + Sync,
    W: Fn(&mut S, usize) -> R + Sync,
{
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(cost(i)));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads.clamp(1, n.max(1)) {
            scope.spawn(|| {
                let mut state = init();
                loop {
                    let taken = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&at) = order.get(taken) else { break };
                    let result = work(&mut state, at);
                    if let Ok(mut results) = results.lock() {
                        results[at] = Some(result);
                    }
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .into_iter()
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn indices_come_back_in_order_with_per_thread_state() {
        for threads in [1, 2, 3, 8] {
            // The state counts the items one thread did; every index is done exactly once.
            let done = super::map_indices_with(
                100,
                threads,
                |i| i % 7,
                || 0usize,
                |count, i| {
                    *count += 1;
                    (i, *count)
                },
            );
            assert_eq!(done.len(), 100);
            assert!(
                done.iter()
                    .enumerate()
                    .all(|(i, &(j, count))| i == j && count >= 1)
            );
        }
        assert!(super::map_indices_with(0, 2, |_| 0, || (), |_, i| i).is_empty());
    }

    #[test]
    fn keeps_the_order_whatever_the_thread_count() {
        let items: Vec<u64> = (0..1000).collect();
        for threads in [1, 2, 3, 8] {
            let squares = super::map(&items, threads, |x| x * x);
            assert_eq!(squares, items.iter().map(|x| x * x).collect::<Vec<_>>());
        }
        assert!(super::map(&[] as &[u8], 4, |x| *x).is_empty());
    }
}
