//! [`TaskSpawner`]: the narrow task-submission capability.
//!
//! Invariant: a spawner exposes submission into one group and a *child* of
//! the group's token, nothing else: no runtime handle, no detached spawn, no
//! way to create groups (compile-fail tested). The owner's shutdown reaches
//! its token; cancelling its token does not cancel the group.

use tokio_util::sync::CancellationToken;

use crate::critical::{CriticalFailure, CriticalFailureState};
use crate::error::RuntimeResult;
use crate::task_group::TaskGroup;
use crate::task_identity::{TaskGroupId, TaskId, TaskName};

/// The spawn methods a capability exposes, delegated to the `TaskGroup` in
/// its field `$group`: one definition for [`TaskSpawner`] and
/// [`ChildServiceContext`](crate::ChildServiceContext).
macro_rules! delegate_spawns {
    ($group:ident) => {
        /// See [`TaskGroup::spawn`](crate::TaskGroup::spawn).
        ///
        /// # Errors
        ///
        /// Kind `Closed` once the group is closing or closed, `Poisoned`
        /// after a panic poisoned it (operation `SpawnTaskGroupTask`).
        #[track_caller]
        pub fn spawn<F>(
            &self,
            name: impl Into<crate::task_identity::TaskName>,
            kind: crate::task_identity::TaskKind,
            future: F,
        ) -> crate::error::RuntimeResult<crate::task_identity::TaskId>
        where
            F: std::future::Future<Output = ()> + Send + 'static,
        {
            self.$group.spawn(name, kind, future)
        }

        /// See [`TaskGroup::spawn_service`](crate::TaskGroup::spawn_service).
        ///
        /// # Errors
        ///
        /// As `spawn`.
        #[track_caller]
        pub fn spawn_service<F>(
            &self,
            name: impl Into<crate::task_identity::TaskName>,
            future: F,
        ) -> crate::error::RuntimeResult<crate::task_identity::TaskId>
        where
            F: std::future::Future<Output = ()> + Send + 'static,
        {
            self.$group.spawn_service(name, future)
        }

        /// See
        /// [`TaskGroup::spawn_cancellable_service`](crate::TaskGroup::spawn_cancellable_service).
        ///
        /// # Errors
        ///
        /// As `spawn`.
        #[track_caller]
        pub fn spawn_cancellable_service<F>(
            &self,
            name: impl Into<crate::task_identity::TaskName>,
            future: F,
        ) -> crate::error::RuntimeResult<crate::task_identity::TaskId>
        where
            F: std::future::Future<Output = ()> + Send + 'static,
        {
            self.$group.spawn_cancellable_service(name, future)
        }

        /// See [`TaskGroup::spawn_critical`](crate::TaskGroup::spawn_critical).
        ///
        /// # Errors
        ///
        /// As `spawn`.
        #[track_caller]
        pub fn spawn_critical<F>(
            &self,
            name: impl Into<crate::task_identity::TaskName>,
            kind: crate::task_identity::TaskKind,
            state: crate::critical::CriticalFailureState,
            future: F,
        ) -> crate::error::RuntimeResult<crate::task_identity::TaskId>
        where
            F: std::future::Future<Output = ()> + Send + 'static,
        {
            self.$group.spawn_critical(name, kind, state, future)
        }

        /// See
        /// [`TaskGroup::spawn_critical_service`](crate::TaskGroup::spawn_critical_service).
        ///
        /// # Errors
        ///
        /// As `spawn`.
        #[track_caller]
        pub fn spawn_critical_service<F>(
            &self,
            name: impl Into<crate::task_identity::TaskName>,
            state: crate::critical::CriticalFailureState,
            future: F,
        ) -> crate::error::RuntimeResult<crate::task_identity::TaskId>
        where
            F: std::future::Future<Output = ()> + Send + 'static,
        {
            self.$group.spawn_critical_service(name, state, future)
        }

        /// See
        /// [`TaskGroup::spawn_supervised_service`](crate::TaskGroup::spawn_supervised_service).
        ///
        /// # Errors
        ///
        /// As `TaskGroup::spawn_supervised_service`.
        #[track_caller]
        pub fn spawn_supervised_service<F, Fut, E>(
            &self,
            name: impl Into<crate::task_identity::TaskName>,
            policy: crate::supervised::ServiceRestartPolicy,
            factory: F,
        ) -> crate::error::RuntimeResult<crate::task_identity::TaskId>
        where
            F: FnMut(crate::supervised::ServiceRun) -> Fut + Send + 'static,
            Fut: std::future::Future<Output = Result<(), E>> + Send + 'static,
            E: std::fmt::Display + Send + 'static,
        {
            self.$group.spawn_supervised_service(name, policy, factory)
        }
    };
}
pub(crate) use delegate_spawns;

/// Submits tracked tasks to one group, and nothing else.
///
/// A spawner is what a library receives when it only needs to run tasks: it
/// exposes no runtime handle, no detached spawn and no way to create groups.
/// Its [`cancellation_token`](Self::cancellation_token) is a child of the
/// group's token, so the owner's shutdown reaches it while cancelling it does
/// not cancel the group.
#[derive(Debug, Clone)]
pub struct TaskSpawner {
    group: TaskGroup,
}

impl TaskSpawner {
    pub(crate) fn new(group: TaskGroup) -> Self {
        Self { group }
    }

    /// The id of the group tasks are submitted to.
    pub fn group_id(&self) -> TaskGroupId {
        self.group.id()
    }

    /// The name of the group tasks are submitted to.
    pub fn group_name(&self) -> &str {
        self.group.name()
    }

    /// A child token of the group's token.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.group.cancellation_token().child_token()
    }

    delegate_spawns!(group);
}

/// Critical failures meet spawners here and nowhere else: a monitor runs as
/// a service of the spawner's group (the failure state itself knows no
/// spawner).
impl CriticalFailureState {
    /// Spawns a monitor that takes each pending failure and calls
    /// `handler` with it, until the spawner's scope is cancelled (the
    /// cancellation wins even before the first poll; a failure not yet
    /// taken stays pending).
    ///
    /// # Errors
    ///
    /// The spawner's refusal (`Closed`, `Poisoned`).
    pub fn spawn_monitor(
        &self,
        spawner: &TaskSpawner,
        name: impl Into<TaskName>,
        handler: impl Fn(CriticalFailure) + Send + Sync + 'static,
    ) -> RuntimeResult<TaskId> {
        let state = self.clone();
        let cancelled = spawner.cancellation_token();
        spawner.spawn_service(name, async move {
            loop {
                tokio::select! {
                    biased;
                    () = cancelled.cancelled() => return,
                    _ = state.wait() => {
                        if let Some(failure) = state.handle() {
                            handler(failure);
                        }
                    }
                }
            }
        })
    }
}
