//! Prometheus text format both ways: scrape a broker's metrics endpoint over http or https,
//! with basic auth or a bearer token (Kafka through the Prometheus JMX exporter agent,
//! RabbitMQ through rabbitmq_prometheus, NATS through its JSON monitoring endpoints, anything
//! else through `--broker-metrics URL`) and turn counters into rates; serve brokerbench's own
//! live figures for a Prometheus server to scrape.

mod broker;
mod exposition;
mod scrape;
mod text;

pub use broker::{
    counter, follows_naming, gauge, time_ratio, unlabelled, BrokerMetrics, Combine, Format,
    MetricKind, MetricSet, MetricSpec, Reader, Reading, MESSAGES_IN,
};
pub use exposition::{Exposition, MetricsServer, Page, Pages};
pub use scrape::{
    scrape, system_ca_bundle, Auth, Endpoint, EndpointSettings, ScrapeError, Scraper,
    ENV_BEARER_TOKEN, ENV_CA_FILE, ENV_PASSWORD, ENV_USERNAME,
};
pub use text::{parse, Sample};
