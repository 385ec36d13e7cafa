//! What runs on the blocking thread: the job that owns the closure, its
//! admission permit and its record (dropped in that order whatever
//! happens), the start check that keeps an expired or closed submission
//! from running, and the guard that marks an abandoned record.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use crate::blocking::admission::AdmissionPermit;
use crate::blocking::scope::{Admit, ExecutorInner};
use crate::blocking::table::{BlockingTable, RecordGuard};
use crate::loom::Arc;
use crate::shutdown_deadline::ShutdownDeadline;
use crate::shutdown_report::BlockingTaskState;

/// Marks the record `TimedOutStillRunning` when the caller stops waiting
/// for a closure that may still run.
pub(super) struct Abandoned {
    pub(super) table: Arc<BlockingTable>,
    pub(super) id: u64,
    pub(super) armed: bool,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if self.armed {
            self.table
                .mark(self.id, BlockingTaskState::TimedOutStillRunning);
        }
    }
}

/// What runs on the blocking thread: the closure, its admission permit and
/// its record, dropped in that order whatever happens (return, panic, or
/// Tokio discarding a closure that never started).
pub(super) struct BlockingJob<R> {
    pub(super) work: Option<Box<dyn FnOnce() -> R + Send>>,
    pub(super) permit: Option<AdmissionPermit>,
    pub(super) record: Option<RecordGuard>,
    /// Checked when a Tokio blocking thread picks the job up (the pool may
    /// queue it behind other work); `None` for detached closures.
    pub(super) start: Option<StartCheck>,
}

/// Why a job's closure did not start (see [`StartCheck`]).
#[derive(Debug, Clone)]
pub(super) enum NotStarted {
    /// The scope closed (or the executor stopped) first.
    Closed,
    /// The operation deadline passed first.
    Expired,
    /// The OS refused the blocking pool a thread, and none was there to
    /// take the job (see [`spawn_on_pool`]); what Tokio said.
    NoThread(String),
}

/// Hands `job` to Tokio's blocking pool. Tokio panics when the OS refuses
/// it a thread and none is idle (a pids or thread limit, an address-space
/// limit); that panic becomes `Err` here: the job never runs (if the pool
/// later reaches it, it is dropped unrun, giving its permit and record
/// back), so a caller that saw the error never sees its closure run.
pub(super) fn spawn_on_pool<R: Send + 'static>(
    handle: &tokio::runtime::Handle,
    job: BlockingJob<R>,
) -> Result<tokio::task::JoinHandle<Result<R, NotStarted>>, std::io::Error> {
    let refused = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = Arc::clone(&refused);
    let task = move || {
        if flag.load(std::sync::atomic::Ordering::SeqCst) {
            drop(job);
            return Err(NotStarted::NoThread(String::new()));
        }
        job.run()
    };
    catch_unwind(AssertUnwindSafe(|| handle.spawn_blocking(task))).map_err(|payload| {
        refused.store(true, std::sync::atomic::Ordering::SeqCst);
        let message = crate::shutdown_report::payload_text(payload.as_ref())
            .unwrap_or("the blocking pool could not start a thread")
            .to_owned();
        std::io::Error::other(message)
    })
}

/// Whether a job may still start: its scope admits work and its operation
/// deadline has not passed (expired before start, the closure never runs:
/// `blocking/submit.rs`, the phases).
pub(super) struct StartCheck {
    pub(super) inner: Arc<ExecutorInner>,
    pub(super) deadline: ShutdownDeadline,
    pub(super) mode: Admit,
}

impl<R> BlockingJob<R> {
    /// Runs the closure, or says why it did not start when the start check
    /// fails (the permit and the record go back either way).
    pub(super) fn run(mut self) -> Result<R, NotStarted> {
        if let Some(start) = self.start.take() {
            if !start.inner.admits_mode(start.mode) {
                return Err(NotStarted::Closed);
            }
            if start.deadline.is_expired() {
                return Err(NotStarted::Expired);
            }
            if let Some(record) = &self.record {
                record.mark_started();
            }
        }
        let work = self.work.take();
        // The closure's captures are dropped when it returns (or unwinds).
        let result = catch_unwind(AssertUnwindSafe(move || work.map(|work| work())));
        drop(self);
        match result {
            Ok(Some(value)) => Ok(value),
            Ok(None) => unreachable_job(),
            Err(payload) => resume_unwind(payload),
        }
    }
}

/// A job runs its closure exactly once; `run` consumes the job.
pub(super) fn unreachable_job() -> ! {
    resume_unwind(Box::new("blocking job ran twice"))
}

impl<R> Drop for BlockingJob<R> {
    fn drop(&mut self) {
        drop(self.work.take());
        drop(self.permit.take());
        drop(self.record.take());
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::blocking::admission::{Admission, AdmissionBudget, LaneLimits};
    use crate::blocking::BlockingPoolPolicy;
    use crate::shutdown_report::{BlockingKind, BlockingLane};

    /// The drop order of the wrapper above, second half: the permit goes
    /// back before the record.
    /// With the table's records locked, the job's thread can release its
    /// permit but cannot remove its record; the test sees the slot free
    /// while the record is still there (with the order reversed the job
    /// would block before releasing, and the hang guard fails).
    #[test]
    fn the_permit_goes_back_before_the_record() {
        let limits = LaneLimits {
            ceiling: 1,
            reservation: 1,
            max_queue_depth: 1,
        };
        let budget = AdmissionBudget::new(1, &[limits]);
        let table = BlockingTable::new(
            &BlockingPoolPolicy::default(),
            BlockingLane::StorageIo,
            0,
            Arc::clone(&budget),
        );
        let Admission::Running(permit) = budget.admit(0) else {
            panic!("the first submission runs");
        };
        let record = table.insert(Arc::from("job"), BlockingKind::ShortIo);
        let job = BlockingJob {
            work: Some(Box::new(|| 7)),
            permit: Some(permit),
            record: Some(record),
            start: None,
        };
        let held = table.hold_records();
        let thread = std::thread::spawn(move || job.run());
        let hang_guard = tokio::time::Instant::now() + Duration::from_secs(30);
        while budget.counts(0).global_running != 0 {
            assert!(
                tokio::time::Instant::now() < hang_guard,
                "the permit is not released while the record is held"
            );
            std::thread::yield_now();
        }
        drop(held);
        assert!(matches!(thread.join().expect("no panic"), Ok(7)));
        assert_eq!(table.len(), 0);
    }
}
