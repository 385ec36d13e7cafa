//! Process memory discovery: the hard memory limit the process runs under,
//! and the managed budget derived from it.
//!
//! [`ProcessMemoryLimit::detect`] answers "how much memory may this process
//! use?" by trying, in order:
//!
//! 1. the environment variable `ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES`. When it
//!    is set it wins and must hold a whole number of bytes of at least
//!    [`ProcessMemoryLimit::MIN_ENVIRONMENT_BYTES`] (1 MiB; surrounding
//!    whitespace is ignored); anything else, a value that is not UTF-8
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
//! All files are read through a [`MemoryFileView`], so discovery can be
//! tested with fixture files ([`ProcessMemoryLimit::detect_with_view`]).
//! An existing file that cannot be read stops detection with an
//! [`RuntimeErrorKind::Io`](crate::RuntimeErrorKind::Io) error rather than
//! silently reporting a larger limit. Only limits the process can see are
//! discovered. On platforms other than Linux, [`ProcessMemoryLimit::detect`]
//! consults only the environment variable.
//!
//! The detected limit and the chargeable budget are separate numbers:
//! [`ManagedMemoryBudget::resolve`] derives the managed bytes from the
//! effective limit (the smaller of the detected and a configured limit) with
//! a [`ManagedMemoryPolicy`], and keeps the detected limit for reporting.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{
    RuntimeContractPolicy, RuntimeContractViolation, RuntimeError, RuntimeOperation, RuntimeResult,
};

use crate::environment::PROCESS_MEMORY_LIMIT_ENV;

const PROC_SELF_CGROUP: &str = "/proc/self/cgroup";
const PROC_SELF_MOUNTINFO: &str = "/proc/self/mountinfo";
const PROC_MEMINFO: &str = "/proc/meminfo";
const CGROUP_V2_LIMIT_FILE: &str = "memory.max";
const CGROUP_V1_LIMIT_FILE: &str = "memory.limit_in_bytes";
/// cgroup v1 reports "no limit" as a page-aligned `i64::MAX`.
const CGROUP_V1_UNLIMITED_FLOOR: u64 = 0x7FFF_FFFF_FFFF_F000;

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
    /// The smallest limit `ROCKETMQ_PROCESS_MEMORY_LIMIT_BYTES` accepts
    /// (1 MiB): a smaller value is far more likely a unit mistake (`512`
    /// meant as MiB) than a process that runs in a few kilobytes. A
    /// [`configured`](Self::configured) limit has no such floor.
    pub const MIN_ENVIRONMENT_BYTES: u64 = 1 << 20;

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
            Err(error) if error.kind() == crate::RuntimeErrorKind::Unsupported => {
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

/// What the managed (chargeable) memory budget should be, before headroom.
///
/// The enum is non-exhaustive. Build requests through
/// [`ManagedMemoryPolicy`], which validates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ManagedMemoryRequest {
    /// The whole effective limit (the default).
    #[default]
    WholeLimit,
    /// A fixed number of bytes (clamped to the effective limit less
    /// headroom).
    ExplicitBytes(u64),
    /// `floor(effective · numerator / denominator)`.
    Fraction {
        /// The fraction's numerator (`0 < numerator ≤ denominator`).
        numerator: u64,
        /// The fraction's denominator.
        denominator: u64,
    },
}

/// How the managed memory budget is derived from the effective limit: a
/// [`ManagedMemoryRequest`] plus reserved headroom bytes.
///
/// The default takes the whole limit with no headroom.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ManagedMemoryPolicy {
    request: ManagedMemoryRequest,
    headroom_bytes: u64,
}

impl ManagedMemoryPolicy {
    /// The whole effective limit, no headroom (same as `Default`).
    pub const fn whole_limit() -> Self {
        Self {
            request: ManagedMemoryRequest::WholeLimit,
            headroom_bytes: 0,
        }
    }

    /// A fixed managed budget of `bytes`, no headroom.
    ///
    /// # Errors
    ///
    /// `bytes == 0` →
    /// [`InvalidMemoryLimit`](RuntimeContractViolation::InvalidMemoryLimit)
    /// with [`RuntimeContractPolicy::ManagedMemoryBudgetPositive`].
    pub const fn explicit_bytes(bytes: u64) -> Result<Self, RuntimeContractViolation> {
        if bytes == 0 {
            return Err(memory_violation(
                RuntimeContractPolicy::ManagedMemoryBudgetPositive,
            ));
        }
        Ok(Self {
            request: ManagedMemoryRequest::ExplicitBytes(bytes),
            headroom_bytes: 0,
        })
    }

    /// A managed budget of `numerator / denominator` of the effective limit,
    /// no headroom.
    ///
    /// # Errors
    ///
    /// `numerator == 0`, `denominator == 0` or `numerator > denominator` →
    /// [`InvalidMemoryLimit`](RuntimeContractViolation::InvalidMemoryLimit)
    /// with [`RuntimeContractPolicy::ManagedMemoryRatioPositiveAndBounded`].
    pub const fn fraction(
        numerator: u64,
        denominator: u64,
    ) -> Result<Self, RuntimeContractViolation> {
        if numerator == 0 || denominator == 0 || numerator > denominator {
            return Err(memory_violation(
                RuntimeContractPolicy::ManagedMemoryRatioPositiveAndBounded,
            ));
        }
        Ok(Self {
            request: ManagedMemoryRequest::Fraction {
                numerator,
                denominator,
            },
            headroom_bytes: 0,
        })
    }

    /// The same request with `headroom_bytes` of the effective limit kept
    /// out of the managed budget (replacing any earlier headroom).
    #[must_use]
    pub const fn with_headroom(self, headroom_bytes: u64) -> Self {
        Self {
            request: self.request,
            headroom_bytes,
        }
    }

    /// The requested managed budget.
    pub const fn request(&self) -> ManagedMemoryRequest {
        self.request
    }

    /// The bytes of the effective limit reserved outside the managed budget.
    pub const fn headroom_bytes(&self) -> u64 {
        self.headroom_bytes
    }
}

/// The resolved memory numbers: the detected limit (kept for reporting),
/// the effective limit, the requested and the granted managed bytes.
///
/// `managed = min(requested, effective − headroom)` and is always positive,
/// where `effective = min(detected, configured)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ManagedMemoryBudget {
    detected: ProcessMemoryLimit,
    effective_limit_bytes: u64,
    requested_managed_bytes: u64,
    managed_bytes: u64,
}

impl ManagedMemoryBudget {
    /// Resolves the managed budget.
    ///
    /// The effective limit is the smaller of `detected` and `configured`
    /// (when given). The request becomes bytes (the whole effective limit,
    /// the explicit count, or the floored fraction of the effective limit),
    /// and the managed budget is the smaller of that and the effective limit
    /// less the policy's headroom.
    ///
    /// # Errors
    ///
    /// [`InvalidMemoryLimit`](RuntimeContractViolation::InvalidMemoryLimit)
    /// with
    /// * [`ManagedMemoryHeadroomBelowEffectiveLimit`](RuntimeContractPolicy::ManagedMemoryHeadroomBelowEffectiveLimit)
    ///   if the headroom exceeds the effective limit;
    /// * [`ManagedMemoryBudgetPositive`](RuntimeContractPolicy::ManagedMemoryBudgetPositive)
    ///   if the managed budget would be 0.
    pub fn resolve(
        detected: ProcessMemoryLimit,
        configured: Option<ProcessMemoryLimit>,
        policy: ManagedMemoryPolicy,
    ) -> Result<Self, RuntimeContractViolation> {
        let effective = configured.map_or(detected.bytes(), |limit| {
            limit.bytes().min(detected.bytes())
        });
        let requested = match policy.request() {
            ManagedMemoryRequest::WholeLimit => effective,
            ManagedMemoryRequest::ExplicitBytes(bytes) => bytes,
            ManagedMemoryRequest::Fraction {
                numerator,
                denominator,
            } => fraction_of(effective, numerator, denominator).ok_or(memory_violation(
                RuntimeContractPolicy::ManagedMemoryRatioPositiveAndBounded,
            ))?,
        };
        let available = effective
            .checked_sub(policy.headroom_bytes())
            .ok_or(memory_violation(
                RuntimeContractPolicy::ManagedMemoryHeadroomBelowEffectiveLimit,
            ))?;
        let managed = requested.min(available);
        if managed == 0 {
            return Err(memory_violation(
                RuntimeContractPolicy::ManagedMemoryBudgetPositive,
            ));
        }
        Ok(Self {
            detected,
            effective_limit_bytes: effective,
            requested_managed_bytes: requested,
            managed_bytes: managed,
        })
    }

    /// The detected limit, unchanged by configuration or policy.
    pub const fn detected(&self) -> ProcessMemoryLimit {
        self.detected
    }

    /// `min(detected, configured)` in bytes.
    pub const fn effective_limit_bytes(&self) -> u64 {
        self.effective_limit_bytes
    }

    /// What the policy asked for, in bytes, before headroom and clamping.
    pub const fn requested_managed_bytes(&self) -> u64 {
        self.requested_managed_bytes
    }

    /// The chargeable budget: `min(requested, effective − headroom)`,
    /// always positive.
    pub const fn managed_bytes(&self) -> u64 {
        self.managed_bytes
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
        RuntimeContractPolicy::ProcessMemoryLimitAtLeastMinimum,
        DETECT,
        |text| {
            text.parse::<u64>()
                .ok()
                .filter(|bytes| *bytes >= ProcessMemoryLimit::MIN_ENVIRONMENT_BYTES)
        },
    )?;
    Ok(ProcessMemoryLimit::discovered(
        bytes,
        MemoryLimitSource::Environment,
    ))
}

// ---------------------------------------------------------------------------
// cgroups
// ---------------------------------------------------------------------------

/// The process's membership paths from `/proc/self/cgroup`.
#[derive(Debug, Default, PartialEq, Eq)]
struct CgroupMembership {
    /// The unified (v2) hierarchy path, from the `0::/path` line.
    v2: Option<String>,
    /// The path in the v1 hierarchy carrying the `memory` controller.
    v1_memory: Option<String>,
}

fn parse_cgroup_membership(text: &str) -> CgroupMembership {
    let mut membership = CgroupMembership::default();
    for line in text.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if !path.starts_with('/') || id.parse::<u32>().is_err() {
            continue;
        }
        if id == "0" && controllers.is_empty() {
            membership.v2.get_or_insert_with(|| path.to_owned());
        } else if id != "0" && controllers.split(',').any(|c| c == "memory") {
            membership.v1_memory.get_or_insert_with(|| path.to_owned());
        }
    }
    membership
}

/// One line of `/proc/self/mountinfo`, reduced to what discovery needs.
#[derive(Debug, PartialEq, Eq)]
struct MountEntry {
    /// The path, inside the mounted file system, that is mounted.
    root: String,
    mount_point: PathBuf,
    fs_type: String,
    super_options: String,
}

impl MountEntry {
    fn is_cgroup_v2(&self) -> bool {
        self.fs_type == "cgroup2"
    }

    fn is_cgroup_v1_memory(&self) -> bool {
        self.fs_type == "cgroup" && self.super_options.split(',').any(|o| o == "memory")
    }
}

/// `id parent major:minor root mount-point options [optional…] - type source super-options`
fn parse_mountinfo_line(line: &str) -> Option<MountEntry> {
    let (before, after) = line.split_once(" - ")?;
    let before: Vec<&str> = before.split_whitespace().collect();
    if before.len() < 6 {
        return None;
    }
    let mut after = after.split_whitespace();
    let fs_type = after.next()?;
    let _source = after.next()?;
    let super_options = after.next()?;
    Some(MountEntry {
        root: unescape_mountinfo(before[3])?,
        mount_point: PathBuf::from(unescape_mountinfo(before[4])?),
        fs_type: fs_type.to_owned(),
        super_options: super_options.to_owned(),
    })
}

/// Decodes mountinfo's `\ooo` octal escapes; `None` for a broken escape or
/// a result that is not UTF-8.
fn unescape_mountinfo(field: &str) -> Option<String> {
    let bytes = field.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] != b'\\' {
            decoded.push(bytes[index]);
            index += 1;
            continue;
        }
        let digits = bytes.get(index + 1..index + 4)?;
        let mut value: u32 = 0;
        for &digit in digits {
            if !(b'0'..=b'7').contains(&digit) {
                return None;
            }
            value = value * 8 + u32::from(digit - b'0');
        }
        decoded.push(u8::try_from(value).ok()?);
        index += 4;
    }
    String::from_utf8(decoded).ok()
}

/// The non-empty components of an absolute cgroup path; `None` if it holds
/// `.` or `..` (for example a path outside the cgroup namespace).
fn cgroup_components(path: &str) -> Option<Vec<&str>> {
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    if components.iter().any(|c| *c == "." || *c == "..") {
        return None;
    }
    Some(components)
}

/// The directories to read for `membership`, from the membership directory
/// up to the mount point, using the matching mount with the widest view
/// (the shortest root that contains the membership path). `None` if no
/// mount shows the membership path.
fn cgroup_directories(
    mounts: &[MountEntry],
    membership: &str,
    matches: fn(&MountEntry) -> bool,
) -> Option<Vec<PathBuf>> {
    let member = cgroup_components(membership)?;
    let (mount, root_len) = mounts
        .iter()
        .filter(|mount| matches(mount))
        .filter_map(|mount| {
            let root = cgroup_components(&mount.root)?;
            member.starts_with(&root).then_some((mount, root.len()))
        })
        .min_by_key(|(_, root_len)| *root_len)?;
    let mut directory = mount.mount_point.clone();
    let mut directories = vec![directory.clone()];
    for component in &member[root_len..] {
        directory.push(component);
        directories.push(directory.clone());
    }
    directories.reverse();
    Some(directories)
}

/// The smallest finite limit in `file` across `directories`.
fn smallest_limit(
    view: &dyn MemoryFileView,
    directories: &[PathBuf],
    file: &str,
    parse: fn(&str) -> Option<u64>,
) -> RuntimeResult<Option<u64>> {
    let mut smallest: Option<u64> = None;
    for directory in directories {
        if let Some(text) = view.read_optional(&directory.join(file))? {
            if let Some(limit) = parse(&text) {
                smallest = Some(smallest.map_or(limit, |current| current.min(limit)));
            }
        }
    }
    Ok(smallest)
}

/// cgroup v2 `memory.max`: `max` is unlimited; 0 or garbage is ignored.
fn parse_cgroup_v2_limit(text: &str) -> Option<u64> {
    let text = text.trim();
    if text == "max" {
        return None;
    }
    text.parse::<u64>().ok().filter(|bytes| *bytes > 0)
}

/// cgroup v1 `memory.limit_in_bytes`: values at or above the unlimited
/// floor are unlimited; 0 or garbage is ignored.
fn parse_cgroup_v1_limit(text: &str) -> Option<u64> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|bytes| *bytes > 0 && *bytes < CGROUP_V1_UNLIMITED_FLOOR)
}

fn hierarchy_limit(
    view: &dyn MemoryFileView,
    mounts: &[MountEntry],
    membership: Option<&str>,
    matches: fn(&MountEntry) -> bool,
    file: &str,
    parse: fn(&str) -> Option<u64>,
) -> RuntimeResult<Option<u64>> {
    match membership.and_then(|path| cgroup_directories(mounts, path, matches)) {
        Some(directories) => smallest_limit(view, &directories, file, parse),
        None => Ok(None),
    }
}

/// The smallest finite cgroup limit visible to the process, v2 on a tie.
fn cgroup_limit(view: &dyn MemoryFileView) -> RuntimeResult<Option<ProcessMemoryLimit>> {
    let Some(cgroup) = view.read_optional(Path::new(PROC_SELF_CGROUP))? else {
        return Ok(None);
    };
    let membership = parse_cgroup_membership(&cgroup);
    if membership == CgroupMembership::default() {
        return Ok(None);
    }
    let Some(mountinfo) = view.read_optional(Path::new(PROC_SELF_MOUNTINFO))? else {
        return Ok(None);
    };
    let mounts: Vec<MountEntry> = mountinfo.lines().filter_map(parse_mountinfo_line).collect();
    let v2 = hierarchy_limit(
        view,
        &mounts,
        membership.v2.as_deref(),
        MountEntry::is_cgroup_v2,
        CGROUP_V2_LIMIT_FILE,
        parse_cgroup_v2_limit,
    )?;
    let v1 = hierarchy_limit(
        view,
        &mounts,
        membership.v1_memory.as_deref(),
        MountEntry::is_cgroup_v1_memory,
        CGROUP_V1_LIMIT_FILE,
        parse_cgroup_v1_limit,
    )?;
    let winner = match (v2, v1) {
        (Some(v2), Some(v1)) if v1 < v2 => Some((v1, MemoryLimitSource::CgroupV1)),
        (Some(v2), _) => Some((v2, MemoryLimitSource::CgroupV2)),
        (None, Some(v1)) => Some((v1, MemoryLimitSource::CgroupV1)),
        (None, None) => None,
    };
    Ok(winner.map(|(bytes, source)| ProcessMemoryLimit::discovered(bytes, source)))
}

// ---------------------------------------------------------------------------
// Host memory
// ---------------------------------------------------------------------------

/// `MemTotal:  <n> kB` of `/proc/meminfo`, in bytes; malformed lines are
/// skipped.
fn parse_meminfo_total(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut fields = line.strip_prefix("MemTotal:")?.split_whitespace();
        let kibibytes = fields.next()?.parse::<u64>().ok()?;
        if fields.next()? != "kB" || fields.next().is_some() {
            return None;
        }
        kibibytes.checked_mul(1024).filter(|bytes| *bytes > 0)
    })
}

#[cfg(all(test, not(loom)))]
mod tests;
