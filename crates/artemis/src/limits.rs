//! An address limit for the run's addresses: the driver file's `max_size_messages`,
//! `max_size_bytes` and `address_full_policy`, set through Artemis's management API as the
//! run prepares and removed as it cleans up.

use brokerbench_model::field::FieldError;
use serde::{Deserialize, Serialize};

/// The driver file's limit for each of the run's addresses: the fields as the file names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddressLimit {
    #[serde(default)]
    pub max_size_messages: Option<u64>,
    #[serde(default, deserialize_with = "brokerbench_model::units::optional_bytes")]
    pub max_size_bytes: Option<u64>,
    #[serde(default)]
    pub address_full_policy: Option<FullPolicy>,
}

/// Artemis's `address-full-policy`, as its broker.xml spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FullPolicy {
    #[serde(rename = "PAGE")]
    Page,
    #[serde(rename = "DROP")]
    Drop,
    #[serde(rename = "FAIL")]
    Fail,
    #[serde(rename = "BLOCK")]
    Block,
}

impl FullPolicy {
    fn name(self) -> &'static str {
        match self {
            FullPolicy::Page => "PAGE",
            FullPolicy::Drop => "DROP",
            FullPolicy::Fail => "FAIL",
            FullPolicy::Block => "BLOCK",
        }
    }
}

/// A policy needs a limit to apply at, a limit of 0 would refuse everything, and BLOCK does
/// nothing to a STOMP producer.
pub fn validate(config: &AddressLimit) -> Result<(), FieldError> {
    for (field, value) in [
        ("max_size_messages", config.max_size_messages),
        ("max_size_bytes", config.max_size_bytes),
    ] {
        if value == Some(0) {
            return Err(FieldError::new(
                field,
                "must be at least 1 (leave it out for the broker's own limit)".to_string(),
            ));
        }
    }
    if config.address_full_policy == Some(FullPolicy::Block) {
        return Err(FieldError::new(
            "address_full_policy",
            "BLOCK does not hold back brokerbench's producers: Artemis blocks by flow control, which STOMP lacks (an address limited to 100 messages took 9,988 with BLOCK); use DROP, FAIL or PAGE".to_string(),
        ));
    }
    let limited = config.max_size_messages.is_some() || config.max_size_bytes.is_some();
    if let (Some(policy), false) = (config.address_full_policy, limited) {
        return Err(FieldError::new(
            "address_full_policy",
            format!(
                "{} applies when an address is full, and no limit is set: add max_size_messages (e.g. 1000) or max_size_bytes (e.g. 10MiB)",
                policy.name()
            ),
        ));
    }
    Ok(())
}

/// The settings for each of the run's addresses, as `addAddressSettings` takes them (JSON
/// with AddressSettings' property names); None: the driver file sets no limit.
pub fn address_settings(config: &AddressLimit) -> Option<String> {
    let mut settings = serde_json::Map::new();
    if let Some(n) = config.max_size_messages {
        settings.insert("maxSizeMessages".into(), n.into());
    }
    if let Some(n) = config.max_size_bytes {
        settings.insert("maxSizeBytes".into(), n.into());
    }
    if settings.is_empty() {
        return None;
    }
    if let Some(policy) = config.address_full_policy {
        settings.insert("addressFullMessagePolicy".into(), policy.name().into());
    }
    Some(serde_json::Value::Object(settings).to_string())
}

/// What the broker discards by policy, for the summary: only `DROP` discards messages whose
/// sends it confirmed.
pub fn drop_policy(config: &AddressLimit) -> Option<String> {
    if config.address_full_policy != Some(FullPolicy::Drop) {
        return None;
    }
    let limits: Vec<String> = [
        config.max_size_messages.map(|n| format!("{n} messages")),
        config.max_size_bytes.map(|n| format!("{n} bytes")),
    ]
    .into_iter()
    .flatten()
    .collect();
    Some(format!(
        "each address holds at most {}, and with address-full-policy DROP Artemis discards a message for a full address yet confirms its send",
        limits.join(" and ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> AddressLimit {
        brokerbench_model::yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn a_limit_becomes_address_settings_with_its_policy() {
        let c = config("{max_size_messages: 100, address_full_policy: DROP}");
        assert_eq!(
            address_settings(&c).unwrap(),
            r#"{"maxSizeMessages":100,"addressFullMessagePolicy":"DROP"}"#
        );
        assert!(drop_policy(&c).unwrap().contains("100 messages"));
        let c = config("{max_size_bytes: 1MiB, address_full_policy: FAIL}");
        assert_eq!(
            address_settings(&c).unwrap(),
            r#"{"maxSizeBytes":1048576,"addressFullMessagePolicy":"FAIL"}"#
        );
        assert_eq!(drop_policy(&c), None);
        assert_eq!(address_settings(&config("{}")), None);
    }

    #[test]
    fn a_policy_without_a_limit_or_a_zero_limit_is_refused_naming_the_field() {
        let e = validate(&config("{address_full_policy: DROP}")).unwrap_err();
        assert_eq!(e.field, "address_full_policy");
        assert!(e.message.contains("max_size_messages"), "{}", e.message);
        let e = validate(&config("{max_size_messages: 0}")).unwrap_err();
        assert_eq!(e.field, "max_size_messages");
        let e = validate(&config(
            "{max_size_messages: 9, address_full_policy: BLOCK}",
        ))
        .unwrap_err();
        assert!(e.message.contains("STOMP"), "{}", e.message);
        assert!(
            brokerbench_model::yaml::from_str::<AddressLimit>("{address_full_policy: drop}")
                .is_err()
        );
    }
}
