//! How a client that lost its broker gets it back: the driver files' `reconnect` field, for
//! the families whose client brokerbench drives itself (RabbitMQ, NATS). Kafka's client,
//! librdkafka, reconnects on its own (`reconnect.backoff.ms`, `reconnect.backoff.max.ms`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `reconnect: false`, `reconnect: true`, or `reconnect: {initial_backoff: 100ms,
/// max_backoff: 2s}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    /// Off: a lost connection fails every later send and receive (the raw failure measured).
    pub enabled: bool,
    /// Wait before the second attempt (the first is made at once); doubles after every
    /// failed attempt.
    pub initial_backoff: Duration,
    /// Longest wait between attempts.
    pub max_backoff: Duration,
}

impl Default for Reconnect {
    fn default() -> Self {
        Reconnect {
            enabled: true,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
        }
    }
}

impl Reconnect {
    /// The wait after `failed` attempts in a row (0 before the first).
    pub fn backoff(&self, failed: u32) -> Duration {
        if failed == 0 {
            return Duration::ZERO;
        }
        let doubled = self
            .initial_backoff
            .saturating_mul(1u32 << (failed - 1).min(20));
        doubled.min(self.max_backoff)
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawReconnect {
    Switch(bool),
    Settings(RawSettings),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    enabled: Option<bool>,
    initial_backoff: Option<String>,
    max_backoff: Option<String>,
}

impl<'de> Deserialize<'de> for Reconnect {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let raw = RawReconnect::deserialize(d).map_err(|_| {
            D::Error::custom(
                "reconnect is true, false, or {enabled, initial_backoff, max_backoff} (e.g. {initial_backoff: 100ms, max_backoff: 2s})",
            )
        })?;
        let defaults = Reconnect::default();
        let settings = match raw {
            RawReconnect::Switch(enabled) => {
                return Ok(Reconnect {
                    enabled,
                    ..defaults
                })
            }
            RawReconnect::Settings(s) => s,
        };
        let duration = |field: &str, text: Option<String>, default: Duration| match text {
            None => Ok(default),
            Some(t) => crate::units::parse_duration(&t)
                .map_err(|m| D::Error::custom(format!("reconnect.{field}: {m}"))),
        };
        let reconnect = Reconnect {
            enabled: settings.enabled.unwrap_or(true),
            initial_backoff: duration(
                "initial_backoff",
                settings.initial_backoff,
                defaults.initial_backoff,
            )?,
            max_backoff: duration("max_backoff", settings.max_backoff, defaults.max_backoff)?,
        };
        if reconnect.initial_backoff.is_zero() || reconnect.max_backoff < reconnect.initial_backoff
        {
            return Err(D::Error::custom(
                "reconnect: initial_backoff must be above 0 and at most max_backoff (e.g. {initial_backoff: 100ms, max_backoff: 2s})",
            ));
        }
        Ok(reconnect)
    }
}

impl Serialize for Reconnect {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let text = |d: Duration| format!("{}ms", d.as_millis());
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("enabled", &self.enabled)?;
        map.serialize_entry("initial_backoff", &text(self.initial_backoff))?;
        map.serialize_entry("max_backoff", &text(self.max_backoff))?;
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str) -> Result<Reconnect, String> {
        crate::yaml::from_str(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn a_switch_or_settings() {
        assert!(!read("false").unwrap().enabled);
        assert_eq!(read("true").unwrap(), Reconnect::default());
        let r = read("{initial_backoff: 50ms, max_backoff: 1s}").unwrap();
        assert!(r.enabled);
        assert_eq!(r.initial_backoff, Duration::from_millis(50));
        assert_eq!(r.max_backoff, Duration::from_secs(1));
        assert!(read("{initial_backof: 50ms}").is_err());
        let e = read("{initial_backoff: 5s, max_backoff: 1s}").unwrap_err();
        assert!(e.contains("at most max_backoff"), "{e}");
        let back: Reconnect = serde_json::from_value(serde_json::to_value(r).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn backoff_doubles_up_to_the_limit() {
        let r = Reconnect::default();
        let waits: Vec<u128> = (0..7).map(|n| r.backoff(n).as_millis()).collect();
        assert_eq!(waits, [0, 100, 200, 400, 800, 1600, 2000]);
        assert_eq!(r.backoff(u32::MAX), Duration::from_secs(2));
    }
}
