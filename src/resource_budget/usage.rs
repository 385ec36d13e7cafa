//! A level's current count and bytes, and how many reservations it
//! admitted and released.
//!
//! Invariants:
//!
//! 1. When both limits' bit widths sum to at most 64, count and bytes live in
//!    one `AtomicU64` (count in the middle bits, bytes in the low bits): a
//!    reservation is one bounded compare-and-swap, the two dimensions can
//!    never be observed out of step, and a rollback is one subtraction that
//!    never borrows across fields.
//! 2. Otherwise (for example the process budget, whose count is unbounded)
//!    each dimension has its own atomic: a reservation takes count first,
//!    then bytes, giving the count back when the bytes do not fit.
//! 3. Either way no dimension ever exceeds its limit and a refusal leaves the
//!    level, its statistics included, unchanged (loom-modelled in both
//!    representations).
//! 4. When at least [`MIN_RELEASE_BITS`] bits are left above count and bytes,
//!    they count releases: a release is one compare-and-swap that lowers count
//!    and bytes and raises that counter, and admitted = released + current, so
//!    no statistics counter moves per permit. Narrower words and split levels
//!    keep an `admitted` counter instead.
//! 5. A release that would wrap the in-word counter moves it into `carried`
//!    under a lock (at most once every 2^bits releases); a snapshot reads
//!    `carried` and the word under the same lock, so it never sees a release
//!    twice or not at all, nor more released than admitted (loom model with a
//!    one-bit counter).
//! 6. A rollback (`undo`) counts as neither an admission nor a release.
//! 7. Every usage access is `SeqCst` (free on x86: the read-modify-writes are
//!    locked instructions and loads plain moves): a waiting producer arms the
//!    tree's release wake-up and then reads the usage, a releaser lowers the
//!    usage and then reads the flag, and only a single total order over those
//!    four accesses guarantees that one of them sees the other.
//! 8. A `Usage` sits on cache lines of its own: the producers' and the
//!    consumers' cores both write it, and sharing a line with the level's
//!    read-mostly fields would make every reservation miss on those too.

use crate::loom::{AtomicU64, AtomicUsize, Mutex, Ordering, StatCounter};
use crate::resource_budget::types::BudgetDimension;

/// The narrowest release counter kept in the usage word: it wraps into
/// the locked `carried` total at most once every 64 releases.
pub(crate) const MIN_RELEASE_BITS: u32 = 6;

/// Bits needed to represent `value`.
fn bits(value: usize) -> u32 {
    usize::BITS - value.leading_zeros()
}

/// Aligned to its own cache lines (two, for the adjacent-line prefetch):
/// every reservation and release writes it, on whichever core runs them,
/// while the level's read-mostly fields (limit, parent, gate) are read by
/// every reservation (invariant 8).
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct Usage {
    repr: Repr,
    /// Admissions, kept only when the word has no release counter.
    admitted: StatCounter,
}

#[derive(Debug)]
enum Repr {
    /// `released << release_shift | count << bytes_bits | bytes`, the
    /// release counter only when `counts_releases`.
    Packed {
        word: AtomicU64,
        bytes_bits: u32,
        /// `bits(count limit) + bytes_bits`.
        release_shift: u32,
        counts_releases: bool,
        /// Releases moved out of the word's counter when it would wrap.
        carried: Mutex<u64>,
    },
    Split {
        count: AtomicUsize,
        bytes: AtomicUsize,
    },
}

/// A packed word that counts releases, borrowed.
struct ReleaseCounting<'a> {
    word: &'a AtomicU64,
    bytes_bits: u32,
    release_shift: u32,
    carried: &'a Mutex<u64>,
}

/// A consistent reading of one level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UsageCounts {
    pub(crate) count: usize,
    pub(crate) bytes: usize,
    pub(crate) admitted: u64,
    pub(crate) released: u64,
}

impl Usage {
    /// Usage bounded by `count_limit` and `bytes_limit`.
    pub(crate) fn new(count_limit: usize, bytes_limit: usize) -> Self {
        Self::with_min_release_bits(count_limit, bytes_limit, MIN_RELEASE_BITS)
    }

    /// [`new`](Self::new) with the release counter kept in the word when
    /// at least `min_release_bits` (≥ 1) are left for it.
    pub(crate) fn with_min_release_bits(
        count_limit: usize,
        bytes_limit: usize,
        min_release_bits: u32,
    ) -> Self {
        let bytes_bits = bits(bytes_limit);
        let release_shift = bits(count_limit) + bytes_bits;
        let repr = if release_shift <= u64::BITS {
            Repr::Packed {
                word: AtomicU64::new(0),
                bytes_bits,
                release_shift,
                counts_releases: release_shift + min_release_bits.max(1) <= u64::BITS,
                carried: Mutex::new(0),
            }
        } else {
            Repr::Split {
                count: AtomicUsize::new(0),
                bytes: AtomicUsize::new(0),
            }
        };
        Self {
            repr,
            admitted: StatCounter::new(0),
        }
    }

    /// Whether releases are counted in the usage word (no statistics
    /// counter is touched per admission or release).
    #[cfg(test)]
    pub(crate) fn counts_releases_in_word(&self) -> bool {
        self.counts_in_word()
    }

    /// The packed word's parts, when it counts releases.
    #[inline]
    fn release_counting(&self) -> Option<ReleaseCounting<'_>> {
        match &self.repr {
            Repr::Packed {
                word,
                bytes_bits,
                release_shift,
                counts_releases: true,
                carried,
            } => Some(ReleaseCounting {
                word,
                bytes_bits: *bytes_bits,
                release_shift: *release_shift,
                carried,
            }),
            _ => None,
        }
    }

    /// Adds `count` and `bytes` unless either passes its limit; on refusal
    /// nothing changed and the first exhausted dimension (count first) is
    /// returned. Statistics are the caller's: see
    /// [`admitted`](Self::admitted).
    #[inline]
    pub(crate) fn try_add(
        &self,
        count: usize,
        bytes: usize,
        count_limit: usize,
        bytes_limit: usize,
    ) -> Result<(), BudgetDimension> {
        match &self.repr {
            Repr::Packed {
                word,
                bytes_bits,
                release_shift,
                ..
            } => {
                let shift = *bytes_bits;
                let mut current = word.load(Ordering::SeqCst);
                loop {
                    let (used_count, used_bytes) = unpack(current, shift, *release_shift);
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
            Repr::Split {
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

    /// Counts `count` admissions made with [`try_add`](Self::try_add)
    /// (nothing to do when the word counts releases).
    #[inline]
    pub(crate) fn admitted(&self, count: usize) {
        if count > 0 && !self.counts_in_word() {
            self.admitted.fetch_add(count as u64, Ordering::Relaxed);
        }
    }

    /// Takes back what `try_add` and `admitted` did, for a reservation
    /// that is rolled back rather than released: the statistics end as if
    /// it never happened.
    #[inline]
    pub(crate) fn undo(&self, count: usize, bytes: usize) {
        // The counter first: a snapshot in between never shows the undone
        // reservation as released.
        if count > 0 && !self.counts_in_word() {
            self.admitted.fetch_sub(count as u64, Ordering::Relaxed);
        }
        self.sub(count, bytes);
    }

    /// Gives back what an earlier `try_add` took, without statistics (the
    /// data-class share, and failed reservations before they counted).
    #[inline]
    pub(crate) fn sub(&self, count: usize, bytes: usize) {
        match &self.repr {
            Repr::Packed {
                word, bytes_bits, ..
            } => {
                word.fetch_sub(pack(count, bytes, *bytes_bits), Ordering::SeqCst);
            }
            Repr::Split {
                count: used_count,
                bytes: used_bytes,
            } => {
                used_count.fetch_sub(count, Ordering::SeqCst);
                used_bytes.fetch_sub(bytes, Ordering::SeqCst);
            }
        }
    }

    /// Releases `count` admitted reservations holding `bytes` together.
    #[inline]
    pub(crate) fn release(&self, count: usize, bytes: usize) {
        let Some(ReleaseCounting {
            word,
            bytes_bits,
            release_shift: shift,
            carried,
        }) = self.release_counting()
        else {
            self.sub(count, bytes);
            return;
        };
        let released_limit = low_mask(u64::BITS - shift);
        let delta = pack(count, bytes, bytes_bits);
        let mut current = word.load(Ordering::SeqCst);
        loop {
            let released = current >> shift;
            if count as u64 > released_limit - released {
                break;
            }
            // Count and bytes hold at least what is released: no borrow
            // crosses a field.
            let next = current - delta + ((count as u64) << shift);
            match word.compare_exchange_weak(current, next, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(_) => return,
                Err(seen) => current = seen,
            }
        }
        release_carrying(word, carried, shift, delta, count);
    }

    #[inline]
    fn counts_in_word(&self) -> bool {
        self.release_counting().is_some()
    }

    /// The current (count, bytes).
    pub(crate) fn load(&self) -> (usize, usize) {
        match &self.repr {
            Repr::Packed {
                word,
                bytes_bits,
                release_shift,
                ..
            } => unpack(word.load(Ordering::SeqCst), *bytes_bits, *release_shift),
            Repr::Split { count, bytes } => {
                (count.load(Ordering::SeqCst), bytes.load(Ordering::SeqCst))
            }
        }
    }

    /// Current use and the admission and release totals, read together.
    pub(crate) fn counts(&self) -> UsageCounts {
        if let Some(ReleaseCounting {
            word,
            bytes_bits,
            release_shift,
            carried,
        }) = self.release_counting()
        {
            let carried = carried.lock();
            let current = word.load(Ordering::SeqCst);
            let (count, bytes) = unpack(current, bytes_bits, release_shift);
            let released = *carried + (current >> release_shift);
            return UsageCounts {
                count,
                bytes,
                admitted: released + count as u64,
                released,
            };
        }
        // Read the use first, then the counter. `released = admitted −
        // current` saturates: the use may include a reservation whose
        // admission is not counted yet (or whose undo has lowered the
        // counter but not yet the use).
        let (count, bytes) = self.load();
        let admitted = self.admitted.load(Ordering::Relaxed);
        UsageCounts {
            count,
            bytes,
            admitted,
            released: admitted.saturating_sub(count as u64),
        }
    }
}

/// [`Usage::release`] when the word's release counter would wrap: moves
/// the counter into `carried`, atomically for a snapshot (which reads both
/// under the same lock).
#[cold]
#[inline(never)]
fn release_carrying(word: &AtomicU64, carried: &Mutex<u64>, shift: u32, delta: u64, count: usize) {
    let mut carried = carried.lock();
    let mut current = word.load(Ordering::SeqCst);
    loop {
        let next = (current & low_mask(shift)) - delta;
        match word.compare_exchange_weak(current, next, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => {
                *carried += (current >> shift) + count as u64;
                return;
            }
            Err(seen) => current = seen,
        }
    }
}

/// (count, bytes) of a packed word.
#[inline]
fn unpack(word: u64, bytes_bits: u32, release_shift: u32) -> (usize, usize) {
    (
        high(word & low_mask(release_shift), bytes_bits),
        (word & low_mask(bytes_bits)) as usize,
    )
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
mod tests;
