//! Process memory discovery: the hard memory limit the process runs under,
//! and the managed budget derived from it.
//!
//! [`ProcessMemoryLimit::detect`] answers "how much memory may this process
//! use?" by trying, in order:
//!
//! 1. the environment variable `ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES`. When it
//!    is set it wins and must hold a positive whole number of bytes
//!    (surrounding whitespace is ignored); anything else, a value that is not UTF-8
//!    included, is [`RuntimeError::configuration`] with
//!    [`RuntimeOperation::DetectProcessMemoryLimit`] and an
//!    [`EnvironmentViolation`](crate::EnvironmentViolation) context;
//! 2. Linux cgroups: the process's membership in `/proc/self/cgroup` is
//!    matched against the cgroup mounts in `/proc/self/mountinfo`, and every
//!    directory from the membership path up to the mount point is read: the
//!    cgroup v2 `memory.max` (`max` means unlimited) and the cgroup v1
//!    `memory.limit_in_bytes` (values at or above `0x7FFF_FFFF_FFFF_F000`
//!    mean unlimited). The smallest finite limit along the path wins; on a
//!    hybrid host (v1 memory controller and v2 both present) the smaller of
//!    the two wins, v2 on a tie. Malformed lines and malformed or zero limit
//!    files are skipped;
//! 3. host physical memory (`MemTotal` of `/proc/meminfo`);
//! 4. otherwise [`RuntimeError::unsupported`] with
//!    [`RuntimeOperation::DetectProcessMemoryLimit`]. An owner built
//!    outside Linux turns that answer into an unknown, unbounded limit with
//!    a warning ([`ProcessMemoryLimit::or_unknown`]), so a developer's
//!    machine runs without configuration; on Linux it stays an error.
//!
//! Invariants:
//!
//! 1. All files are read through a [`MemoryFileView`], so discovery can be
//!    tested with fixture files ([`ProcessMemoryLimit::detect_with_view`]).
//! 2. Parsers skip malformed lines and never panic; `max` and the v1
//!    unlimited marker are ignored, and the smallest finite limit along the
//!    membership path wins.
//! 3. An existing file that cannot be read stops detection with an
//!    [`RuntimeErrorKind::Io`](crate::RuntimeErrorKind::Io) error rather than
//!    silently reporting a larger limit. Only limits the process can see are
//!    discovered. On platforms other than Linux,
//!    [`ProcessMemoryLimit::detect`] consults only the environment variable.
//! 4. The detected limit and the chargeable budget are separate numbers:
//!    [`ManagedMemoryBudget::resolve`] derives the managed bytes from the
//!    effective limit (the smaller of the detected and a configured limit)
//!    with a [`ManagedMemoryPolicy`], and keeps the detected limit for
//!    reporting.

use std::fmt;
use std::io;
use std::path::Path;

use crate::error::{
    RuntimeContractPolicy, RuntimeContractViolation, RuntimeError, RuntimeOperation, RuntimeResult,
};

use crate::environment::PROCESS_MEMORY_LIMIT_ENV;

mod cgroup;
mod managed;

#[cfg(test)]
use cgroup::*;
use cgroup::{cgroup_limit, parse_meminfo_total};
pub use managed::{ManagedMemoryBudget, ManagedMemoryPolicy, ManagedMemoryRequest};

const PROC_MEMINFO: &str = "/proc/meminfo";

const DETECT: RuntimeOperation = RuntimeOperation::DetectProcessMemoryLimit;

const fn memory_violation(policy: RuntimeContractPolicy) -> RuntimeContractViolation {
    RuntimeContractViolation::InvalidMemoryLimit { policy }
}

/// `floor(bytes · numerator / denominator)` for `0 < numerator ≤ denominator`;
/// `None` for any other fraction.
const fn fraction_of(bytes: u64, numerator: u64, denominator: u64) -> Option<u64> {
    if numerator == 0 || denominator == 0 || numerator > denominator {
        return None;
    }
    // numerator ≤ denominator, so the quotient never exceeds `bytes`.
    Some((bytes as u128 * numerator as u128 / denominator as u128) as u64)
}

/// Where a [`ProcessMemoryLimit`] came from.
///
/// The enum is non-exhaustive: new discovery sources may be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MemoryLimitSource {
    /// Supplied by the application ([`ProcessMemoryLimit::configured`]).
    Configured,
    /// The `ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES` environment variable.
    Environment,
    /// A cgroup v2 `memory.max` along the process's membership path.
    CgroupV2,
    /// A cgroup v1 `memory.limit_in_bytes` along the process's membership
    /// path.
    CgroupV1,
    /// The host's physical memory (`MemTotal` of `/proc/meminfo`).
    HostPhysicalMemory,
    /// Nothing was found (a platform without discovery and no variable):
    /// the limit is `u64::MAX`, see [`ProcessMemoryLimit::or_unknown`].
    Unknown,
}

impl MemoryLimitSource {
    /// The stable kebab-case label: `configured`, `environment`,
    /// `cgroup-v2`, `cgroup-v1` or `host-physical-memory`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Configured => "configured",
            Self::Environment => "environment",
            Self::CgroupV2 => "cgroup-v2",
            Self::CgroupV1 => "cgroup-v1",
            Self::HostPhysicalMemory => "host-physical-memory",
            Self::Unknown => "unknown",
        }
    }
}

impl fmt::Display for MemoryLimitSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A positive hard memory limit for the process and where it came from.
///
/// Obtain one by detection ([`detect`](Self::detect),
/// [`detect_with_view`](Self::detect_with_view)) or from configuration
/// ([`configured`](Self::configured)). The byte count is always positive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessMemoryLimit {
    bytes: u64,
    source: MemoryLimitSource,
}

impl ProcessMemoryLimit {
    /// Detects the limit from the real environment and, on Linux, the real
    /// `/proc` and cgroup files, in the order given in the module docs.
    ///
    /// # Errors
    ///
    /// * [`RuntimeErrorKind::Configuration`](crate::RuntimeErrorKind::Configuration)
    ///   if `ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES` is set but is not a
    ///   positive integer;
    /// * [`RuntimeErrorKind::Io`](crate::RuntimeErrorKind::Io) if an existing
    ///   file could not be read;
    /// * [`RuntimeErrorKind::Unsupported`](crate::RuntimeErrorKind::Unsupported)
    ///   if no finite limit was found (always the case on non-Linux
    ///   platforms without the environment variable).
    ///
    /// Every error is labelled [`RuntimeOperation::DetectProcessMemoryLimit`].
    pub fn detect() -> RuntimeResult<Self> {
        #[cfg(target_os = "linux")]
        {
            Self::detect_with_view(&HostMemoryFileView)
        }
        #[cfg(not(target_os = "linux"))]
        {
            match environment_value() {
                Some(value) => parse_environment_limit(&value),
                None => Err(RuntimeError::unsupported(DETECT)),
            }
        }
    }

    /// Detects the limit from the real environment variable and the files
    /// seen through `view` (on any platform), in the order given in the
    /// module docs.
    ///
    /// # Errors
    ///
    /// As [`detect`](Self::detect); read errors are whatever `view` returns.
    pub fn detect_with_view(view: &dyn MemoryFileView) -> RuntimeResult<Self> {
        Self::detect_from(environment_value(), view)
    }

    /// Detection with the environment value injected (`None` = unset), so
    /// tests never touch the process environment.
    pub(crate) fn detect_from(
        environment: Option<std::ffi::OsString>,
        view: &dyn MemoryFileView,
    ) -> RuntimeResult<Self> {
        if let Some(value) = environment {
            return parse_environment_limit(&value);
        }
        if let Some(limit) = cgroup_limit(view)? {
            return Ok(limit);
        }
        let meminfo = view.read_optional(Path::new(PROC_MEMINFO))?;
        match meminfo.as_deref().and_then(parse_meminfo_total) {
            Some(bytes) => Ok(Self::discovered(
                bytes,
                MemoryLimitSource::HostPhysicalMemory,
            )),
            None => Err(RuntimeError::unsupported(DETECT)),
        }
    }

    /// `detected`, or, when detection found no finite limit (kind
    /// `Unsupported`: a platform other than Linux without
    /// `ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES`), an unknown limit of
    /// `u64::MAX` bytes (source [`MemoryLimitSource::Unknown`]) with a
    /// `tracing` warning saying how to set one. Other errors stay errors.
    ///
    /// # Errors
    ///
    /// `detected`'s error unless its kind is `Unsupported`.
    pub fn or_unknown(detected: RuntimeResult<Self>) -> RuntimeResult<Self> {
        match detected {
            Err(error) if error.kind() == crate::error::RuntimeErrorKind::Unsupported => {
                tracing::warn!(
                    "no memory limit found on this platform: the process budget is unbounded; \
                     set {PROCESS_MEMORY_LIMIT_ENV} or RuntimeOwnerPlan::with_memory_limit to bound it"
                );
                Ok(Self::discovered(u64::MAX, MemoryLimitSource::Unknown))
            }
            other => other,
        }
    }

    /// A limit supplied by the application; its source is
    /// [`MemoryLimitSource::Configured`].
    ///
    /// # Errors
    ///
    /// `bytes == 0` →
    /// [`InvalidMemoryLimit`](RuntimeContractViolation::InvalidMemoryLimit)
    /// with [`RuntimeContractPolicy::ConfiguredMemoryLimitPositive`].
    pub const fn configured(bytes: u64) -> Result<Self, RuntimeContractViolation> {
        if bytes == 0 {
            return Err(memory_violation(
                RuntimeContractPolicy::ConfiguredMemoryLimitPositive,
            ));
        }
        Ok(Self::discovered(bytes, MemoryLimitSource::Configured))
    }

    const fn discovered(bytes: u64, source: MemoryLimitSource) -> Self {
        debug_assert!(bytes > 0);
        Self { bytes, source }
    }

    /// The limit in bytes (always positive).
    pub const fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Where the limit came from.
    pub const fn source(&self) -> MemoryLimitSource {
        self.source
    }

    /// `floor(bytes · numerator / denominator)`, computed without overflow.
    /// The result may be 0 for a tiny limit and fraction.
    ///
    /// # Errors
    ///
    /// `numerator == 0`, `denominator == 0` or `numerator > denominator` →
    /// [`InvalidMemoryLimit`](RuntimeContractViolation::InvalidMemoryLimit)
    /// with [`RuntimeContractPolicy::MemoryFractionPositiveAndBounded`].
    pub const fn fraction(
        &self,
        numerator: u64,
        denominator: u64,
    ) -> Result<u64, RuntimeContractViolation> {
        match fraction_of(self.bytes, numerator, denominator) {
            Some(bytes) => Ok(bytes),
            None => Err(memory_violation(
                RuntimeContractPolicy::MemoryFractionPositiveAndBounded,
            )),
        }
    }
}

/// Read access to the files memory discovery consults (`/proc/self/cgroup`,
/// `/proc/self/mountinfo`, cgroup limit files, `/proc/meminfo`).
///
/// [`HostMemoryFileView`] reads the real files; tests supply fixture files.
pub trait MemoryFileView: fmt::Debug + Send + Sync + 'static {
    /// The whole contents of `path`, or `None` if the file does not exist.
    ///
    /// # Errors
    ///
    /// An existing file that cannot be read is an error (for the host view,
    /// [`RuntimeError::io`] labelled
    /// [`RuntimeOperation::DetectProcessMemoryLimit`]).
    fn read_optional(&self, path: &Path) -> RuntimeResult<Option<String>>;
}

/// The production [`MemoryFileView`]: reads the real file system.
///
/// A missing file (or a path through a non-directory) is `Ok(None)`; any
/// other failure, including contents that are not UTF-8, is an
/// [`RuntimeErrorKind::Io`](crate::RuntimeErrorKind::Io) error labelled
/// [`RuntimeOperation::DetectProcessMemoryLimit`].
#[derive(Debug, Default, Clone, Copy)]
pub struct HostMemoryFileView;

impl MemoryFileView for HostMemoryFileView {
    fn read_optional(&self, path: &Path) -> RuntimeResult<Option<String>> {
        match std::fs::read_to_string(path) {
            Ok(contents) => Ok(Some(contents)),
            Err(error)
                if matches!(
                    error.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                Ok(None)
            }
            Err(error) => Err(RuntimeError::io(DETECT, error)),
        }
    }
}

// ---------------------------------------------------------------------------
// Environment
// ---------------------------------------------------------------------------

/// The raw environment value (checked by [`parse_environment_limit`]).
fn environment_value() -> Option<std::ffi::OsString> {
    crate::environment::process_environment(PROCESS_MEMORY_LIMIT_ENV)
}

/// A set `ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES`: whole bytes, at least the
/// minimum; anything else (not UTF-8 included) is refused with the value.
fn parse_environment_limit(raw: &std::ffi::OsStr) -> RuntimeResult<ProcessMemoryLimit> {
    let bytes = crate::environment::parse_value(
        PROCESS_MEMORY_LIMIT_ENV,
        raw,
        RuntimeContractPolicy::ProcessMemoryLimitPositive,
        DETECT,
        |text| text.parse::<u64>().ok().filter(|bytes| *bytes > 0),
    )?;
    Ok(ProcessMemoryLimit::discovered(
        bytes,
        MemoryLimitSource::Environment,
    ))
}

#[cfg(all(test, not(loom)))]
mod tests;
