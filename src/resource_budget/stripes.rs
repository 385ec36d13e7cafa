//! What every refusal writes, spread over per-thread stripes.
//!
//! A refusal is the cheap way to shed load, and under overload producers
//! on every core refuse at once. Anything each refusal writes on one shared
//! cache line (a counter's increment, the reference count of the path a
//! rejection carries) would bounce that line between the cores on every
//! refusal, and the producers sharing a core with the consumer would take
//! its time with those misses. So a refusal writes only lines of its own
//! thread's stripe:
//!
//! 1. Each thread has a stripe index (`0..STRIPES`), handed out round
//!    robin on its first refusal; threads beyond `STRIPES` share stripes,
//!    which only costs speed, never a count.
//! 2. A [`StripedCounter`] is exact: an increment adds to its thread's
//!    stripe, a read sums every stripe (statistics no decision reads, like
//!    the tree's `StatCounter`s, so relaxed, and not loom-modelled). Its
//!    stripes are allocated on the first increment: a level or queue that
//!    never refuses pays one pointer.
//! 3. A [`StripedPath`] holds one reference-counted copy of a budget's
//!    path per stripe, each in its own cache lines, allocated on the first
//!    rejection built for that level; a rejection clones its thread's copy
//!    (tokio's channels carry no path in a refusal; ours does, so its
//!    reference count must not be shared).
//!
//! Hand-written: crossbeam's `CachePadded` pads one value, and a
//! per-thread container (the `thread_local` crate) grows with the number
//! of threads; a fixed stripe count keeps the memory per level bounded.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// The tree's path type (loom's `Arc` in models).
type Path = crate::loom::Arc<str>;

/// How many stripes a counter or path has: enough that the workers of a
/// typical runtime each get their own.
pub(crate) const STRIPES: usize = 8;

/// The calling thread's stripe (invariant 1).
#[inline]
pub(crate) fn index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        // Const-initialized and without a destructor: a read is one
        // thread-local load, and it works while the thread is torn down.
        static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    INDEX.with(|index| {
        let mut stripe = index.get();
        if stripe == usize::MAX {
            stripe = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
            index.set(stripe);
        }
        stripe
    })
}

/// A value on cache lines of its own (two, for the adjacent-line
/// prefetch).
#[repr(align(128))]
struct Line<T>(T);

/// An exact counter whose increments stay on the calling thread's stripe
/// (invariant 2).
#[derive(Default)]
pub(crate) struct StripedCounter {
    stripes: OnceLock<Box<[Line<AtomicU64>; STRIPES]>>,
}

impl StripedCounter {
    /// Adds `amount` on the calling thread's stripe.
    #[inline]
    pub(crate) fn add(&self, amount: u64) {
        let stripes = self
            .stripes
            .get_or_init(|| Box::new(std::array::from_fn(|_| Line(AtomicU64::new(0)))));
        stripes[index()].0.fetch_add(amount, Ordering::Relaxed);
    }

    /// The sum of every stripe.
    pub(crate) fn load(&self) -> u64 {
        self.stripes.get().map_or(0, |stripes| {
            stripes
                .iter()
                .map(|line| line.0.load(Ordering::Relaxed))
                .fold(0, u64::wrapping_add)
        })
    }
}

impl std::fmt::Debug for StripedCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StripedCounter").field(&self.load()).finish()
    }
}

/// A copy of a budget's path whose reference count has its own lines.
pub(crate) struct PathCopy(Line<Path>);

impl PathCopy {
    pub(crate) fn as_str(&self) -> &str {
        &self.0 .0
    }
}

/// A budget's path, one copy per stripe (invariant 3).
#[derive(Default)]
pub(crate) struct StripedPath {
    copies: OnceLock<Box<[Arc<PathCopy>]>>,
}

impl StripedPath {
    /// The calling thread's copy of `path` (the level's own path).
    #[inline]
    pub(crate) fn get(&self, path: &Path) -> Arc<PathCopy> {
        let copies = self.copies.get_or_init(|| {
            (0..STRIPES)
                .map(|_| Arc::new(PathCopy(Line(Path::clone(path)))))
                .collect()
        });
        Arc::clone(&copies[index()])
    }
}

impl std::fmt::Debug for StripedPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StripedPath").finish_non_exhaustive()
    }
}

/// Pushes between deciding to append to a queue and having appended
/// (queue invariant 8), one count per stripe: a push writes its own
/// thread's line twice, and only a consumer that finds the queue empty and
/// closed, or an observation that starts stamping, reads them all.
/// `SeqCst`, and loom atomics in the models: the close and stamping
/// handshakes are decided by these counts.
pub(crate) struct InFlight {
    lines: [Line<crate::loom::AtomicUsize>; STRIPES],
}

impl InFlight {
    pub(crate) fn new() -> Self {
        Self {
            lines: std::array::from_fn(|_| Line(crate::loom::AtomicUsize::new(0))),
        }
    }

    /// Counts a push in flight on the calling thread's stripe; give the
    /// stripe back to [`leave`](Self::leave).
    #[inline]
    pub(crate) fn enter(&self) -> usize {
        let stripe = index();
        self.lines[stripe]
            .0
            .fetch_add(1, crate::loom::Ordering::SeqCst);
        stripe
    }

    #[inline]
    pub(crate) fn leave(&self, stripe: usize) {
        self.lines[stripe]
            .0
            .fetch_sub(1, crate::loom::Ordering::SeqCst);
    }

    /// Whether any push is in flight. Every stripe is read (`SeqCst`, no
    /// short cut): a reader also synchronizes with each push that left.
    pub(crate) fn any(&self) -> bool {
        self.lines
            .iter()
            .map(|line| line.0.load(crate::loom::Ordering::SeqCst))
            .fold(0, usize::wrapping_add)
            != 0
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_striped_counter_sums_every_thread() {
        let counter = Arc::new(StripedCounter::default());
        assert_eq!(counter.load(), 0);
        let threads: Vec<_> = (0..2 * STRIPES)
            .map(|_| {
                let counter = Arc::clone(&counter);
                std::thread::spawn(move || {
                    for _ in 0..1_000 {
                        counter.add(1);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("thread");
        }
        counter.add(5);
        assert_eq!(counter.load(), 2 * STRIPES as u64 * 1_000 + 5);
    }

    #[test]
    fn every_stripe_of_a_path_reads_the_path() {
        let path: Path = Path::from("process/queue");
        let striped = StripedPath::default();
        let copies: Vec<_> = (0..STRIPES)
            .map(|_| {
                let striped = &striped;
                let path = &path;
                std::thread::scope(|scope| {
                    scope
                        .spawn(move || striped.get(path))
                        .join()
                        .expect("thread")
                })
            })
            .collect();
        assert!(copies.iter().all(|copy| copy.as_str() == "process/queue"));
    }
}
