//! Checks the tests of the managed brokers share.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::{managed, process, BrokerError, BrokerStatus, ManagedBroker};

/// What the shared checks need of a managed broker beyond its lifecycle.
pub trait Managed: ManagedBroker {
    /// The pid file `up` writes and `down` removes.
    fn pid_file(&self) -> PathBuf;
}

/// Stops the broker even when an assertion fails, so no broker outlives its deleted home.
pub struct DownOnDrop<'a>(pub &'a dyn Managed);

impl Drop for DownOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.down();
    }
}

/// A broker's port variable: unset or empty means `default`; `last` is the highest port
/// `valid` takes, as does `port_from_variable`.
pub fn assert_port_variable(default: u16, valid: RangeInclusive<u16>, last: u16) {
    let port = |value: &str| {
        managed::port_from_variable(Some(OsString::from(value)), default, valid.clone())
    };
    assert_eq!(port(""), (default, None));
    assert_eq!(port(&format!(" {last} ")), (last, None));
    for bad in [
        "0".to_string(),
        (u32::from(last) + 1).to_string(),
        "x".into(),
    ] {
        assert_eq!(port(&bad), (default, Some(bad.clone())), "{bad}");
    }
}

/// The `key<separator>value` lines of a configuration file, without comments and blank lines,
/// after checking that they hold `expected`.
pub fn assert_settings<'a>(
    text: &'a str,
    separator: &str,
    expected: &[(&str, &str)],
) -> HashMap<&'a str, &'a str> {
    let settings: HashMap<&str, &str> = text
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| line.split_once(separator).expect(line))
        .collect();
    for (key, value) in expected {
        assert_eq!(settings.get(key), Some(value), "{key} in\n{text}");
    }
    settings
}

/// What `/proc/PID/cmdline` holds for a process with these arguments.
pub fn cmdline<'a>(arguments: impl IntoIterator<Item = &'a OsStr>) -> Vec<u8> {
    arguments
        .into_iter()
        .flat_map(|argument| argument.as_encoded_bytes().iter().copied().chain([0]))
        .collect()
}

/// `up` starts the broker (it was not running); says how long that took, as `what`.
pub fn assert_starts(broker: &dyn Managed, what: &str) -> BrokerStatus {
    let started = Instant::now();
    let (status, already_running) = broker.up().expect(what);
    eprintln!("{what}: {:?}", started.elapsed());
    assert!(!already_running);
    status
}

/// Another `up` finds the running broker and reports it as before.
pub fn assert_still_running(broker: &dyn Managed, status: &BrokerStatus) {
    let started = Instant::now();
    let (again, already_running) = broker.up().expect("second up");
    eprintln!("up (already running): {:?}", started.elapsed());
    assert!(already_running);
    assert_eq!(&again, status);
}

/// `down` stops the broker `up` reported and leaves nothing to stop, and its log says it shut
/// down cleanly (`clean_shutdown` is in it). Returns the log.
pub fn assert_stops(broker: &dyn Managed, status: &BrokerStatus, clean_shutdown: &str) -> String {
    let started = Instant::now();
    assert_eq!(broker.down().expect("down"), Some(status.pid));
    eprintln!("down: {:?}", started.elapsed());
    assert!(!process::is_alive(status.pid));
    assert!(!broker.pid_file().exists());
    assert_eq!(broker.status().unwrap(), None);
    assert_eq!(broker.down().unwrap(), None);
    let log = fs::read_to_string(&status.log_file).unwrap();
    assert!(log.contains(clean_shutdown), "clean shutdown in {log}");
    log
}

/// `up` of a broker that cannot start fails within `limit` with [`BrokerError::StartFailed`]
/// and leaves no pid file. Returns the message.
pub fn assert_start_fails(broker: &dyn Managed, limit: Duration) -> String {
    let started = Instant::now();
    let error = broker.up().unwrap_err();
    let message = error.to_string();
    eprintln!(
        "failed start after {:?}, reported as:\n{message}",
        started.elapsed()
    );
    assert!(
        matches!(error, BrokerError::StartFailed { .. }),
        "{message}"
    );
    assert!(started.elapsed() < limit, "{message}");
    assert!(!broker.pid_file().exists());
    message
}

/// A base port `p` such that `p + offset` is free on 127.0.0.1 for every offset, outside the
/// kernel's ephemeral range (see [`crate::free_ports`]), for a test broker that listens on
/// several ports laid out around one: chosen at random, so tests do not collide with fixed
/// ports other programs use, and no outgoing connection takes one before the broker binds it.
pub fn free_port_layout(offsets: &[u16]) -> u16 {
    crate::free_ports::free_layout(offsets, &[]).expect("a free layout of ports")
}
