//! Counting heap allocations, to answer "what does producing cost my service" in allocations
//! per message. The allocator is always installed; it counts only while enabled (one relaxed
//! atomic load per allocation otherwise). Allocations made by librdkafka's C code go through
//! malloc directly and are not counted: the figure is brokerbench's own Rust code path.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use brokerbench_model::{IntervalRow, Phase, RunObserver};

static ENABLED: AtomicBool = AtomicBool::new(false);
static COUNT: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting allocations (including reallocations) while enabled.
pub struct CountingAllocator;

// SAFETY: every call is forwarded unchanged to the system allocator.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[inline]
fn count() {
    if ENABLED.load(Ordering::Relaxed) {
        COUNT.fetch_add(1, Ordering::Relaxed);
    }
}

/// Starts counting.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Allocations counted so far.
pub fn allocations() -> u64 {
    COUNT.load(Ordering::Relaxed)
}

/// Notes the allocation count when the measurement window opens and closes.
#[derive(Debug, Default)]
pub struct AllocationWindow {
    start: Option<u64>,
    end: Option<u64>,
}

impl AllocationWindow {
    /// Allocations per message over the window, if it opened and closed.
    pub fn per_message(&self, messages: u64) -> Option<f64> {
        match (self.start, self.end) {
            (Some(start), Some(end)) if messages > 0 => {
                Some((end - start) as f64 / messages as f64)
            }
            _ => None,
        }
    }
}

impl RunObserver for AllocationWindow {
    fn phase_started(&mut self, phase: Phase, _at_ns: u64) {
        match phase {
            Phase::Measurement => self.start = Some(allocations()),
            Phase::Drain => self.end = Some(allocations()),
            Phase::Warmup => {}
        }
    }
    fn interval(&mut self, _row: &IntervalRow) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    // The binary installs the allocator in main.rs; this test binary needs its own.
    #[global_allocator]
    static ALLOCATOR: CountingAllocator = CountingAllocator;

    #[test]
    fn counts_allocations_in_the_window() {
        enable();
        let mut window = AllocationWindow::default();
        window.phase_started(Phase::Measurement, 0);
        let boxes: Vec<Box<u64>> = (0..1000).map(Box::new).collect();
        window.phase_started(Phase::Drain, 0);
        drop(boxes);
        // 1000 boxes and the vector; other test threads may allocate too.
        let per = window.per_message(1000).unwrap();
        assert!(per >= 1.0, "{per}");
        assert_eq!(AllocationWindow::default().per_message(10), None);
    }
}
