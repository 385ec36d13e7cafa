//! Loom model over the real drain-lease allowance ([`LeaseAllowance`]):
//! concurrent submissions never take more shares than the lease allows,
//! and a submission that fails gives its share back.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom`

use loom::thread;

use crate::blocking::lease::LeaseAllowance;

const MAX_OPERATIONS: usize = 2;

/// Three submissions race for two shares: two keep theirs if they get one
/// (their closures run), one fails and gives its share back. Whatever the
/// interleaving, no more than two shares are ever spent or held at once,
/// and every share is spent or back when they are done.
#[test]
fn loom_concurrent_submissions_never_exceed_the_allowance() {
    loom::model(|| {
        let allowance = std::sync::Arc::new(LeaseAllowance::new(MAX_OPERATIONS));
        let spending: Vec<_> = (0..2)
            .map(|_| {
                let allowance = std::sync::Arc::clone(&allowance);
                thread::spawn(move || match allowance.try_take() {
                    Some(mut share) => {
                        share.commit();
                        assert!(allowance.remaining() < MAX_OPERATIONS);
                        1
                    }
                    None => 0,
                })
            })
            .collect();
        let failing = {
            let allowance = std::sync::Arc::clone(&allowance);
            thread::spawn(move || {
                if let Some(share) = allowance.try_take() {
                    assert!(allowance.remaining() < MAX_OPERATIONS);
                    // The submission fails before its closure runs.
                    drop(share);
                }
            })
        };
        let spent: usize = spending
            .into_iter()
            .map(|handle| handle.join().expect("no panic"))
            .sum();
        failing.join().expect("no panic");
        assert!(spent <= MAX_OPERATIONS);
        assert_eq!(allowance.remaining() + spent, MAX_OPERATIONS);
    });
}
