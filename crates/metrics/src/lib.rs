//! Prometheus text format both ways: scrape a broker's metrics endpoint (Kafka through the
//! Prometheus JMX exporter agent, RabbitMQ through rabbitmq_prometheus, anything else through
//! `--broker-metrics URL`) and turn counters into rates; serve brokerbench's own live figures
//! for a Prometheus server to scrape.

mod broker;
mod exposition;
mod scrape;
mod text;

pub use broker::{
    counter, gauge, BrokerMetrics, Format, MetricKind, MetricSet, MetricSpec, Reading,
    KAFKA_METRICS, MESSAGES_IN, RABBITMQ_METRICS,
};
pub use exposition::{exposition_name, Exposition, MetricsServer};
pub use scrape::{scrape, ScrapeError};
pub use text::{parse, Sample};
