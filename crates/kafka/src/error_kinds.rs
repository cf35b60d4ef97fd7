//! Error kinds: librdkafka's error codes in snake case, as results and reports name them, and
//! the driver file settings behind the kinds that refuse every message.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// `MessageTimedOut` → `msg_timed_out`-style snake case for error kinds.
pub(crate) fn kind_of(code: RDKafkaErrorCode) -> String {
    let name = format!("{code:?}");
    let mut kind = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                kind.push('_');
            }
            kind.push(c.to_ascii_lowercase());
        } else {
            kind.push(c);
        }
    }
    kind
}

pub(crate) fn error_kind(error: &KafkaError) -> String {
    match error.rdkafka_error_code() {
        Some(code) => kind_of(code),
        None => "client_error".into(),
    }
}

/// The settings behind the error kinds that refuse every message (see
/// `Driver::failure_settings`); librdkafka names some errors two ways.
pub(crate) const FAILURE_SETTINGS: &[(&str, &str)] = &[
    (
        "invalid_required_acks",
        "producer_config.acks (Kafka takes all, -1, 0 or 1)",
    ),
    ("message_size_too_large", MESSAGE_SIZE),
    ("msg_size_too_large", MESSAGE_SIZE),
    ("record_list_too_large", MESSAGE_SIZE),
    ("topic_authorization_failed", CREDENTIALS),
    ("cluster_authorization_failed", CREDENTIALS),
    ("unknown_topic_or_partition", TOPICS),
    ("unknown_topic_or_part", TOPICS),
];
const MESSAGE_SIZE: &str = "message_size against the broker's limit (Kafka: producer_config.message.max.bytes and the topic's max.message.bytes)";
const CREDENTIALS: &str = "the credentials in producer_config (sasl.username, sasl.password)";
const TOPICS: &str =
    "the topic settings (topics, partitions_per_topic) and whether the broker creates topics";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_kinds_are_snake_case() {
        assert_eq!(
            kind_of(RDKafkaErrorCode::MessageTimedOut),
            "message_timed_out"
        );
        assert_eq!(kind_of(RDKafkaErrorCode::QueueFull), "queue_full");
    }
}
