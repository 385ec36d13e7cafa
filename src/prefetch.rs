//! A cache prefetch hint, for scans that jump between separately allocated
//! blocks (the task tables' chunks, placed among the tasks' own
//! allocations, one page or more apart): the hardware prefetcher follows an
//! address stream within a page, so such a scan otherwise waits for memory
//! at every block. Hinting a block a few blocks ahead overlaps those waits
//! with the scan's work.
//!
//! This is the crate's one module that allows `unsafe`: stable Rust has no
//! safe wrapper for the x86-64 `prefetcht0` instruction, and a plain read
//! of the block ahead is no substitute (a load must complete before it
//! retires, so it stalls the scan instead of running beside it). The
//! instruction is a hint: it never faults and changes no memory or
//! register, so results never depend on it. On other architectures the
//! hint is a no-op.
#![allow(unsafe_code)]

/// Asks the CPU to start loading the memory of `value` into its caches.
#[inline]
pub(crate) fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        const LINE: usize = 64;
        let start = std::ptr::from_ref(value).cast::<i8>();
        for offset in (0..std::mem::size_of::<T>()).step_by(LINE) {
            // SAFETY: `prefetcht0` is a hint that never faults and changes
            // no memory or register; the address lies inside `value`, a live
            // reference; SSE is part of the x86-64 baseline.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}
