//! A backlog quota for the run's namespace (driver fields `backlog_quota_size` and
//! `backlog_quota_policy`): how many bytes a subscription may leave unacknowledged, and what
//! Pulsar does past it — evict the oldest (`consumer_backlog_eviction`: brokerbench counts
//! them as dropped by the broker), refuse sends (`producer_exception`) or hold them
//! (`producer_request_hold`, Pulsar's default).

use brokerbench_model::field::FieldError;
use serde::{Deserialize, Serialize};

/// The driver file's backlog quota: the fields as the file names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BacklogQuota {
    #[serde(default, deserialize_with = "brokerbench_model::units::optional_bytes")]
    pub backlog_quota_size: Option<u64>,
    #[serde(default)]
    pub backlog_quota_policy: Option<QuotaPolicy>,
}

/// What Pulsar does once a subscription's backlog passes the quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuotaPolicy {
    ConsumerBacklogEviction,
    ProducerException,
    ProducerRequestHold,
}

impl QuotaPolicy {
    /// The admin API's name.
    pub fn wire(self) -> &'static str {
        match self {
            QuotaPolicy::ConsumerBacklogEviction => "consumer_backlog_eviction",
            QuotaPolicy::ProducerException => "producer_exception",
            QuotaPolicy::ProducerRequestHold => "producer_request_hold",
        }
    }
}

/// The quota's size and policy, when the driver file sets one.
pub fn quota(config: &BacklogQuota) -> Option<(u64, QuotaPolicy)> {
    let size = config.backlog_quota_size?;
    let policy = config
        .backlog_quota_policy
        .unwrap_or(QuotaPolicy::ProducerRequestHold);
    Some((size, policy))
}

/// A policy needs a size, and a size of 0 would refuse everything.
pub fn validate(config: &BacklogQuota) -> Result<(), FieldError> {
    match (config.backlog_quota_size, config.backlog_quota_policy) {
        (None, Some(policy)) => Err(FieldError::new(
            "backlog_quota_policy",
            format!(
                "{} applies past a backlog quota: set backlog_quota_size too (e.g. 10MiB)",
                policy.wire()
            ),
        )),
        (Some(0), _) => Err(FieldError::new(
            "backlog_quota_size",
            "must be at least 1 byte (e.g. 10MiB); leave it out for no quota".to_string(),
        )),
        _ => Ok(()),
    }
}

/// Why acknowledged messages a subscription never received were dropped, when the policy
/// evicts.
pub fn drop_policy(config: &BacklogQuota) -> Option<String> {
    match quota(config)? {
        (size, QuotaPolicy::ConsumerBacklogEviction) => Some(format!(
            "a subscription's backlog is limited to {size} bytes, and with consumer_backlog_eviction Pulsar skips its oldest messages past that"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> BacklogQuota {
        brokerbench_model::yaml::from_str(text).unwrap()
    }

    #[test]
    fn a_quota_needs_a_size_and_only_eviction_drops() {
        let c = parse("backlog_quota_policy: producer_exception");
        assert_eq!(validate(&c).unwrap_err().field, "backlog_quota_policy");
        let c = parse("backlog_quota_size: 0");
        assert_eq!(validate(&c).unwrap_err().field, "backlog_quota_size");
        let c = parse("backlog_quota_size: 1MiB");
        assert_eq!(quota(&c), Some((1 << 20, QuotaPolicy::ProducerRequestHold)));
        assert_eq!(drop_policy(&c), None);
        let c = parse("backlog_quota_size: 100KB\nbacklog_quota_policy: consumer_backlog_eviction");
        assert!(drop_policy(&c).unwrap().contains("100000 bytes"));
    }
}
