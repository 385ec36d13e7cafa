//! Value types of the budget tree: limits, classes, rejections, clocks.
//!
//! Invariants:
//!
//! 1. A limit is checked before a level exists, with no side effects:
//!    positive count and bytes, positive rates and bursts, a control reserve
//!    within the capacity (a rate reserve only where the level has a rate),
//!    and a non-zero max age.
//! 2. A child fits its parent in every dimension: count, bytes, rate (a
//!    parent with a rate has only rated children) and max age.
//! 3. A rejection names the budget asked and the level that refused
//!    (`exhausted_path`), with the reason (a capacity dimension, or a closed
//!    gate) and the asked budget's full policy.

use std::fmt;
use std::time::Duration;

pub(crate) use crate::error::BudgetDimension;
use crate::error::RuntimeContractViolation;
use crate::loom::Arc;
use crate::resource_budget::stripes::PathCopy;

/// What a full budgeted queue does with a new item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FullPolicy {
    /// Refuse the item and return it.
    #[default]
    Reject,
    /// `push_until` waits for capacity until its deadline.
    WaitUntilDeadline,
    /// Replace the queued state with the newest item.
    CoalesceLatest,
    /// Drop items older than the budget's `max_age` first.
    DropStale,
    /// Close the queue when its consumer falls behind.
    CloseSlowConsumer,
}

/// Which capacity a reservation may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetClass {
    /// Ordinary work: cannot use the control reserve.
    Data,
    /// Control work: may use the control reserve.
    Control,
}

/// A token-bucket rate: `permits_per_second` refill, `burst` bucket size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateLimit {
    /// Refill per second.
    pub permits_per_second: u64,
    /// Bucket size.
    pub burst: u64,
}

impl RateLimit {
    /// A rate limit.
    pub const fn new(permits_per_second: u64, burst: u64) -> Self {
        Self {
            permits_per_second,
            burst,
        }
    }
}

/// Count, bytes and an optional rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BudgetCapacity {
    /// Reservations at once.
    pub count: usize,
    /// Retained bytes at once.
    pub bytes: usize,
    /// Reservations per second.
    pub rate: Option<RateLimit>,
}

impl BudgetCapacity {
    /// A capacity without a rate.
    pub const fn new(count: usize, bytes: usize) -> Self {
        Self {
            count,
            bytes,
            rate: None,
        }
    }

    /// Adds a rate.
    #[must_use]
    pub const fn with_rate(mut self, rate: RateLimit) -> Self {
        self.rate = Some(rate);
        self
    }
}

/// The limits of one budget level.
///
/// Validation (at [`ResourceBudgetTree::new`](crate::ResourceBudgetTree::new)
/// and [`ResourceBudget::child`](crate::ResourceBudget::child)): count and
/// bytes positive; a rate positive in both fields; a reserve no larger than
/// its capacity (and a rate reserve only with a rate); `max_age` not zero;
/// a child no larger than its parent in any dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BudgetLimit {
    /// The capacity.
    pub capacity: BudgetCapacity,
    /// Capacity only `BudgetClass::Control` may use.
    pub control_reserve: BudgetCapacity,
    /// Age after which queued work is stale (queues).
    pub max_age: Option<Duration>,
    /// What a full queue over this budget does.
    pub full_policy: FullPolicy,
}

impl BudgetLimit {
    /// A limit of `count` reservations and `bytes` bytes.
    pub const fn new(count: usize, bytes: usize, full_policy: FullPolicy) -> Self {
        Self {
            capacity: BudgetCapacity::new(count, bytes),
            control_reserve: BudgetCapacity::new(0, 0),
            max_age: None,
            full_policy,
        }
    }

    /// Adds a rate.
    #[must_use]
    pub const fn with_rate(mut self, rate: RateLimit) -> Self {
        self.capacity.rate = Some(rate);
        self
    }

    /// Keeps `reserve` for control work.
    #[must_use]
    pub const fn with_control_reserve(mut self, reserve: BudgetCapacity) -> Self {
        self.control_reserve = reserve;
        self
    }

    /// Sets the age after which queued work is stale.
    #[must_use]
    pub const fn with_max_age(mut self, max_age: Duration) -> Self {
        self.max_age = Some(max_age);
        self
    }

    /// Checks this limit on its own.
    pub(crate) fn validate(&self) -> Result<(), RuntimeContractViolation> {
        use BudgetDimension::{Bytes, Count, Rate};
        let capacity = &self.capacity;
        if capacity.count == 0 {
            return Err(RuntimeContractViolation::ZeroBudgetCapacity { dimension: Count });
        }
        if capacity.bytes == 0 {
            return Err(RuntimeContractViolation::ZeroBudgetCapacity { dimension: Bytes });
        }
        for rate in [capacity.rate, self.control_reserve.rate]
            .into_iter()
            .flatten()
        {
            if rate.permits_per_second == 0 || rate.burst == 0 {
                return Err(RuntimeContractViolation::ZeroBudgetRate);
            }
        }
        let reserve = &self.control_reserve;
        if reserve.count > capacity.count {
            return Err(RuntimeContractViolation::ReserveExceedsBudgetCapacity {
                dimension: Count,
            });
        }
        if reserve.bytes > capacity.bytes {
            return Err(RuntimeContractViolation::ReserveExceedsBudgetCapacity {
                dimension: Bytes,
            });
        }
        match (reserve.rate, capacity.rate) {
            (Some(_), None) => {
                return Err(RuntimeContractViolation::ReserveWithoutBudgetCapacity {
                    dimension: Rate,
                })
            }
            (Some(reserved), Some(rate)) if reserved.burst > rate.burst => {
                return Err(RuntimeContractViolation::ReserveExceedsBudgetCapacity {
                    dimension: Rate,
                })
            }
            _ => {}
        }
        if self.max_age.is_some_and(|age| age.is_zero()) {
            return Err(RuntimeContractViolation::ZeroBudgetMaxAge);
        }
        Ok(())
    }

    /// Checks that `self` (a child) fits inside `parent`.
    pub(crate) fn validate_within(
        &self,
        parent: &BudgetLimit,
    ) -> Result<(), RuntimeContractViolation> {
        use BudgetDimension::{Bytes, Count, Rate};
        self.validate()?;
        let exceeds =
            |dimension| Err(RuntimeContractViolation::ChildBudgetExceedsParent { dimension });
        if self.capacity.count > parent.capacity.count {
            return exceeds(Count);
        }
        if self.capacity.bytes > parent.capacity.bytes {
            return exceeds(Bytes);
        }
        match (self.capacity.rate, parent.capacity.rate) {
            (None, Some(_)) => return exceeds(Rate),
            (Some(child), Some(parent))
                if child.permits_per_second > parent.permits_per_second
                    || child.burst > parent.burst =>
            {
                return exceeds(Rate)
            }
            _ => {}
        }
        match (self.max_age, parent.max_age) {
            (None, Some(_)) => {
                return Err(RuntimeContractViolation::ChildBudgetMaxAgeExceedsParent)
            }
            (Some(child), Some(parent)) if child > parent => {
                return Err(RuntimeContractViolation::ChildBudgetMaxAgeExceedsParent)
            }
            _ => {}
        }
        Ok(())
    }
}

/// Counters of one budget level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetSnapshot {
    /// `root/child/...`.
    pub path: Arc<str>,
    /// Reservations held now.
    pub current_count: usize,
    /// Bytes held now.
    pub current_bytes: usize,
    /// Reservations ever admitted at this level (a reservation refused at
    /// a lower level or by a closed gate is undone and not counted; a
    /// snapshot taken while it is in flight may include it).
    pub admitted_count: u64,
    /// Reservations ever released at this level.
    pub released_count: u64,
    /// Capacity refusals of requests made on this level (whichever level
    /// ran out), plus those this level ran out for when the request came
    /// through a descendant. Levels in between do not count a refusal;
    /// closed-gate refusals are not counted.
    pub rejected_count: u64,
    /// Requests this level rejected for its rate.
    pub throttled_count: u64,
    /// Items queues over this budget dropped as stale.
    pub dropped_count: u64,
    /// Items queues over this budget replaced by newer ones.
    pub coalesced_count: u64,
    /// Times a queue over this budget closed a slow consumer.
    pub closed_slow_consumer_count: u64,
}

/// Why a reservation was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BudgetRejectionReason {
    /// A level ran out of this dimension.
    Capacity(BudgetDimension),
    /// The budget (a dynamic key or one of its ancestors) is closed.
    Closed,
}

/// A refused reservation: a normal outcome, not an error.
#[derive(Clone)]
pub struct BudgetRejection {
    /// The calling thread's copy of the path (`stripes.rs`): a refusal
    /// moves no reference count another core writes.
    pub(crate) path: std::sync::Arc<PathCopy>,
    /// `None` when the requested level itself refused (the common case: a
    /// refusal then costs one reference count, not two).
    pub(crate) exhausted_path: Option<std::sync::Arc<PathCopy>>,
    pub(crate) reason: BudgetRejectionReason,
    pub(crate) policy: FullPolicy,
}

impl BudgetRejection {
    /// The budget the request was made against.
    pub fn path(&self) -> &str {
        self.path.as_str()
    }

    /// The level that refused (the request's own budget or an ancestor).
    pub fn exhausted_path(&self) -> &str {
        self.exhausted_path
            .as_deref()
            .unwrap_or(&self.path)
            .as_str()
    }

    /// The exhausted dimension; `None` exactly when the budget is closed.
    pub const fn dimension(&self) -> Option<BudgetDimension> {
        match self.reason {
            BudgetRejectionReason::Capacity(dimension) => Some(dimension),
            BudgetRejectionReason::Closed => None,
        }
    }

    /// Why the request was refused.
    pub const fn reason(&self) -> BudgetRejectionReason {
        self.reason
    }

    /// True when the budget is closed.
    pub const fn is_closed(&self) -> bool {
        matches!(self.reason, BudgetRejectionReason::Closed)
    }

    /// The full policy of the requested budget.
    pub const fn policy(&self) -> FullPolicy {
        self.policy
    }
}

impl PartialEq for BudgetRejection {
    fn eq(&self, other: &Self) -> bool {
        self.path() == other.path()
            && self.exhausted_path() == other.exhausted_path()
            && self.reason == other.reason
            && self.policy == other.policy
    }
}

impl Eq for BudgetRejection {}

impl fmt::Debug for BudgetRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BudgetRejection")
            .field("path", &self.path())
            .field("exhausted_path", &self.exhausted_path())
            .field("reason", &self.reason)
            .field("policy", &self.policy)
            .finish()
    }
}

impl fmt::Display for BudgetRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            BudgetRejectionReason::Capacity(dimension) => write!(
                f,
                "budget {} rejected: {} exhausted at {}",
                self.path(),
                dimension,
                self.exhausted_path()
            ),
            BudgetRejectionReason::Closed => {
                write!(
                    f,
                    "budget {} rejected: closed at {}",
                    self.path(),
                    self.exhausted_path()
                )
            }
        }
    }
}

/// A rejection is a normal outcome, but it also works with `?`.
impl std::error::Error for BudgetRejection {}

/// The answer to [`ResourcePermit::try_rebind`](crate::ResourcePermit::try_rebind).
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a rejected rebind leaves the permit where it was: check the outcome"]
pub enum PermitRebindOutcome {
    /// The permit is now charged to the target.
    Rebound,
    /// The target is the permit's own budget.
    Unchanged,
    /// The target could not take the permit; it is unchanged.
    Rejected(BudgetRejection),
}

/// A monotonic clock for rate refill and queue ages (injectable in tests).
pub trait MonotonicClock: Send + Sync + 'static {
    /// Time since an arbitrary fixed origin.
    fn now(&self) -> Duration;
}

/// The default clock: Tokio's clock (so paused-time tests control it) when
/// called inside a runtime, measured from the clock's creation.
#[derive(Debug, Clone, Copy)]
pub struct SystemMonotonicClock {
    origin: std::time::Instant,
}

impl SystemMonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: tokio::time::Instant::now().into_std(),
        }
    }
}

impl Default for SystemMonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl MonotonicClock for SystemMonotonicClock {
    fn now(&self) -> Duration {
        tokio::time::Instant::now()
            .into_std()
            .saturating_duration_since(self.origin)
    }
}
