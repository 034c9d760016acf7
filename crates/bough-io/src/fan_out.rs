//! Reading many small files at once: a partition with many branches reads one
//! `CURRENT_TERM` record and one manifest per branch when it opens. Each read is a few
//! system calls that spend their time in the kernel, so they are spread over a few threads.
//! (GC reads every manifest too, but its time goes to the walk that follows each read:
//! reading ahead on threads measured no gain there.)

/// Threads a fan-out uses at most.
const MAX_THREADS: usize = 8;
/// Items per thread below which a thread costs more than it saves.
const MIN_PER_THREAD: usize = 256;

/// `f` over every item, on up to twice the machine's threads (at most [`MAX_THREADS`]);
/// the results in the items' order. A panic in `f` resumes on the caller.
pub fn map_parallel<I: Sync, T: Send>(items: &[I], f: impl Fn(&I) -> T + Sync) -> Vec<T> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get().saturating_mul(2))
        .min(MAX_THREADS)
        .min(items.len() / MIN_PER_THREAD)
        .max(1);
    if threads == 1 {
        return items.iter().map(&f).collect();
    }
    let per = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(per)
            .map(|chunk| s.spawn(move || chunk.iter().map(f).collect::<Vec<T>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_covers_every_item() {
        for n in [0, 1, 255, 256, 511, 512, 5_000] {
            let items: Vec<usize> = (0..n).collect();
            let out = map_parallel(&items, |i| i * 2);
            assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>(), "{n}");
        }
    }
}
