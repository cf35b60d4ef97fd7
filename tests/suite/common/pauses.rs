//! A managed broker paused with SIGSTOP while a run goes, and what a stall looks like in
//! its summary.

use std::time::Duration;

use super::*;

/// The managed broker's pid, from `brokerbench broker status FAMILY`.
pub fn broker_pid(family: &str) -> u32 {
    let output = brokerbench()
        .args(["broker", "status", family])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|pid| pid.parse().ok())
        .unwrap_or_else(|| panic!("no pid in `broker status {family}`: {text}"))
}

/// Runs `sets` with the family's broker paused (SIGSTOP) for `pause` once the run measured
/// 2 s; returns the run and when the pause began, seconds since the UNIX epoch.
pub fn run_through_a_pause_of(
    family: &'static str,
    pause: Duration,
    sets: &[String],
    extra: &[&str],
) -> (Run, f64) {
    let dir = tempfile::tempdir().unwrap();
    let folder = results_folder(dir.path());
    let pauser = std::thread::spawn(move || {
        let measuring = wait_for_measured_seconds(&folder, 2);
        let pid = broker_pid(family) as i32;
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        // SAFETY: kill(2) with a pid that `broker status` reported as the broker's.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        std::thread::sleep(pause);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
        (measuring, at)
    });
    let run = run_in(dir, &with_sets(sets, extra));
    let (measuring, at) = pauser.join().unwrap();
    assert!(measuring, "the run never measured 2 s");
    (run, at)
}

/// Runs `sets` with the family's broker paused (SIGSTOP) for 3 s once the run measured 2 s.
pub fn run_through_a_pause(family: &'static str, sets: &[String], extra: &[&str]) -> Run {
    run_through_a_pause_of(family, Duration::from_secs(3), sets, extra).0
}

pub fn assert_stalled_once(run: &Run) {
    let s = run.summary();
    assert_eq!(s["status"], "complete", "{s:#}");
    assert_eq!(s["integrity"]["lost"], 0, "{s:#}");
    assert_eq!(
        s["outages"],
        serde_json::json!([]),
        "connected throughout: {s:#}"
    );
    let stalls = s["stalls"].as_array().unwrap();
    assert_eq!(stalls.len(), 1, "{s:#}");
    let seconds = stalls[0]["seconds"].as_f64().unwrap();
    assert!(
        (2.0..=4.0 + run.late.as_secs_f64()).contains(&seconds),
        "{s:#}"
    );
    assert_not_client_bound(run, &s, "a stalled broker is not the client's fault");
    let notes = s["notes"].to_string();
    assert!(!notes.contains("CLIENT-BOUND"), "{:#}", s["notes"]);
    // The acknowledgements late after the pause are the stall's: no second cause for them.
    // A slow second later on is the broker's own (a busy host's RabbitMQ had one at 9 s, 132
    // ms, after a stall at 4 s for 2 s): the note may name that, not the stall's seconds
    // nor the two after them, which the engine leaves to the stall's note (RECOVERY_SECONDS):
    // a stall at 4 s for 2 s owns seconds 4 to 7, and a slow second 8 is the broker's own.
    let start = stalls[0]["start_s"].as_f64().unwrap();
    let recovered = start + seconds + 2.0;
    for slow in slow_starts(&notes) {
        assert!(
            !(start..recovered).contains(&slow),
            "a slowdown at {slow} s is the stall's: {:#}",
            s["notes"]
        );
    }
}

/// Where each slowdown the BROKER SLOW note names starts, seconds into the run.
pub fn slow_starts(notes: &str) -> Vec<f64> {
    let Some(note) = notes.split("BROKER SLOW ").nth(1) else {
        return Vec::new();
    };
    let spans = note.split(':').next().unwrap_or_default();
    spans
        .split("at ")
        .filter_map(|span| span.split(" s for ").next()?.trim().parse().ok())
        .collect()
}
