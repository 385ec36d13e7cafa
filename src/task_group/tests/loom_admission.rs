//! Loom models over the real spawn gate ([`Gate`]): registration racing the
//! shutdown seal, and an abort racing the installation of the abort handle.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom`

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::task_group::gate::{Gate, Refusal, CLOSING, OPEN, SHARDS};
use crate::task_group::registry::{seq_check, AbortTarget};
use crate::task_identity::{TaskEnd, TaskKind, TaskName};

/// Records abort calls instead of aborting a Tokio task.
#[derive(Debug, Clone)]
struct RecordingHandle(Arc<AtomicUsize>);

impl AbortTarget for RecordingHandle {
    fn abort(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

type TestGate = Gate<RecordingHandle, ()>;

fn register(gate: &TestGate) -> Result<(u64, u32), Refusal> {
    gate.register(TaskName::from("task"), TaskKind::Worker, None, None)
}

/// Registers `count` tasks in shard 0, each followed by one task in every
/// other shard (registrations rotate over the shards under loom), so the
/// next registration lands in shard 0 again. Returns the shard-0 tasks.
fn register_in_first_shard(gate: &TestGate, count: usize) -> Vec<(u64, u32)> {
    (0..count * SHARDS)
        .map(|_| register(gate).expect("open"))
        .step_by(SHARDS)
        .collect()
}

/// A spawn racing a shutdown is either registered before the seal (and then
/// aborted by the shutdown, whether or not its handle was installed yet) or
/// rejected with `Closed`: never lost, never registered after the seal.
#[cfg_attr(test, test)]
pub fn loom_spawn_racing_shutdown_is_registered_or_rejected() {
    loom::model(|| {
        let gate = Arc::new(TestGate::new(OPEN));
        let aborts = Arc::new(AtomicUsize::new(0));

        let spawner = {
            let gate = Arc::clone(&gate);
            let aborts = Arc::clone(&aborts);
            thread::spawn(move || match register(&gate) {
                Ok((seq, slot)) => {
                    gate.install(slot, seq, RecordingHandle(aborts));
                    Some((seq, slot))
                }
                Err(refusal) => {
                    assert_eq!(refusal, Refusal::Closed);
                    None
                }
            })
        };

        let children = gate.seal();
        assert!(children.is_empty());
        assert!(gate.phase() >= CLOSING);
        let newly_aborted = gate.abort_matching(true, None);

        match spawner.join().expect("spawner thread") {
            Some((seq, slot)) => {
                assert_eq!(
                    newly_aborted, 1,
                    "a registered task is seen by the shutdown"
                );
                assert!(gate.contains(slot, seq));
                assert!(
                    aborts.load(Ordering::SeqCst) >= 1,
                    "abort honoured at install"
                );
                let effect = gate.settle(slot, seq_check(seq), TaskEnd::Aborted);
                assert!(effect.idle);
                assert!(!gate.contains(slot, seq));
                {
                    let inner = gate.snapshot(0);
                    assert_eq!(inner.counters.aborted, 1);
                    assert_eq!(inner.counters.deadline_aborted_settled, 1);
                    assert_eq!(inner.counters.live_abort_requested, 0);
                }
            }
            None => {
                assert_eq!(newly_aborted, 0);
                assert_eq!(gate.len(), 0);
            }
        }
        assert!(register(&gate).is_err(), "nothing registers after the seal");
    });
}

/// An abort requested concurrently with the handle installation reaches the
/// task exactly when it is still registered.
#[cfg_attr(test, test)]
pub fn loom_abort_racing_handle_installation_is_honoured() {
    loom::model(|| {
        let gate = Arc::new(TestGate::new(OPEN));
        let aborts = Arc::new(AtomicUsize::new(0));
        let (seq, slot) = register(&gate).expect("open gate");

        let installer = {
            let gate = Arc::clone(&gate);
            let aborts = Arc::clone(&aborts);
            thread::spawn(move || gate.install(slot, seq, RecordingHandle(aborts)))
        };
        let requested = gate.abort(slot, seq);
        installer.join().expect("installer thread");

        assert!(
            requested,
            "the task was registered when the abort was requested"
        );
        assert!(aborts.load(Ordering::SeqCst) >= 1);
        // Settlement counts one abort however many times abort was called.
        assert!(gate.abort(slot, seq));
        gate.settle(slot, seq_check(seq), TaskEnd::Aborted);
        assert!(!gate.abort(slot, seq));
        {
            let inner = gate.snapshot(0);
            assert_eq!(inner.counters.aborted, 1);
            assert_eq!(inner.counters.live_abort_requested, 0);
        }
    });
}

/// Settlement racing a panic-poisoning check and a seal: a panic poisons the
/// group only if it settled while the group was open, and exactly once.
#[cfg_attr(test, test)]
pub fn loom_panic_poisons_only_an_open_group_once() {
    loom::model(|| {
        let gate = Arc::new(TestGate::new(OPEN));
        let first = register(&gate).expect("open gate");
        let second = register(&gate).expect("open gate");

        let settler = {
            let gate = Arc::clone(&gate);
            thread::spawn(move || {
                let a = gate.settle(first.1, seq_check(first.0), TaskEnd::Panicked);
                let b = gate.settle(second.1, seq_check(second.0), TaskEnd::Panicked);
                u8::from(a.poisoned_now) + u8::from(b.poisoned_now)
            })
        };
        gate.seal();
        let poisonings = settler.join().expect("settler thread");
        assert!(poisonings <= 1);
        assert_eq!(poisonings == 1, gate.is_poisoned());
        assert_eq!(gate.snapshot(0).counters.panicked, 2);
    });
}

/// A panic settled concurrently with the seal poisons the group only if it
/// settled before the seal: once an observer sees the group sealed and not
/// poisoned, it never becomes poisoned (lifecycle states are monotonic).
#[cfg_attr(test, test)]
pub fn loom_no_poisoning_after_the_seal() {
    loom::model(|| {
        let gate = Arc::new(TestGate::new(OPEN));
        let (seq, slot) = register(&gate).expect("open gate");
        let settler = {
            let gate = Arc::clone(&gate);
            thread::spawn(move || {
                gate.settle(slot, seq_check(seq), TaskEnd::Panicked)
                    .poisoned_now
            })
        };
        gate.seal();
        let poisoned_when_sealed = gate.is_poisoned();
        let poisoned_now = settler.join().expect("settler thread");
        assert_eq!(poisoned_now, gate.is_poisoned());
        if !poisoned_when_sealed {
            assert!(!gate.is_poisoned(), "poisoned after the seal");
        }
    });
}

/// A task registered on a later shard spawns one on an earlier shard and
/// then settles: the group is never empty, so a concurrent count on the
/// open gate never reads zero (a lock-free shard-by-shard sum could read the
/// earlier shard before the spawn and the later one after the settlement).
#[cfg_attr(test, test)]
pub fn loom_an_open_gate_never_counts_a_busy_group_as_empty() {
    loom::model(|| {
        let gate = Arc::new(TestGate::new(OPEN));
        // Registrations rotate over the shards under loom: fill shards
        // 0..SHARDS-1 so the next one lands in shard 0 again, and keep only
        // the task in the last shard.
        let mut last = None;
        for _ in 0..SHARDS {
            if let Some((seq, slot)) = last.replace(register(&gate).expect("open")) {
                gate.settle(slot, seq_check(seq), TaskEnd::Completed);
            }
        }
        let (seq, slot) = last.expect("a task in the last shard");
        assert_eq!(gate.len(), 1);

        let spawner = {
            let gate = Arc::clone(&gate);
            thread::spawn(move || {
                let child = register(&gate).expect("open");
                gate.settle(slot, seq_check(seq), TaskEnd::Completed);
                child
            })
        };
        assert!(gate.len() >= 1, "the group is never empty");
        let (child_seq, child_slot) = spawner.join().expect("spawner");
        assert_eq!(gate.len(), 1);
        gate.settle(child_slot, seq_check(child_seq), TaskEnd::Completed);
        assert_eq!(gate.len(), 0);
    });
}

/// The last two tasks of a sealed group, in different shards, settle at
/// once: each publishes its settled count and then reads the other shard,
/// so at least one of them reports the group idle; both results are
/// counted once when a report applies the pending settlements.
#[cfg_attr(test, test)]
pub fn loom_last_settlements_in_two_shards_report_the_group_idle() {
    loom::model(|| {
        let gate = Arc::new(TestGate::new(OPEN));
        let first = register(&gate).expect("open gate");
        let second = register(&gate).expect("open gate");
        assert_ne!(first.1 % SHARDS as u32, second.1 % SHARDS as u32);
        gate.seal();
        let settler = {
            let gate = Arc::clone(&gate);
            thread::spawn(move || {
                gate.settle(first.1, seq_check(first.0), TaskEnd::Completed)
                    .idle
            })
        };
        let here = gate
            .settle(second.1, seq_check(second.0), TaskEnd::Completed)
            .idle;
        let there = settler.join().expect("settler thread");
        assert!(here || there, "the group's idleness was reported");
        assert_eq!(gate.len(), 0);
        let snapshot = gate.snapshot(8);
        assert_eq!(snapshot.counters.completed, 2);
        assert_eq!(snapshot.live, 0);
        assert!(snapshot.listed.is_empty());
    });
}

/// A settlement racing a deadline walk and a report: the task is counted
/// exactly once; a task that completed is never counted as timed out; the
/// walk's abort request is balanced when the settlement is applied.
#[cfg_attr(test, test)]
pub fn loom_settlement_racing_a_walk_and_a_report_is_counted_once() {
    loom::model(|| {
        let gate = Arc::new(TestGate::new(OPEN));
        let aborts = Arc::new(AtomicUsize::new(0));
        let (seq, slot) = register(&gate).expect("open gate");
        gate.install(slot, seq, RecordingHandle(Arc::clone(&aborts)));
        gate.seal();
        let settler = {
            let gate = Arc::clone(&gate);
            thread::spawn(move || {
                gate.settle(slot, seq_check(seq), TaskEnd::Completed);
            })
        };
        let newly = gate.abort_matching(true, None);
        let during = gate.snapshot(8);
        assert_eq!(
            during.counters.completed + during.live,
            1,
            "counted as settled or listed as live, never both or neither"
        );
        settler.join().expect("settler thread");
        assert_eq!(newly, aborts.load(Ordering::SeqCst));
        let after = gate.snapshot(8);
        assert_eq!(after.counters.completed, 1);
        assert_eq!(after.live, 0);
        assert_eq!(after.counters.deadline_aborted_settled, 0);
        assert_eq!(after.counters.live_abort_requested, 0);
        assert!(!gate.contains(slot, seq));
    });
}

/// A table whose settled count stays below the registered count it last
/// read skips the idle check; its last settlement must not: of the last
/// settlements of two tables, racing, at least one reports the group idle.
#[cfg_attr(test, test)]
pub fn loom_a_table_skipping_idle_checks_still_reports_its_last_settlement() {
    loom::model(|| {
        let gate = Arc::new(TestGate::new(OPEN));
        // Registrations rotate over the shards under loom: nine tasks put
        // three in shard 0 and two in shard 1.
        let tasks: Vec<_> = (0..9).map(|_| register(&gate).expect("open")).collect();
        let settle = |gate: &TestGate, (seq, slot): (u64, u32)| {
            gate.settle(slot, seq_check(seq), TaskEnd::Completed).idle
        };
        // Shard 0's first settlement reads its registered count (three).
        assert!(!settle(&gate, tasks[0]));
        for index in [1, 2, 3, 6, 7] {
            assert!(!settle(&gate, tasks[index]));
        }
        gate.seal();
        let shard_zero = {
            let gate = Arc::clone(&gate);
            let (middle, last) = (tasks[4], tasks[8]);
            thread::spawn(move || {
                // Below the known count: no idle check.
                assert!(!settle(&gate, middle));
                settle(&gate, last)
            })
        };
        let here = settle(&gate, tasks[5]);
        let there = shard_zero.join().expect("settler thread");
        assert!(here || there, "the group's idleness was reported");
        assert_eq!(gate.len(), 0);
        assert_eq!(gate.snapshot(0).counters.completed, 9);
    });
}

/// An idle watcher (the shutdown drain) registers and then counts; the
/// last settlement reports idleness and then reads the watchers: either
/// the watcher sees the group empty or the settlement sees the watcher.
#[cfg_attr(test, test)]
pub fn loom_an_idle_watcher_is_never_left_waiting() {
    loom::model(|| {
        let gate = Arc::new(TestGate::new(OPEN));
        let (seq, slot) = register(&gate).expect("open gate");
        gate.seal();
        let watchers = Arc::new(AtomicUsize::new(0));
        let settler = {
            let gate = Arc::clone(&gate);
            let watchers = Arc::clone(&watchers);
            thread::spawn(move || {
                let idle = gate.settle(slot, seq_check(seq), TaskEnd::Completed).idle;
                idle && watchers.load(Ordering::SeqCst) > 0
            })
        };
        watchers.fetch_add(1, Ordering::SeqCst);
        let saw_empty = gate.len() == 0;
        let notified = settler.join().expect("settler thread");
        assert!(saw_empty || notified, "the watcher would sleep forever");
    });
}

/// A task's start stamp racing its own settlement and the registration that
/// may reuse its slot never lands on the new task: a stamp is published
/// before its task's settlement and applied no later than it (stamps first
/// within an application), and a stamp whose record is gone is dropped.
#[cfg_attr(test, test)]
pub fn loom_a_stamp_racing_settlement_and_slot_reuse_stamps_only_its_task() {
    loom::model(|| {
        let gate = Arc::new(TestGate::new(OPEN));
        let (first_seq, first_slot) = register_in_first_shard(&gate, 1)[0];
        let worker = {
            let gate = Arc::clone(&gate);
            thread::spawn(move || {
                gate.stamp(
                    first_slot,
                    seq_check(first_seq),
                    tokio::time::Instant::now(),
                );
                gate.settle(first_slot, seq_check(first_seq), TaskEnd::Completed);
            })
        };
        // Applies what the worker published so far, and may reuse the
        // first task's slot.
        let (second_seq, _) = register(&gate).expect("open");
        let started_of = |seq: u64| {
            gate.snapshot(usize::MAX)
                .listed
                .into_iter()
                .find(|task| task.seq == seq)
                .map(|task| task.started)
        };
        assert_eq!(started_of(second_seq), Some(None), "never stamped");
        worker.join().expect("worker thread");
        assert_eq!(started_of(second_seq), Some(None), "never stamped");
        assert_eq!(started_of(first_seq), None, "settled and removed");
    });
}

/// A settler whose batch fills while a reader holds the table lock leaves
/// the batch pending (`try_lock`) instead of waiting; nothing is lost or
/// counted twice: the reader, or the report after it, applies it.
#[cfg_attr(test, test)]
pub fn loom_a_full_batch_behind_a_held_table_lock_is_applied_later() {
    loom::model(|| {
        let gate = Arc::new(TestGate::new(OPEN));
        // Three tasks in shard 0: two settle, one stays live so the shard
        // never goes idle and the settler takes the batch path.
        let first_shard = register_in_first_shard(&gate, 3);
        let (live_seq, live_slot) = first_shard[2];
        let settled = [first_shard[0], first_shard[1]];
        let settler = {
            let gate = Arc::clone(&gate);
            thread::spawn(move || {
                let (seq, slot) = settled[0];
                gate.stamp(slot, seq_check(seq), tokio::time::Instant::now());
                for (seq, slot) in settled {
                    let effect = gate.settle(slot, seq_check(seq), TaskEnd::Completed);
                    assert!(!effect.idle, "a live task remains");
                }
            })
        };
        // Holds shard 0's table lock while it applies what is pending.
        assert!(gate.contains(live_slot, live_seq));
        settler.join().expect("settler thread");
        for (seq, slot) in settled {
            assert!(!gate.contains(slot, seq), "applied once the lock was free");
        }
        let snapshot = gate.snapshot(usize::MAX);
        assert_eq!(
            snapshot.counters.completed, 2,
            "each settlement counted once"
        );
        assert_eq!(snapshot.live, 3 * SHARDS - 2);
        assert_eq!(gate.len(), 3 * SHARDS - 2);
    });
}
