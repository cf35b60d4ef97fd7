//! The checks serde cannot make of a RabbitMQ driver file, and which of its queue settings let
//! the broker discard acknowledged messages.

use brokerbench_model::workload::FieldError;

use super::acks::AckMode;
use super::driver::RabbitMqDriverConfig;
use super::queue::{Overflow, QueueKind};

impl RabbitMqDriverConfig {
    /// The checks serde cannot make: combinations the broker would refuse or that would stall a
    /// run. Each error names the field and the fix.
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.uri.is_none() && !self.failover_uris.is_empty() {
            return Err(FieldError::new(
                "failover_uris",
                "goes with uri: give the broker's uri too, or leave both out to use the managed broker (whose cluster nodes are the failover ones)",
            ));
        }
        if self.exchange.name.is_empty() || self.exchange.name.starts_with("amq.") {
            return Err(FieldError::new(
                "exchange.name",
                format!(
                    "'{}' cannot start exchange names (empty, or the reserved amq. prefix); use e.g. brokerbench",
                    self.exchange.name
                ),
            ));
        }
        if self.exchange.name.len() > 100 {
            return Err(FieldError::new(
                "exchange.name",
                "is longer than 100 bytes; AMQP names are at most 255 bytes and the run adds the workload name, run id and topic; use a shorter prefix",
            ));
        }
        for (field, value) in [
            ("queues_per_topic", self.queues_per_topic),
            ("channels_per_connection", self.channels_per_connection),
        ] {
            if value == 0 {
                return Err(FieldError::new(field, "must be at least 1"));
            }
        }
        self.validate_queue()?;
        self.validate_confirms_and_acknowledgements()
    }

    /// The checks of the queue's settings: those its type does not have or needs, and what
    /// reject-publish needs to act and be seen.
    fn validate_queue(&self) -> Result<(), FieldError> {
        let queue = &self.queue;
        let kind = queue.kind.as_str();
        if queue.kind != QueueKind::Classic && !queue.durable {
            return Err(FieldError::new(
                "queue.durable",
                format!("{kind} queues are always durable; set queue.durable: true, or use queue.type: classic for a transient queue"),
            ));
        }
        match queue.initial_group_size {
            Some(_) if queue.kind != QueueKind::Quorum => {
                return Err(FieldError::new(
                    "queue.initial_group_size",
                    format!("only quorum queues have members to count ({kind} queues do not); remove it or use queue.type: quorum"),
                ))
            }
            Some(0) => {
                return Err(FieldError::new(
                    "queue.initial_group_size",
                    "must be at least 1 (a quorum queue of 3 members survives one node down)",
                ))
            }
            _ => {}
        }
        if queue.lazy && queue.kind != QueueKind::Classic {
            return Err(FieldError::new(
                "queue.lazy",
                format!("only classic queues can be lazy ({kind} queues keep messages on disk anyway); remove queue.lazy or use queue.type: classic"),
            ));
        }
        if queue.kind == QueueKind::Stream {
            self.validate_stream_queue()?;
        }
        if queue.overflow == Overflow::RejectPublish {
            if queue.max_length.is_none() && queue.max_length_bytes.is_none() {
                return Err(FieldError::new(
                    "queue.overflow",
                    "reject-publish acts only when the queue has a length limit; set queue.max_length or queue.max_length_bytes, or remove queue.overflow",
                ));
            }
            if !self.confirms.enabled {
                return Err(FieldError::new(
                    "confirms.enabled",
                    "with queue.overflow: reject-publish the broker reports refused messages only through publisher confirms; set confirms.enabled: true",
                ));
            }
        }
        Ok(())
    }

    /// The checks of stream queues: manual acknowledgements and a prefetch limit, no
    /// message-count limit and no overflow behaviour.
    fn validate_stream_queue(&self) -> Result<(), FieldError> {
        let queue = &self.queue;
        if self.ack.mode == AckMode::Auto {
            return Err(FieldError::new(
                "ack.mode",
                "stream queues need manual acknowledgements; set ack.mode: manual",
            ));
        }
        if self.prefetch == 0 {
            return Err(FieldError::new(
                "prefetch",
                "stream queues need a prefetch limit; set prefetch to 1 or more, e.g. 1000",
            ));
        }
        if queue.max_length.is_some() {
            return Err(FieldError::new(
                "queue.max_length",
                "stream queues have no message-count limit; use queue.max_length_bytes (retention by size) or queue.type: classic",
            ));
        }
        if queue.overflow == Overflow::RejectPublish {
            return Err(FieldError::new(
                "queue.overflow",
                "stream queues do not support overflow behaviours; remove queue.overflow or use queue.type: classic or quorum",
            ));
        }
        Ok(())
    }

    /// The checks of publisher confirms and consumer acknowledgements: at least one
    /// outstanding confirm, and acknowledging every n-th delivery only in manual mode and
    /// within the prefetch limit.
    fn validate_confirms_and_acknowledgements(&self) -> Result<(), FieldError> {
        if self.confirms.enabled && self.confirms.max_outstanding == 0 {
            return Err(FieldError::new(
                "confirms.max_outstanding",
                "must be at least 1 (unconfirmed messages per producer)",
            ));
        }
        if self.ack.multiple_every == 0 {
            return Err(FieldError::new(
                "ack.multiple_every",
                "must be at least 1 (1 acknowledges each delivery on its own)",
            ));
        }
        if self.ack.mode == AckMode::Auto && self.ack.multiple_every != 1 {
            return Err(FieldError::new(
                "ack.multiple_every",
                "applies only to ack.mode: manual; remove it or set ack.mode: manual",
            ));
        }
        if self.ack.mode == AckMode::Manual
            && self.prefetch != 0
            && self.ack.multiple_every > u32::from(self.prefetch)
        {
            return Err(FieldError::new(
                "ack.multiple_every",
                format!(
                    "{} exceeds prefetch: {}, so a consumer would stop receiving before it acknowledges; lower ack.multiple_every or raise prefetch",
                    self.ack.multiple_every, self.prefetch
                ),
            ));
        }
        Ok(())
    }

    /// Why the broker may discard acknowledged messages with this configuration, if it may.
    pub fn drop_policy(&self) -> Option<String> {
        let queue = &self.queue;
        let limits: Vec<String> = [
            queue.max_length.map(|n| format!("max_length: {n}")),
            queue
                .max_length_bytes
                .map(|n| format!("max_length_bytes: {n}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        if limits.is_empty() {
            return None;
        }
        match (queue.kind, queue.overflow) {
            (QueueKind::Stream, _) => Some(format!(
                "stream queues with {} remove their oldest segments",
                limits.join(", ")
            )),
            (_, Overflow::DropHead) => Some(format!(
                "queues with {} and overflow: drop-head discard their oldest messages when full",
                limits.join(", ")
            )),
            (_, Overflow::RejectPublish) => None,
        }
    }
}
