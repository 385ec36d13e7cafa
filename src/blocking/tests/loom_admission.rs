//! Loom models over the real blocking admission state
//! ([`AdmissionBudget`]): two lanes competing for one global slot, with a
//! waiter that gives up (timeout) and a release that hands the slot over.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom`

use loom::sync::Arc as LoomArc;
use loom::thread;

use crate::blocking::admission::{Admission, AdmissionBudget, LaneLimits};

const LANE: LaneLimits = LaneLimits {
    ceiling: 1,
    reservation: 1,
    max_queue_depth: 2,
};

fn assert_bounded(budget: &AdmissionBudget) {
    for lane in 0..2 {
        let counts = budget.counts(lane);
        assert!(counts.global_running <= counts.global_capacity);
        assert!(counts.lane_running <= LANE.ceiling);
    }
}

/// A held slot is released while lane 0's waiter times out (withdraws) and
/// lane 1's waiter waits for its grant: the slot ends with lane 1's waiter
/// whichever order these happen in, never counted twice, and everything
/// returns to zero.
#[test]
fn loom_release_races_a_timeout_and_a_waiter() {
    loom::model(|| {
        let budget = AdmissionBudget::new(1, &[LANE, LANE]);
        let Admission::Running(held) = budget.admit(0) else {
            panic!("the first submission runs");
        };
        let timing_out = {
            let budget = std::sync::Arc::clone(&budget);
            thread::spawn(move || {
                // Runs at once if the slot is already free; otherwise it
                // times out: leaves the queue, or returns a granted slot.
                let admission = budget.admit(0);
                assert!(!matches!(admission, Admission::QueueFull));
                assert_bounded(&budget);
                drop(admission);
                assert_bounded(&budget);
            })
        };
        let waiting = {
            let budget = std::sync::Arc::clone(&budget);
            thread::spawn(move || {
                let Admission::Queued(mut queued) = budget.admit(1) else {
                    // The slot was already free: admitted at once.
                    assert_bounded(&budget);
                    return;
                };
                loop {
                    if let Some(permit) = queued.try_claim() {
                        assert_bounded(&budget);
                        drop(permit);
                        return;
                    }
                    thread::yield_now();
                }
            })
        };
        drop(held);
        timing_out.join().expect("timing-out submitter");
        waiting.join().expect("waiting submitter");
        for lane in 0..2 {
            let counts = budget.counts(lane);
            assert_eq!(
                (counts.global_running, counts.lane_running, counts.queued),
                (0, 0, 0)
            );
        }
    });
}

/// Two lanes submit at once for one slot: at least one runs at once; one
/// that queued is handed the slot when the other releases it.
#[test]
fn loom_competing_submissions_take_one_slot() {
    loom::model(|| {
        let budget = AdmissionBudget::new(1, &[LANE, LANE]);
        let admitted = LoomArc::new(loom::sync::atomic::AtomicUsize::new(0));
        let submit = |lane: usize| {
            let budget = std::sync::Arc::clone(&budget);
            let admitted = LoomArc::clone(&admitted);
            thread::spawn(move || match budget.admit(lane) {
                Admission::Running(permit) => {
                    admitted.fetch_add(1, loom::sync::atomic::Ordering::SeqCst);
                    assert_bounded(&budget);
                    drop(permit);
                }
                Admission::Queued(mut queued) => loop {
                    if let Some(permit) = queued.try_claim() {
                        assert_bounded(&budget);
                        drop(permit);
                        break;
                    }
                    thread::yield_now();
                },
                Admission::QueueFull => panic!("room in the queue"),
            })
        };
        let first = submit(0);
        let second = submit(1);
        first.join().expect("lane 0");
        second.join().expect("lane 1");
        assert!(admitted.load(loom::sync::atomic::Ordering::SeqCst) >= 1);
        assert_eq!(budget.counts(0).global_running, 0);
    });
}
