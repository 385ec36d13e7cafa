//! Loom model of a usage word's release counter.

use crate::resource_budget::usage::{Usage, UsageCounts};
use loom::sync::Arc;
use loom::thread;

/// Releases racing each other and a snapshot on a one-bit in-word
/// counter (every other release wraps it into `carried`): the snapshot
/// never counts a release twice or loses one, never sees more released
/// than admitted, and the totals end exact.
#[cfg_attr(test, test)]
pub fn loom_release_counter_wraps_without_a_lost_or_doubled_release() {
    loom::model(|| {
        let usage = Arc::new(Usage::with_min_release_bits(3, (1 << 61) - 1, 1));
        for _ in 0..3 {
            usage.try_add(1, 1, 3, 10).expect("room");
            usage.admitted(1);
        }
        let releasers: Vec<_> = [1, 2]
            .into_iter()
            .map(|count| {
                let usage = Arc::clone(&usage);
                thread::spawn(move || usage.release(count, count))
            })
            .collect();
        let seen = usage.counts();
        assert_eq!(seen.admitted, 3, "admissions never change: {seen:?}");
        assert_eq!(seen.released + seen.count as u64, 3, "{seen:?}");
        for releaser in releasers {
            releaser.join().expect("joins");
        }
        assert_eq!(
            usage.counts(),
            UsageCounts {
                count: 0,
                bytes: 0,
                admitted: 3,
                released: 3,
            }
        );
    });
}
