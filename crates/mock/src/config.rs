//! The mock's driver file: which faults its in-memory broker injects.

use std::time::Duration;

use brokerbench_driver::mock::MockFaults;
use brokerbench_model::units::parse_duration;
use brokerbench_model::workload::FieldError;
use serde::{Deserialize, Serialize};

/// Top-level mock driver field names, for `--set` routing and did-you-mean.
pub const MOCK_DRIVER_FIELDS: &[&str] = &[
    "driver",
    "confirms",
    "buffer",
    "reject_all",
    "refuse_setup",
    "drops_by_policy",
    "tells_unread",
    "stamps_acknowledgements",
    "drop_every",
    "duplicate_every",
    "swap_every",
    "send_delay",
    "receive_per_poll",
    "capacity",
    "outage",
    "stall",
    "slow",
];

fn default_true() -> bool {
    true
}
fn default_buffer() -> usize {
    100_000
}

/// The in-memory broker and the faults it injects (all off by default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MockDriverConfig {
    /// Publishers wait for confirmations; false: nothing is acknowledged.
    #[serde(default = "default_true")]
    pub confirms: bool,
    /// Unacknowledged messages a producer holds before it refuses sends with backpressure.
    #[serde(default = "default_buffer")]
    pub buffer: usize,
    /// The broker refuses every message (each acknowledgement fails, kind `rejected`).
    #[serde(default)]
    pub reject_all: bool,
    /// The broker refuses the run's topics before anything is sent: the run fails.
    #[serde(default)]
    pub refuse_setup: bool,
    /// What `drop_every` drops is the broker's policy: dropped by the broker, not lost.
    #[serde(default)]
    pub drops_by_policy: bool,
    /// Consumers tell, after the drain, how many messages wait in their queue.
    #[serde(default)]
    pub tells_unread: bool,
    /// Acknowledgements carry their arrival time, as librdkafka's do.
    #[serde(default)]
    pub stamps_acknowledgements: bool,
    /// Acknowledge and never deliver every n-th message.
    #[serde(default)]
    pub drop_every: Option<u64>,
    /// Deliver every n-th message twice.
    #[serde(default)]
    pub duplicate_every: Option<u64>,
    /// Deliver every n-th message after the one that follows it.
    #[serde(default)]
    pub swap_every: Option<u64>,
    /// Each send takes this long (`1ms`).
    #[serde(default)]
    pub send_delay: Option<String>,
    /// A consumer takes at most this many messages a poll, each poll at least 1 ms.
    #[serde(default)]
    pub receive_per_poll: Option<usize>,
    /// Messages a second the broker acknowledges at most, over all producers.
    #[serde(default)]
    pub capacity: Option<f64>,
    /// The broker goes away for a while: in-flight messages fail, the clients reconnect.
    #[serde(default)]
    pub outage: Option<Window>,
    /// The broker stops acknowledging for a while, the connection up.
    #[serde(default)]
    pub stall: Option<Window>,
    /// The broker acknowledges each message `delay` after its send for a while.
    #[serde(default)]
    pub slow: Option<Window>,
}

/// A stretch of the run, counted from its start (warm-up included): `{at: 3s, for: 2s}`, and
/// for `slow` a `delay`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    pub at: String,
    #[serde(rename = "for")]
    pub length: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<String>,
}

impl MockDriverConfig {
    /// The faults the in-memory broker injects; each error names its field and the fix.
    pub fn faults(&self) -> Result<MockFaults, FieldError> {
        for (field, every) in [
            ("drop_every", self.drop_every),
            ("duplicate_every", self.duplicate_every),
            ("swap_every", self.swap_every),
        ] {
            if every == Some(0) {
                return Err(FieldError::new(
                    field,
                    "must be at least 1 (every n-th message)",
                ));
            }
        }
        if self.buffer == 0 || self.receive_per_poll == Some(0) {
            let field = if self.buffer == 0 {
                "buffer"
            } else {
                "receive_per_poll"
            };
            return Err(FieldError::new(field, "must be at least 1"));
        }
        if self.capacity.is_some_and(|c| !(c.is_finite() && c > 0.0)) {
            return Err(FieldError::new(
                "capacity",
                "give messages a second above 0, e.g. 10000",
            ));
        }
        Ok(MockFaults {
            drop_every: self.drop_every,
            duplicate_every: self.duplicate_every,
            swap_every: self.swap_every,
            send_delay: optional_duration("send_delay", &self.send_delay)?,
            unconfirmed: !self.confirms,
            drops_by_policy: self.drops_by_policy,
            receive_per_poll: self.receive_per_poll,
            capacity: self.capacity,
            stamps_acknowledgements: self.stamps_acknowledgements,
            buffer: Some(self.buffer),
            outage: window("outage", &self.outage)?,
            stall: window("stall", &self.stall)?,
            slow: slow(&self.slow)?,
            reject_all: self.reject_all,
            refuse_setup: self.refuse_setup,
            tells_unread: self.tells_unread,
            ..MockFaults::default()
        })
    }
}

fn optional_duration(field: &str, text: &Option<String>) -> Result<Option<Duration>, FieldError> {
    text.as_deref()
        .map(|t| parse_duration(t).map_err(|e| FieldError::new(field, e)))
        .transpose()
}

fn window(
    field: &str,
    window: &Option<Window>,
) -> Result<Option<(Duration, Duration)>, FieldError> {
    let Some(window) = window else {
        return Ok(None);
    };
    if window.delay.is_some() {
        return Err(FieldError::new(
            &format!("{field}.delay"),
            "only `slow` takes a delay",
        ));
    }
    let at = parse_duration(&window.at).map_err(|e| FieldError::new(&format!("{field}.at"), e))?;
    let length =
        parse_duration(&window.length).map_err(|e| FieldError::new(&format!("{field}.for"), e))?;
    Ok(Some((at, length)))
}

fn slow(slow: &Option<Window>) -> Result<Option<(Duration, Duration, Duration)>, FieldError> {
    let Some(given) = slow else {
        return Ok(None);
    };
    let delay = given.delay.as_deref().ok_or_else(|| {
        FieldError::new(
            "slow.delay",
            "give how late each acknowledgement comes, e.g. {at: 3s, for: 2s, delay: 50ms}",
        )
    })?;
    let delay = parse_duration(delay).map_err(|e| FieldError::new("slow.delay", e))?;
    let plain = Window {
        delay: None,
        ..given.clone()
    };
    let (at, length) = window("slow", &Some(plain))?.expect("given");
    Ok(Some((at, length, delay)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> MockDriverConfig {
        brokerbench_model::yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn windows_and_delays_become_the_mocks_faults() {
        let faults = config(
            "slow: {at: 3s, for: 2s, delay: 50ms}\nstall: {at: 1s, for: 500ms}\nconfirms: false\n",
        )
        .faults()
        .unwrap();
        let s = Duration::from_secs;
        assert_eq!(faults.slow, Some((s(3), s(2), Duration::from_millis(50))));
        assert_eq!(faults.stall, Some((s(1), Duration::from_millis(500))));
        assert!(faults.unconfirmed);
        assert_eq!(faults.buffer, Some(100_000));
    }

    #[test]
    fn bad_values_name_their_field() {
        for (yaml, field) in [
            ("drop_every: 0", "drop_every"),
            ("slow: {at: 3s, for: 2s}", "slow.delay"),
            ("outage: {at: soon, for: 2s}", "outage.at"),
            ("stall: {at: 1s, for: 1s, delay: 1ms}", "stall.delay"),
            ("capacity: -5", "capacity"),
            ("send_delay: 5 parsecs", "send_delay"),
        ] {
            let error = config(yaml).faults().unwrap_err();
            assert_eq!(error.field, field, "{yaml}: {}", error.message);
        }
    }
}
