//! What the managed brokers have in common beyond process plumbing: the port variable, the
//! broker folder and its lock, `down`, and polling until the broker answers.

use std::ffi::OsString;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::process::{self, Lock};
use crate::BrokerError;

/// A managed broker's client port setting: the variable that names it, its default, the
/// highest usable port with the reason (the broker listens on ports above it too), and the
/// ports its first node listens on.
#[derive(Debug, Clone, Copy)]
pub struct PortRule {
    pub broker: &'static str,
    /// e.g. `BROKERBENCH_KAFKA_PORT`.
    pub variable: &'static str,
    pub default: u16,
    pub max: u16,
    /// Why ports above `max` do not work.
    pub why: &'static str,
    /// The ports node 1 listens on at and above the client port (with `--tls` too), as offsets
    /// from it, 0 first: what a port setting must find free (the tests choose theirs by it).
    pub offsets: &'static [u16],
}

/// A port setting as read once, when the managed broker's handle is made: the port (the
/// default when the variable names no usable port) and the variable's text in that case.
#[derive(Debug, Clone)]
pub struct PortSetting {
    rule: PortRule,
    port: u16,
    invalid: Option<String>,
}

impl PortSetting {
    /// The port to use, refused as [`PortRule::check`] does.
    pub fn checked(&self) -> Result<u16, BrokerError> {
        self.rule.check(self.port, self.invalid.as_deref())?;
        Ok(self.port)
    }

    /// The port the setting names, or the default when it names none usable: for what is
    /// shown of a broker that runs already.
    pub fn or_default(&self) -> u16 {
        self.port
    }

    pub fn rule(&self) -> &PortRule {
        &self.rule
    }
}

impl PortRule {
    /// The rule of a broker whose node 1 listens on `offsets` from its client port (0 first):
    /// the highest usable port leaves room for the highest of them, which `why` names.
    pub const fn above(
        broker: &'static str,
        variable: &'static str,
        default: u16,
        offsets: &'static [u16],
        why: &'static str,
    ) -> PortRule {
        let (mut highest, mut i) = (0, 0);
        while i < offsets.len() {
            if offsets[i] > highest {
                highest = offsets[i];
            }
            i += 1;
        }
        PortRule {
            broker,
            variable,
            default,
            max: u16::MAX - highest,
            why,
            offsets,
        }
    }

    /// Reads the variable into a [`PortSetting`].
    pub fn setting(&self) -> PortSetting {
        let (port, invalid) = self.read();
        PortSetting {
            rule: *self,
            port,
            invalid,
        }
    }

    /// The port the variable names (else the default), and the variable's text when it
    /// names no usable port (reported by [`PortRule::check`]).
    pub fn read(&self) -> (u16, Option<String>) {
        port_from_variable(std::env::var_os(self.variable), self.default, 1..=self.max)
    }

    /// Refuses, before anything starts, a variable that named no usable port and a port
    /// outside 1 to `max`.
    pub fn check(&self, port: u16, invalid_variable: Option<&str>) -> Result<(), BrokerError> {
        if let Some(value) = invalid_variable {
            return Err(BrokerError::InvalidPortSetting {
                broker: self.broker,
                variable: self.variable,
                value: value.to_string(),
                max: self.max,
                why: self.why,
            });
        }
        if !(1..=self.max).contains(&port) {
            return Err(self.out_of_range(port));
        }
        Ok(())
    }

    /// The refusal of `port`, outside 1 to `max`.
    pub fn out_of_range(&self, port: u16) -> BrokerError {
        BrokerError::PortOutOfRange {
            broker: self.broker,
            port,
            max: self.max,
            why: self.why,
        }
    }
}

/// Reads a port variable such as `BROKERBENCH_KAFKA_PORT`: its port, or `default` and the
/// bad value to report. Unset or empty means `default`; a port outside `valid` is bad.
pub fn port_from_variable(
    value: Option<OsString>,
    default: u16,
    valid: RangeInclusive<u16>,
) -> (u16, Option<String>) {
    let Some(value) = value.filter(|value| !value.is_empty()) else {
        return (default, None);
    };
    let text = value.to_string_lossy();
    match text.trim().parse::<u16>() {
        Ok(port) if valid.contains(&port) => (port, None),
        _ => (default, Some(text.into_owned())),
    }
}

/// `home` made absolute. The ownership check compares a path on the broker's command line,
/// so it has to be the same string whatever the working directory of a later call.
pub fn absolute_home(home: &Path) -> PathBuf {
    std::path::absolute(home).unwrap_or_else(|_| home.to_path_buf())
}

/// Creates a broker's folder and takes its lock (`<dir>/.lock`), held until dropped.
pub fn create_and_lock(dir: &Path) -> Result<Lock, BrokerError> {
    std::fs::create_dir_all(dir).map_err(BrokerError::io("creating", dir))?;
    Lock::acquire(&dir.join(".lock"))
}

/// `down` of the broker kept in `dir`: under the folder's lock, stops the process
/// `running_pid` finds with `stop`, then removes `leftovers` (pid file, state) that are
/// there. Returns the pid it stopped, or `None` when none ran (or the folder does not exist).
pub fn down(
    dir: &Path,
    running_pid: impl FnOnce() -> Option<u32>,
    stop: impl FnOnce(u32) -> Result<(), BrokerError>,
    leftovers: &[PathBuf],
) -> Result<Option<u32>, BrokerError> {
    if !dir.is_dir() {
        return Ok(None);
    }
    let _lock = Lock::acquire(&dir.join(".lock"))?;
    let stopped = running_pid();
    if let Some(pid) = stopped {
        stop(pid)?;
    }
    for file in leftovers {
        process::remove_if_present(file)?;
    }
    Ok(stopped)
}

/// Calls `attempt` about every 100 ms until it returns `Some`, which it returns; `None` once
/// `timeout` has passed. Refused connections fail fast: the pause keeps it from spinning.
pub fn poll<T>(timeout: Duration, mut attempt: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        let started = Instant::now();
        if let Some(done) = attempt() {
            return Some(done);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(100).saturating_sub(started.elapsed()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_variable_is_validated() {
        let parse =
            |value: Option<&str>| port_from_variable(value.map(OsString::from), 80, 1..=999);
        assert_eq!(parse(None), (80, None));
        assert_eq!(parse(Some("")), (80, None));
        assert_eq!(parse(Some(" 443 ")), (443, None));
        for bad in ["0", "1000", "65536", "http", "-1"] {
            assert_eq!(parse(Some(bad)), (80, Some(bad.to_string())), "{bad}");
        }
    }

    #[test]
    fn a_rule_above_its_offsets_leaves_room_for_the_highest() {
        const RULE: PortRule = PortRule::above("toy", "V", 80, &[0, 1000, 1], "the port + 1000");
        assert_eq!(RULE.max, 64535);
        assert_eq!(RULE.offsets, &[0, 1000, 1]);
        assert_eq!(PortRule::above("toy", "V", 80, &[0], "").max, u16::MAX);
    }

    #[test]
    fn a_port_setting_is_read_once_and_refused_when_used() {
        const RULE: PortRule = PortRule {
            broker: "toy",
            variable: "BROKERBENCH_TOY_PORT_OF_A_MANAGED_TEST",
            default: 80,
            max: 999,
            why: "a toy listens on the port + 1000 too",
            offsets: &[0, 1000],
        };
        std::env::set_var(RULE.variable, "1000");
        let setting = RULE.setting();
        std::env::remove_var(RULE.variable);
        assert_eq!(setting.or_default(), 80);
        match setting.checked() {
            Err(BrokerError::InvalidPortSetting { value, max, .. }) => {
                assert_eq!((value.as_str(), max), ("1000", 999));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(RULE.setting().checked().unwrap(), 80);
        assert!(matches!(
            RULE.out_of_range(1000),
            BrokerError::PortOutOfRange { port: 1000, .. }
        ));
    }

    #[test]
    fn polling_stops_at_the_first_answer_or_the_timeout() {
        let mut attempts = 0;
        let answer = poll(Duration::from_secs(5), || {
            attempts += 1;
            (attempts == 3).then_some(attempts)
        });
        assert_eq!(answer, Some(3));
        let started = Instant::now();
        assert_eq!(poll(Duration::from_millis(250), || None::<()>), None);
        assert!(started.elapsed() >= Duration::from_millis(250));
    }

    #[test]
    fn down_stops_what_runs_and_removes_leftovers() {
        let home = tempfile::tempdir().unwrap();
        let missing = home.path().join("none");
        let stopped = down(&missing, || panic!("no lookup"), |_| panic!("no stop"), &[]);
        assert_eq!(stopped.unwrap(), None);
        let dir = home.path().join("broker");
        drop(create_and_lock(&dir).unwrap());
        let leftover = dir.join("broker.pid");
        std::fs::write(&leftover, "1\n").unwrap();
        let stop = |pid| {
            assert_eq!(pid, 7);
            Ok(())
        };
        let stopped = down(&dir, || Some(7), stop, std::slice::from_ref(&leftover));
        assert_eq!(stopped.unwrap(), Some(7));
        assert!(!leftover.exists());
    }
}
