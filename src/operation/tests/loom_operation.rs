//! Loom models over the real operation gate ([`OperationGate`]):
//! admission racing `close`, registration racing completion and an idle
//! waiter, and two first submissions racing to bind different owners.
//!
//! Run: `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --lib loom`

use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

use crate::loom::Mutex;
use crate::operation::gate::{Accepted, OperationGate, Refused, Submission};

/// The owner slot of models that do not look at it.
fn no_owner() -> Mutex<Option<()>> {
    Mutex::new(None)
}

fn submit(gate: &OperationGate, group: u64) -> Result<Accepted<()>, Submission<()>> {
    gate.submit(group, &no_owner(), || Ok::<_, ()>(()))
}

/// A submission racing `close`: accepted exactly when counted, and nothing
/// is accepted once `close` has returned.
#[test]
fn loom_operation_admission_races_close() {
    loom::model(|| {
        let gate = Arc::new(OperationGate::default());
        let submitter = {
            let gate = Arc::clone(&gate);
            thread::spawn(move || submit(&gate, 1).is_ok())
        };
        gate.close();
        assert!(
            matches!(submit(&gate, 1), Err(Submission::Refused(Refused::Closed))),
            "nothing is admitted after close returned"
        );
        let accepted = submitter.join().expect("submitter");
        assert_eq!(gate.active(), usize::from(accepted));
    });
}

/// Registration racing completion: the task is counted before it exists,
/// so its completion (on another thread, possibly before the submitter
/// returns) can never be lost, and a waiter that saw it active is always
/// notified when it becomes idle.
#[test]
fn loom_operation_completion_races_registration_and_a_waiter() {
    loom::model(|| {
        let gate = Arc::new(OperationGate::default());
        let notified = Arc::new(AtomicBool::new(false));
        let submitter = {
            let gate = Arc::clone(&gate);
            let notified = Arc::clone(&notified);
            thread::spawn(move || {
                let task = gate
                    .submit(1, &no_owner(), || {
                        // "Hand the task to Tokio": it may complete at once.
                        let gate = Arc::clone(&gate);
                        let notified = Arc::clone(&notified);
                        Ok::<_, ()>(thread::spawn(move || {
                            if gate.release(&no_owner()).notify {
                                notified.store(true, Ordering::SeqCst);
                            }
                        }))
                    })
                    .expect("open operation")
                    .registered;
                task.join().expect("task");
            })
        };
        // The waiter: watch, then read the count.
        let watch = gate.watch();
        let saw_idle = gate.active() == 0;
        submitter.join().expect("submitter");
        assert_eq!(gate.active(), 0, "every admission is released once");
        if !saw_idle {
            assert!(
                notified.load(Ordering::SeqCst),
                "a waiter that saw the task active is notified"
            );
        }
        drop(watch);
    });
}

/// Two first submissions with different groups: exactly one binds, the
/// other is refused as a wrong owner and counts nothing.
#[test]
fn loom_operation_first_submissions_bind_one_owner() {
    loom::model(|| {
        let gate = Arc::new(OperationGate::default());
        let other = {
            let gate = Arc::clone(&gate);
            thread::spawn(move || submit(&gate, 2).is_ok())
        };
        let mine = submit(&gate, 1).is_ok();
        let theirs = other.join().expect("other submitter");
        assert!(mine ^ theirs, "exactly one owner binds");
        assert_eq!(gate.owner(), Some(if mine { 1 } else { 2 }));
        assert_eq!(gate.active(), 1);
    });
}

/// A wait's owner check racing a first submission into another group:
/// either the other group bound first and the close fails (changing
/// nothing), or the close happened first and the other group is refused.
/// Never both a successful close for group 1 and a binding to group 2.
#[test]
fn loom_operation_close_for_an_owner_races_a_binding_submission() {
    loom::model(|| {
        let gate = Arc::new(OperationGate::default());
        let submitter = {
            let gate = Arc::clone(&gate);
            thread::spawn(move || submit(&gate, 2).is_ok())
        };
        let closed = gate.close_for(1, false);
        let bound = submitter.join().expect("submitter");
        match closed {
            Ok(_) => {
                assert!(!bound, "closed for group 1: group 2 cannot bind");
                assert_eq!(gate.owner(), None);
                assert!(gate.is_closed());
            }
            Err(refused) => {
                assert_eq!(refused, Refused::WrongOwner);
                assert!(bound);
                assert_eq!(gate.owner(), Some(2));
                assert!(!gate.is_closed(), "a wrong owner changes nothing");
            }
        }
    });
}

/// `wait_with_policy`'s hard stop racing a submission admitted before the
/// close but registering with its owner during the abort walk: the task is
/// aborted either by the walk or by the submitter itself, never missed.
#[test]
fn loom_operation_hard_stop_misses_no_registering_task() {
    use crate::task_group::AbortTarget;
    use crate::task_group::{Gate, OPEN};
    use crate::task_identity::{TaskKind, TaskName};

    #[derive(Debug)]
    struct NoHandle;
    impl AbortTarget for NoHandle {
        fn abort(&self) {}
    }
    let tag = std::num::NonZeroU64::new(7).expect("non-zero");

    loom::model(move || {
        let gate = Arc::new(OperationGate::default());
        let owner: Arc<Gate<NoHandle, ()>> = Arc::new(Gate::new(OPEN));
        let submitter = {
            let (gate, owner) = (Arc::clone(&gate), Arc::clone(&owner));
            thread::spawn(move || {
                let registered = gate.submit(1, &no_owner(), || {
                    owner.register(
                        TaskName::from("task"),
                        TaskKind::Worker,
                        Some(tokio::time::Instant::now()),
                        Some(tag),
                    )
                });
                if let Ok(Accepted {
                    registered: (seq, slot),
                    ..
                }) = registered
                {
                    if gate.is_aborting() {
                        assert!(owner.abort(slot, seq));
                    }
                }
                registered.is_ok()
            })
        };
        gate.close();
        gate.start_aborting();
        owner.abort_matching(false, Some(tag));
        let accepted = submitter.join().expect("submitter");
        let aborted = owner.snapshot(0).counters.live_abort_requested;
        assert_eq!(
            aborted,
            usize::from(accepted),
            "an accepted task is always asked to abort"
        );
    });
}

/// The owner reference across two tasks whose lives overlap or not: each
/// task, from its hand-off to its release, finds the reference and the
/// owner as tasks reach it (`recorded`, written where
/// `OperationShared::hold_owner` records it: inside the gate's call, before
/// `HELD` is set), and once both are released the operation holds nothing.
/// A release that cleared `HELD` without checking the count, a submission
/// that trusted a stale `HELD`, or `HELD` set before the owner is recorded
/// fails here.
#[test]
fn loom_operation_holds_its_owner_exactly_while_tasks_are_accepted() {
    loom::model(|| {
        let gate = Arc::new(OperationGate::default());
        let hold = Arc::new(Mutex::new(None::<u8>));
        let recorded = Arc::new(AtomicBool::new(false));
        let task =
            |gate: Arc<OperationGate>, hold: Arc<Mutex<Option<u8>>>, recorded: Arc<AtomicBool>| {
                let accepted = gate
                    .submit(1, &hold, || Ok::<_, ()>(()))
                    .expect("open operation");
                if !accepted.owner_held {
                    gate.hold_owner(&hold, || {
                        recorded.store(true, Ordering::Release);
                        7
                    });
                }
                // The task runs and settles: its owner must be there.
                assert!(recorded.load(Ordering::Acquire), "the owner is recorded");
                assert_eq!(*hold.lock(), Some(7), "a running task finds its owner");
                gate.release(&hold).owner
            };
        let other = {
            let (gate, hold, recorded) =
                (Arc::clone(&gate), Arc::clone(&hold), Arc::clone(&recorded));
            thread::spawn(move || task(gate, hold, recorded))
        };
        let mine = task(Arc::clone(&gate), Arc::clone(&hold), Arc::clone(&recorded));
        let theirs = other.join().expect("other task");
        assert_eq!(gate.active(), 0);
        assert_eq!(*hold.lock(), None, "an idle operation holds no owner");
        assert!(
            mine.is_some() || theirs.is_some(),
            "the release that made it idle took the owner back"
        );
    });
}
