//! A global allocator that counts the heap bytes one thread leaves
//! allocated, for tests and benches that state allocation costs.
//!
//! Shared by `tests/operation_memory.rs` and `benches/runtime_convergence_bench.rs`
//! (included with `#[path]`). Test and bench code only: the library itself
//! has no `unsafe`.
#![allow(unsafe_code, dead_code, unreachable_pub)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Forwards to the system allocator and counts, per thread, the net bytes
/// allocated while counting is on.
#[derive(Debug)]
pub struct CountingAllocator;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static NET_BYTES: Cell<isize> = const { Cell::new(0) };
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn record(delta: isize) {
    let _ = COUNTING.try_with(|counting| {
        if counting.get() {
            let _ = NET_BYTES.try_with(|net| net.set(net.get() + delta));
            if delta > 0 {
                let _ = ALLOCATIONS.try_with(|count| count.set(count.get() + 1));
            }
        }
    });
}

/// Allocations made on this thread since [`start_counting`].
pub fn allocations() -> usize {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// bookkeeping only touches const-initialised thread-locals (no allocation).
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        record(layout.size() as isize);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        record(-(layout.size() as isize));
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Starts counting this thread's allocations from zero.
pub fn start_counting() {
    NET_BYTES.with(|net| net.set(0));
    ALLOCATIONS.with(|count| count.set(0));
    COUNTING.with(|counting| counting.set(true));
}

/// Stops counting; the net bytes allocated since [`start_counting`].
pub fn stop_counting() -> isize {
    COUNTING.with(|counting| counting.set(false));
    NET_BYTES.with(Cell::get)
}

/// Net heap bytes that `make` leaves allocated on this thread (the value
/// it returns is still alive).
pub fn retained_by<T>(make: impl FnOnce() -> T) -> (T, isize) {
    start_counting();
    let value = make();
    (value, stop_counting())
}
