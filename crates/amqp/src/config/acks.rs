//! Publisher confirms and consumer acknowledgements: whether the broker confirms each publish,
//! how many may wait for it, and how consumers acknowledge deliveries.

use serde::{Deserialize, Serialize};

use super::defaults::{default_one, default_true};

fn default_max_outstanding() -> u32 {
    1000
}

/// Publisher confirms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfirmsConfig {
    /// confirm.select on every producer channel; off means at-most-once publishing.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// Unconfirmed messages per producer at most; more is backpressure.
    #[serde(default = "default_max_outstanding")]
    pub max_outstanding: u32,
}

impl Default for ConfirmsConfig {
    fn default() -> Self {
        ConfirmsConfig {
            enabled: true,
            max_outstanding: default_max_outstanding(),
        }
    }
}

/// Consumer acknowledgements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AckConfig {
    #[serde(default)]
    pub mode: AckMode,
    /// Manual mode: acknowledge every n-th delivery with multiple=true (1 = each one).
    #[serde(default = "default_one")]
    pub multiple_every: u32,
}

impl Default for AckConfig {
    fn default() -> Self {
        AckConfig {
            mode: AckMode::Manual,
            multiple_every: 1,
        }
    }
}

/// How consumers acknowledge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AckMode {
    /// no_ack consume: the broker forgets a message once it is sent.
    Auto,
    /// basic.ack after the consumer has read the message.
    #[default]
    Manual,
}
