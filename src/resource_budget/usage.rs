//! A level's current count and bytes.
//!
//! When both limits fit one 64-bit word together (count in the high bits,
//! bytes in the low bits), the pair lives in one atomic: a reservation is
//! one compare-and-swap and a release one subtraction, and the two
//! dimensions can never be observed out of step. Otherwise (for example the
//! process budget, whose count is unbounded) each dimension has its own
//! atomic and a reservation takes count first, then bytes, giving the count
//! back when the bytes do not fit. Either way no dimension ever exceeds its
//! limit and a refusal leaves the level unchanged.
//!
//! Every access is `SeqCst` (free on x86: the read-modify-writes are locked
//! instructions and loads plain moves): a waiting producer raises the
//! tree's release watchers and then reads the usage, a releaser lowers the
//! usage and then reads the watchers, and only a single total order over
//! those four accesses guarantees that one of them sees the other.

use crate::loom::{AtomicU64, AtomicUsize, Ordering};
use crate::resource_budget::types::BudgetDimension;

/// Bits needed to represent `value`.
fn bits(value: usize) -> u32 {
    usize::BITS - value.leading_zeros()
}

#[derive(Debug)]
pub(crate) enum Usage {
    /// `count << bytes_bits | bytes`.
    Packed { word: AtomicU64, bytes_bits: u32 },
    Split {
        count: AtomicUsize,
        bytes: AtomicUsize,
    },
}

impl Usage {
    /// Usage bounded by `count_limit` and `bytes_limit`.
    pub(crate) fn new(count_limit: usize, bytes_limit: usize) -> Self {
        let bytes_bits = bits(bytes_limit);
        if bits(count_limit) + bytes_bits <= u64::BITS {
            Self::Packed {
                word: AtomicU64::new(0),
                bytes_bits,
            }
        } else {
            Self::Split {
                count: AtomicUsize::new(0),
                bytes: AtomicUsize::new(0),
            }
        }
    }

    /// Adds `count` and `bytes` unless either passes its limit; on refusal
    /// nothing changed and the first exhausted dimension (count first) is
    /// returned.
    #[inline]
    pub(crate) fn try_add(
        &self,
        count: usize,
        bytes: usize,
        count_limit: usize,
        bytes_limit: usize,
    ) -> Result<(), BudgetDimension> {
        match self {
            Self::Packed { word, bytes_bits } => {
                let shift = *bytes_bits;
                let mask = low_mask(shift);
                let mut current = word.load(Ordering::SeqCst);
                loop {
                    let used_count = high(current, shift);
                    let used_bytes = (current & mask) as usize;
                    if count > count_limit - used_count {
                        return Err(BudgetDimension::Count);
                    }
                    if bytes > bytes_limit - used_bytes {
                        return Err(BudgetDimension::Bytes);
                    }
                    let next = current + pack(count, bytes, shift);
                    match word.compare_exchange_weak(
                        current,
                        next,
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    ) {
                        Ok(_) => return Ok(()),
                        Err(seen) => current = seen,
                    }
                }
            }
            Self::Split {
                count: used_count,
                bytes: used_bytes,
            } => {
                if !bounded_add(used_count, count, count_limit) {
                    return Err(BudgetDimension::Count);
                }
                if !bounded_add(used_bytes, bytes, bytes_limit) {
                    used_count.fetch_sub(count, Ordering::SeqCst);
                    return Err(BudgetDimension::Bytes);
                }
                Ok(())
            }
        }
    }

    /// Gives back what an earlier `try_add` took.
    #[inline]
    pub(crate) fn sub(&self, count: usize, bytes: usize) {
        match self {
            Self::Packed { word, bytes_bits } => {
                word.fetch_sub(pack(count, bytes, *bytes_bits), Ordering::SeqCst);
            }
            Self::Split {
                count: used_count,
                bytes: used_bytes,
            } => {
                used_count.fetch_sub(count, Ordering::SeqCst);
                used_bytes.fetch_sub(bytes, Ordering::SeqCst);
            }
        }
    }

    /// The current (count, bytes).
    pub(crate) fn load(&self) -> (usize, usize) {
        match self {
            Self::Packed { word, bytes_bits } => {
                let current = word.load(Ordering::SeqCst);
                (
                    high(current, *bytes_bits),
                    (current & low_mask(*bytes_bits)) as usize,
                )
            }
            Self::Split { count, bytes } => {
                (count.load(Ordering::SeqCst), bytes.load(Ordering::SeqCst))
            }
        }
    }
}

#[inline]
fn low_mask(bits: u32) -> u64 {
    u64::MAX.checked_shr(u64::BITS - bits).unwrap_or(0)
}

#[inline]
fn high(word: u64, shift: u32) -> usize {
    word.checked_shr(shift).unwrap_or(0) as usize
}

/// `count` and `bytes` within their limits always pack (see `new`).
#[inline]
fn pack(count: usize, bytes: usize, shift: u32) -> u64 {
    (count as u64).checked_shl(shift).unwrap_or(0) | bytes as u64
}

/// Raises `counter` by `amount` unless that passes `limit`.
fn bounded_add(counter: &AtomicUsize, amount: usize, limit: usize) -> bool {
    let mut current = counter.load(Ordering::SeqCst);
    loop {
        let Some(next) = current.checked_add(amount).filter(|next| *next <= limit) else {
            return false;
        };
        match counter.compare_exchange_weak(current, next, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return true,
            Err(seen) => current = seen,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn packed_and_split_enforce_both_limits() {
        for usage in [Usage::new(3, 100), Usage::new(usize::MAX, 100)] {
            let (count_limit, bytes_limit) = match usage {
                Usage::Packed { .. } => (3, 100),
                Usage::Split { .. } => (usize::MAX, 100),
            };
            assert_eq!(usage.try_add(1, 60, count_limit, bytes_limit), Ok(()));
            assert_eq!(
                usage.try_add(1, 41, count_limit, bytes_limit),
                Err(BudgetDimension::Bytes)
            );
            assert_eq!(usage.load(), (1, 60), "a refusal changes nothing");
            assert_eq!(usage.try_add(1, 40, count_limit, bytes_limit), Ok(()));
            usage.sub(1, 60);
            assert_eq!(usage.load(), (1, 40));
            usage.sub(1, 40);
            assert_eq!(usage.load(), (0, 0));
        }
        let packed = Usage::new(3, 100);
        assert!(matches!(packed, Usage::Packed { .. }));
        for _ in 0..3 {
            packed.try_add(1, 0, 3, 100).expect("room");
        }
        assert_eq!(packed.try_add(1, 0, 3, 100), Err(BudgetDimension::Count));
        assert!(matches!(Usage::new(usize::MAX, 1), Usage::Split { .. }));
    }

    #[test]
    fn full_width_limits_pack_without_overflow() {
        // 24 + 40 bits: both fields at their maximum.
        let count_limit = (1 << 24) - 1;
        let bytes_limit = (1 << 40) - 1;
        let usage = Usage::new(count_limit, bytes_limit);
        assert!(matches!(usage, Usage::Packed { .. }));
        usage
            .try_add(count_limit, bytes_limit, count_limit, bytes_limit)
            .expect("exactly full");
        assert_eq!(usage.load(), (count_limit, bytes_limit));
        assert_eq!(
            usage.try_add(0, 1, count_limit, bytes_limit),
            Err(BudgetDimension::Bytes)
        );
        usage.sub(count_limit, bytes_limit);
        assert_eq!(usage.load(), (0, 0));
        // Zero limits: zero bits.
        let empty = Usage::new(0, 0);
        assert_eq!(empty.try_add(0, 0, 0, 0), Ok(()));
        assert_eq!(empty.try_add(1, 0, 0, 0), Err(BudgetDimension::Count));
    }
}
