//! Operation labels: what the runtime was doing when an error happened.

use std::fmt;

use serde::{Serialize, Serializer};

/// An operation label owned by a crate built on the runtime.
///
/// Downstream crates label their own failures with a constant instead of
/// asking for a new [`RuntimeOperation`] variant:
///
/// ```
/// use rocketmq_runtime::RuntimeOperation;
///
/// const INITIALIZE_BROKER: RuntimeOperation = RuntimeOperation::external("initialize-broker");
/// assert_eq!(INITIALIZE_BROKER.to_string(), "initialize-broker");
/// ```
///
/// A label is 1 to [`MAX_LABEL_BYTES`](Self::MAX_LABEL_BYTES) bytes of
/// lowercase ASCII letters, digits and `-`, and neither starts nor ends with
/// `-`. An invalid label panics; in a `const` that panic is a compile error,
/// so a label declared as a constant is checked before the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExternalOperation {
    label: &'static str,
}

impl ExternalOperation {
    /// The longest accepted label, in bytes.
    pub const MAX_LABEL_BYTES: usize = 64;

    /// Validates `label` and wraps it.
    ///
    /// # Panics
    ///
    /// Panics when the label is empty, longer than
    /// [`MAX_LABEL_BYTES`](Self::MAX_LABEL_BYTES), contains a byte other
    /// than `[a-z0-9-]`, or starts or ends with `-`. Evaluated in a `const`,
    /// the panic fails compilation.
    pub const fn new(label: &'static str) -> Self {
        let bytes = label.as_bytes();
        if bytes.is_empty() {
            panic!("external operation label must not be empty");
        }
        if bytes.len() > Self::MAX_LABEL_BYTES {
            panic!("external operation label must be at most 64 bytes");
        }
        if bytes[0] == b'-' || bytes[bytes.len() - 1] == b'-' {
            panic!("external operation label must not start or end with '-'");
        }
        let mut index = 0;
        while index < bytes.len() {
            let byte = bytes[index];
            if !(byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'-') {
                panic!("external operation label may only contain [a-z0-9-]");
            }
            index += 1;
        }
        Self { label }
    }

    /// The validated label.
    pub const fn label(&self) -> &'static str {
        self.label
    }
}

impl fmt::Display for ExternalOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label)
    }
}

macro_rules! runtime_operations {
    (
        $(#[$enum_meta:meta])*
        pub enum RuntimeOperation {
            $( $(#[doc = $doc:literal])+ $variant:ident => $label:literal, )+
        }
    ) => {
        $(#[$enum_meta])*
        pub enum RuntimeOperation {
            $( $(#[doc = $doc])+ $variant, )+
            /// An operation of a crate built on the runtime; see
            /// [`RuntimeOperation::external`].
            External(ExternalOperation),
        }

        impl RuntimeOperation {
            /// The lowercase kebab-case label, identical to `Display`.
            pub const fn label(&self) -> &'static str {
                match self {
                    $( Self::$variant => $label, )+
                    Self::External(operation) => operation.label(),
                }
            }
        }

        #[cfg(all(test, not(loom)))]
        impl RuntimeOperation {
            /// Every named (non-external) operation, for label tests.
            pub(crate) const NAMED: &'static [RuntimeOperation] = &[$( Self::$variant, )+];
        }
    };
}

runtime_operations! {
    /// Names the operation that failed, for logs, metrics and diagnostics.
    ///
    /// Branch on [`RuntimeError::kind`](crate::RuntimeError::kind), not on the
    /// operation: the label says *where* something failed, the kind says
    /// *what* failed. `Display` (and [`label`](Self::label)) is a stable
    /// lowercase kebab-case label such as `spawn-task-group-task`.
    ///
    /// The enum is non-exhaustive: a `match` outside this crate needs a
    /// wildcard arm, and downstream crates use [`external`](Self::external)
    /// labels rather than new variants.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum RuntimeOperation {
        /// Building the owned Tokio runtime.
        BuildTokioRuntime => "build-tokio-runtime",
        /// Loading a configuration file.
        LoadConfigFile => "load-config-file",
        /// Deserializing a loaded configuration file.
        DeserializeConfigFile => "deserialize-config-file",
        /// Detecting the process memory limit (cgroup or host memory).
        DetectProcessMemoryLimit => "detect-process-memory-limit",
        /// Resolving the managed memory budget from the detected limit.
        ResolveManagedMemoryBudget => "resolve-managed-memory-budget",
        /// Reading a file.
        ReadFile => "read-file",
        /// Reading a file's backup copy.
        ReadFileBackup => "read-file-backup",
        /// Persisting a metadata snapshot durably.
        PersistMetadata => "metadata-persistence",
        /// Creating the parent directory of a metadata target.
        MetadataCreateParent => "metadata-create-parent",
        /// Creating the temporary file of a metadata write.
        MetadataCreateTemporary => "metadata-create-temporary",
        /// Writing the temporary file of a metadata write.
        MetadataWriteTemporary => "metadata-write-temporary",
        /// Syncing the temporary file of a metadata write.
        MetadataSyncTemporary => "metadata-sync-temporary",
        /// Renaming the temporary file over the metadata target.
        MetadataReplaceTarget => "metadata-replace-target",
        /// Syncing the parent directory after a metadata rename.
        MetadataSyncParent => "metadata-sync-parent",
        /// Removing a leftover temporary metadata file.
        MetadataRemoveTemporary => "metadata-remove-temporary",
        /// Waiting for a metadata write to become durable.
        WaitForDurableMetadata => "wait-for-durable-metadata",
        /// Admitting a metadata snapshot into the metadata actor.
        AdmitMetadataSnapshot => "admit-metadata-snapshot",
        /// Admitting an operation into the metadata actor's pending set.
        AdmitMetadataOperation => "admit-metadata-operation",
        /// Admitting snapshot bytes against the metadata byte limit.
        AdmitMetadataBytes => "admit-metadata-bytes",
        /// Talking to a metadata worker that has stopped.
        MetadataWorkerStopped => "metadata-worker-stopped",
        /// Submitting to a metadata actor that is closed.
        MetadataIoClosed => "metadata-io-closed",
        /// Registering the SIGTERM handler.
        RegisterSigtermHandler => "register-sigterm-handler",
        /// Registering the SIGINT handler.
        RegisterSigintHandler => "register-sigint-handler",
        /// Waiting for a termination signal.
        WaitForSignal => "wait-for-signal",
        /// Creating a child task group.
        CreateTaskGroupChild => "create-task-group-child",
        /// Spawning a task into a task group.
        SpawnTaskGroupTask => "spawn-task-group-task",
        /// Spawning a long-lived service task.
        SpawnServiceTask => "spawn-service-task",
        /// Spawning a scheduler driver or a scheduled run.
        SpawnSchedulerTask => "spawn-scheduler-task",
        /// Obtaining or using a runtime context.
        RuntimeContext => "runtime-context",
        /// Starting a service lifecycle.
        StartServiceLifecycle => "start-service-lifecycle",
        /// Creating or using the task group of a service lifecycle.
        ServiceLifecycleTaskGroup => "service-lifecycle-task-group",
        /// Binding the service health probe listener.
        BindServiceHealthProbe => "bind-service-health-probe",
        /// Inspecting the bound health probe (for example its local address).
        InspectServiceHealthProbe => "inspect-service-health-probe",
        /// Marking a service ready.
        MarkServiceReady => "mark-service-ready",
        /// Suspending a service's readiness.
        SuspendServiceReadiness => "suspend-service-readiness",
        /// Restoring a service's readiness after a suspension.
        RestoreServiceReadiness => "restore-service-readiness",
        /// Shutting down the owned runtime from synchronous code.
        ShutdownRuntimeBlocking => "shutdown-runtime-blocking",
        /// Admitting blocking work into a lane's queue.
        BlockingQueueAdmission => "blocking-queue-admission",
        /// Running a blocking closure.
        RunBlockingTask => "run-blocking-task",
        /// Enforcing a blocking task's deadline.
        BlockingTaskDeadline => "blocking-task-deadline",
        /// Joining or observing a blocking task.
        BlockingTask => "blocking-task",
        /// Checking the kind of submitted blocking work.
        BlockingExecutorKind => "blocking-executor-kind",
        /// Shutting down an isolated blocking executor.
        ShutdownBlockingExecutor => "shutdown-blocking-executor",
        /// Clearing completed schedules from a scheduler.
        ClearCompletedSchedules => "clear-completed-schedules",
        /// Registering a scheduled task.
        RegisterScheduledTask => "register-scheduled-task",
        /// Spawning a task bound to an operation context.
        SpawnOperation => "spawn-operation",
        /// Resolving the owner of an operation context.
        OperationOwner => "operation-owner",
        /// General metadata I/O.
        MetadataIo => "metadata-io",
        /// Reading the service lifecycle environment.
        ServiceLifecycleEnvironment => "service-lifecycle-environment",
        /// Parsing the service lifecycle probe address.
        ServiceLifecycleProbeAddress => "service-lifecycle-probe-address",
        /// Parsing a service lifecycle duration.
        ServiceLifecycleDuration => "service-lifecycle-duration",
        /// Checking a service lifecycle duration against its allowed range.
        ServiceLifecycleDurationRange => "service-lifecycle-duration-range",
        /// Checking the configured service drain methods.
        ServiceLifecycleDrainMethods => "service-lifecycle-drain-methods",
        /// Claiming or resolving a metadata resource target.
        MetadataResourceTarget => "metadata-resource-target",
    }
}

impl RuntimeOperation {
    /// A label owned by a crate built on the runtime.
    ///
    /// # Panics
    ///
    /// Panics on an invalid label (see [`ExternalOperation::new`]); used in a
    /// `const`, an invalid label fails compilation.
    pub const fn external(label: &'static str) -> Self {
        Self::External(ExternalOperation::new(label))
    }

    /// The component an operation belongs to: `"task"` for task-group and
    /// spawn operations, `"runtime"` for everything else.
    pub(crate) const fn component(&self) -> &'static str {
        match self {
            Self::CreateTaskGroupChild
            | Self::SpawnTaskGroupTask
            | Self::SpawnServiceTask
            | Self::SpawnSchedulerTask
            | Self::SpawnOperation => "task",
            _ => "runtime",
        }
    }
}

impl fmt::Display for RuntimeOperation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

impl Serialize for RuntimeOperation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.label())
    }
}
