//! The recommended entry path: `use rocketmq_runtime::prelude::*;`.
//!
//! The whole life of a service in five steps: own the runtime, derive one
//! component, run a service that observes cancellation, add a bounded
//! schedule, and finish with a blocking flush bounded by the shutdown
//! deadline before the owner shuts everything down.
//!
//! ```
//! use std::time::Duration;
//! use rocketmq_runtime::prelude::*;
//!
//! // 1. The owner holds the Tokio runtime and the sealed root.
//! let owner = RuntimeOwner::plan(RuntimeConfig::default())?.build()?;
//! // 2. One component; its budget is a child of the process budget.
//! let broker = owner.root_context().component("broker");
//! let budget: ResourceBudget = broker.process_budget();
//! assert!(budget.limit().capacity.bytes > 0);
//! // 3. A service that returns when its component is cancelled.
//! let cancelled = broker.task_group().cancellation_token();
//! broker.spawn_service("heartbeat", async move { cancelled.cancelled().await })?;
//! // 4. A bounded schedule: each run may take at most 50 ms.
//! broker.scheduled_tasks("maintenance").schedule(
//!     ScheduledTaskConfig::fixed_delay("compact", Duration::from_millis(100))
//!         .with_max_run_time(Duration::from_millis(50)),
//!     ScheduledExecutionPolicy::default(),
//!     || async {},
//! )?;
//! // 5. A final flush on the storage lane, inside the shutdown deadline.
//! let deadline = ShutdownDeadline::after(Duration::from_secs(10));
//! let storage: &BlockingExecutor = broker.storage_io();
//! let flushed = owner.block_on(storage.spawn_io_until("final-flush", deadline, || 4_096))?;
//! assert_eq!(flushed, 4_096);
//! let report: ShutdownReport = owner.shutdown_runtime_blocking_until(deadline)?;
//! assert_eq!(report.timed_out, 0);
//! assert!(report.is_healthy());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

// The specification's eight names, plus the four the recommended path
// above needs (configuration, a bounded schedule, task kinds).
pub use crate::{
    BlockingExecutor, ChildServiceContext, ResourceBudget, RootServiceContext, RuntimeConfig,
    RuntimeOwner, ScheduledExecutionPolicy, ScheduledTaskConfig, ShutdownDeadline, ShutdownReport,
    TaskGroup, TaskKind,
};
