//! Loom model of the actor's lifecycle (`lifecycle.rs`, invariant 2) over
//! the real `ActorState` and its transitions: a submission racing
//! `stop_admission` and the coordinator's end is either admitted before the
//! stop and written before the coordinator ends, or refused; the
//! coordinator never ends with work admitted and unwritten, and the actor
//! finishes exactly once.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom`

use loom::thread;

use super::admission::ActorState;
use super::lifecycle::Lifecycle;
use crate::loom::{Arc, Mutex};

#[test]
fn loom_admission_racing_the_coordinator_end_is_written_or_refused() {
    loom::model(|| {
        let state = Arc::new(Mutex::new(ActorState::default()));
        let submitter = {
            let state = Arc::clone(&state);
            thread::spawn(move || {
                // Admission: the lifecycle and the queue, under one lock.
                let admitted = {
                    let mut state = state.lock();
                    let admits = state.lifecycle.admits();
                    if admits {
                        state.pending_operations += 1;
                    }
                    admits
                };
                if admitted {
                    // The write starts, then ends (as `start_writes` and
                    // `complete` count them).
                    state.lock().writing += 1;
                    let mut state = state.lock();
                    state.writing -= 1;
                    state.pending_operations -= 1;
                    let _ = state.write_ended();
                }
                admitted
            })
        };
        state.lock().lifecycle.stop();
        // The coordinator: ends once drained, deciding under the lock.
        let finished_at_end = loop {
            {
                let mut state = state.lock();
                if state.drained() {
                    assert_eq!(state.pending_operations, 0, "ended with work unwritten");
                    break state.coordinator_gone();
                }
            }
            thread::yield_now();
        };
        assert!(finished_at_end, "nothing was in flight when it ended");
        let admitted = submitter.join().expect("submitter");
        let state = state.lock();
        assert_eq!(state.lifecycle, Lifecycle::Finished);
        assert_eq!((state.pending_operations, state.writing), (0, 0));
        drop(admitted);
    });
}
