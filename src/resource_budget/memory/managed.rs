//! The managed (chargeable) memory budget derived from the effective limit:
//! the request, the policy that validates it, and the resolved numbers.

use super::{fraction_of, memory_violation, ProcessMemoryLimit};
use crate::error::{RuntimeContractPolicy, RuntimeContractViolation};

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

#[cfg(all(test, not(loom)))]
mod tests;
