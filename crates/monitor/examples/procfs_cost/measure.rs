//! Measuring a variant: heap allocations counted by a global allocator, the thread's CPU
//! time, and per-sample figures of one round with their medians.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use brokerbench_monitor::Sample;

/// Counts heap allocations (alloc, alloc_zeroed, realloc) and the bytes asked for.
struct CountingAllocator;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED_BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; counting has no effect
// on the memory handed out.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// CPU time of this thread, user + system, ns.
fn thread_cpu_ns() -> u64 {
    // SAFETY: timespec is plain data that clock_gettime fills in.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: a valid clock id and a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// User and system CPU time of this thread, µs (tick-sampled split of the total).
fn thread_user_system_us() -> (f64, f64) {
    // SAFETY: rusage is plain data that getrusage fills in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    (us(usage.ru_utime), us(usage.ru_stime))
}

/// Per-sample figures of one round of one variant.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Round {
    pub(super) wall_mean_us: f64,
    pub(super) wall_median_us: f64,
    pub(super) cpu_us: f64,
    pub(super) user_us: f64,
    pub(super) system_us: f64,
    pub(super) allocations: f64,
    pub(super) allocated_bytes: f64,
}

pub(super) fn measure(
    samples: usize,
    walls: &mut Vec<f64>,
    mut sample: impl FnMut() -> Sample,
) -> Round {
    walls.clear();
    let (user_before, system_before) = thread_user_system_us();
    let cpu_before = thread_cpu_ns();
    let allocations_before = ALLOCATIONS.load(Ordering::Relaxed);
    let bytes_before = ALLOCATED_BYTES.load(Ordering::Relaxed);
    let started = Instant::now();
    for _ in 0..samples {
        let t = Instant::now();
        black_box(sample());
        walls.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let wall_total_us = started.elapsed().as_secs_f64() * 1e6;
    let allocations = ALLOCATIONS.load(Ordering::Relaxed) - allocations_before;
    let bytes = ALLOCATED_BYTES.load(Ordering::Relaxed) - bytes_before;
    let cpu_ns = thread_cpu_ns() - cpu_before;
    let (user_after, system_after) = thread_user_system_us();
    let n = samples as f64;
    Round {
        wall_mean_us: wall_total_us / n,
        wall_median_us: median(walls),
        cpu_us: cpu_ns as f64 / 1e3 / n,
        user_us: (user_after - user_before) / n,
        system_us: (system_after - system_before) / n,
        allocations: allocations as f64 / n,
        allocated_bytes: bytes as f64 / n,
    }
}

/// One figure of a [`Round`].
pub(super) type RoundField = fn(&Round) -> f64;

pub(super) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}
