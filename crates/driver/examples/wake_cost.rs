//! What one wake-up costs on this host: a thread that sleeps and wakes and does nothing else,
//! the way a producer on a fixed-rate schedule sleeps between sends (the same precise sleep).
//! Its CPU per wake-up (user and system, from the kernel's account of this thread) is the part
//! of a client's cost at a fixed rate that comes from pacing alone: a schedule that wakes W
//! times a second at a rate of R msg/s pays W / R wake-ups per message.
//!
//! Usage: wake_cost [SLEEP_US] [SECONDS]   (defaults: 100 µs, 5 s; SLEEP_US at least 1)
//! Prints one line, for example: `sleep=100us elapsed_s=5.0 wakes=32575 wakes_per_s=6515
//! took_us=153.5 cpu_us_per_wake=31.7 user_us_per_wake=4.6 system_us_per_wake=27.1`.

use std::time::{Duration, Instant};

use brokerbench_driver::set_precise_sleep;

fn main() {
    let (sleep, seconds) = match arguments() {
        Ok(parsed) => parsed,
        Err(message) => {
            eprintln!("wake_cost: {message}\nusage: wake_cost [SLEEP_US] [SECONDS]");
            std::process::exit(2);
        }
    };
    set_precise_sleep();
    let before = thread_cpu();
    let started = Instant::now();
    let mut wakes = 0u64;
    while started.elapsed() < seconds {
        std::thread::sleep(sleep);
        wakes += 1;
    }
    let elapsed = started.elapsed();
    let (user, system) = thread_cpu();
    report(sleep, elapsed, wakes, (user - before.0, system - before.1));
}

fn arguments() -> Result<(Duration, Duration), String> {
    let mut args = std::env::args().skip(1);
    let mut number = |name: &str, default: u64| -> Result<u64, String> {
        match args.next() {
            None => Ok(default),
            Some(text) => text
                .parse()
                .map_err(|_| format!("{name} must be a whole number, not '{text}'")),
        }
    };
    let sleep_us = number("SLEEP_US", 100)?;
    let seconds = number("SECONDS", 5)?;
    if let Some(extra) = args.next() {
        return Err(format!("unexpected argument '{extra}'"));
    }
    if sleep_us == 0 || seconds == 0 {
        return Err("SLEEP_US and SECONDS must be at least 1 (a sleep of 0 does not sleep)".into());
    }
    Ok((
        Duration::from_micros(sleep_us),
        Duration::from_secs(seconds),
    ))
}

/// This thread's user and system CPU so far, in µs.
fn thread_cpu() -> (f64, f64) {
    // SAFETY: an all-zero rusage is valid, and getrusage fills the one it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD asks about the calling thread; `usage` lives for the call.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let micros = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    (micros(usage.ru_utime), micros(usage.ru_stime))
}

fn report(sleep: Duration, elapsed: Duration, wakes: u64, (user, system): (f64, f64)) {
    let per = |us: f64| us / wakes.max(1) as f64;
    println!(
        "sleep={}us elapsed_s={:.1} wakes={wakes} wakes_per_s={:.0} took_us={:.1} \
         cpu_us_per_wake={:.1} user_us_per_wake={:.1} system_us_per_wake={:.1}",
        sleep.as_micros(),
        elapsed.as_secs_f64(),
        wakes as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e6 / wakes.max(1) as f64,
        per(user + system),
        per(user),
        per(system),
    );
}
