//! brokerbench's live figures served over HTTP (`--metrics-listen 127.0.0.1:9464`) for a
//! Prometheus server and Grafana to show a run while it runs: the families and their two
//! renderings (Prometheus text 0.0.4 and OpenMetrics 1.0.0, chosen per scrape from
//! `Accept`), and the small server that answers scrapes; the same server serves the live
//! dashboard's pages (`--dashboard`), which the caller builds.

mod cost;
mod families;
mod http;
mod respond;
mod server;
mod state;

pub use self::families::Exposition;
pub use self::server::MetricsServer;
pub use self::state::{Page, Pages};

#[cfg(test)]
mod tests;
