//! The RabbitMQ driver file: exchanges, queues, confirms and acknowledgements, and the AMQP URI.

mod acks;
mod defaults;
mod driver;
mod percent;
mod queue;
mod uri;
mod uri_query;
mod validate;

pub use acks::{AckConfig, AckMode, ConfirmsConfig};
pub use driver::{RabbitMqDriverConfig, RABBITMQ_DRIVER_FIELDS};
pub use queue::{ExchangeConfig, ExchangeKind, Overflow, QueueConfig, QueueKind};
pub use uri::{AmqpUri, AMQPS_DEFAULT_PORT, AMQP_DEFAULT_PORT};

#[cfg(test)]
mod tests;
