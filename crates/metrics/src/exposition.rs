//! brokerbench's live figures in the Prometheus text format, served over HTTP
//! (`--metrics-listen 127.0.0.1:9464`) for a Prometheus server and Grafana to show a run
//! while it runs.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// The metric families to publish, rebuilt each interval, typed as Prometheus expects:
/// counters (`…_total`) for everything users `rate()`, summaries for latency quantiles,
/// gauges for levels.
#[derive(Debug, Default, Clone)]
pub struct Exposition {
    families: Vec<Family>,
}

#[derive(Debug, Clone)]
struct Family {
    name: String,
    help: String,
    kind: &'static str,
    /// (name suffix such as `_sum`, labels, value)
    samples: Vec<(&'static str, String, f64)>,
}

impl Exposition {
    fn family(&mut self, name: &str, help: &str, kind: &'static str) -> &mut Family {
        match self.families.iter().position(|f| f.name == name) {
            Some(i) => &mut self.families[i],
            None => {
                self.families.push(Family {
                    name: name.into(),
                    help: help.into(),
                    kind,
                    samples: Vec::new(),
                });
                self.families.last_mut().expect("just pushed")
            }
        }
    }

    /// Adds a gauge `brokerbench_<name>{labels} value` with its help text.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &str, value: f64) {
        self.family(name, help, "gauge")
            .samples
            .push(("", labels.into(), value));
    }

    /// Adds a counter; its name ends in `_total`.
    pub fn counter(&mut self, name: &str, help: &str, labels: &str, value: f64) {
        debug_assert!(name.ends_with("_total"), "counter {name}");
        self.family(name, help, "counter")
            .samples
            .push(("", labels.into(), value));
    }

    /// Adds a summary: quantiles, and the running sum and count of all observations.
    pub fn summary(
        &mut self,
        name: &str,
        help: &str,
        quantiles: &[(f64, f64)],
        sum: f64,
        count: u64,
    ) {
        let family = self.family(name, help, "summary");
        for (q, v) in quantiles {
            family.samples.push(("", format!("quantile=\"{q}\""), *v));
        }
        family.samples.push(("_sum", String::new(), sum));
        family.samples.push(("_count", String::new(), count as f64));
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let _ = writeln!(out, "# HELP brokerbench_{} {}", f.name, f.help);
            let _ = writeln!(out, "# TYPE brokerbench_{} {}", f.name, f.kind);
            for (suffix, labels, value) in &f.samples {
                if labels.is_empty() {
                    let _ = writeln!(out, "brokerbench_{}{suffix} {value}", f.name);
                } else {
                    let _ = writeln!(out, "brokerbench_{}{suffix}{{{labels}}} {value}", f.name);
                }
            }
        }
        out
    }
}

/// The exposition name of a broker metric key: abbreviated units spelled out, as
/// Prometheus's naming conventions ask (`_per_s` → `_per_second`, `_pct` → `_percent`,
/// milliseconds → seconds, with the factor to apply to the value).
pub fn exposition_name(key: &str) -> (String, f64) {
    let mut name = key
        .replace("_per_s", "_per_second")
        .replace("_pct", "_percent");
    let mut factor = 1.0;
    if name.contains("_ms") {
        name = name.replace("_ms", "_seconds");
        factor = 1e-3;
    }
    (name, factor)
}

/// A small HTTP server answering every GET with the current exposition text.
pub struct MetricsServer {
    address: SocketAddr,
    body: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Listens on `address` (e.g. 127.0.0.1:9464; port 0 picks a free one).
    pub fn start(address: SocketAddr) -> std::io::Result<MetricsServer> {
        let listener = TcpListener::bind(address)?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let body = Arc::new(Mutex::new(String::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let body = body.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("metrics-listen".into())
                .spawn(move || serve(listener, body, stop))?
        };
        Ok(MetricsServer {
            address,
            body,
            stop,
            thread: Some(thread),
        })
    }

    /// The address actually listened on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Replaces what is served.
    pub fn publish(&self, exposition: &Exposition) {
        *self.body.lock().unwrap_or_else(|e| e.into_inner()) = exposition.render();
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(listener: TcpListener, body: Arc<Mutex<String>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut stream, _)) => {
                let _ = stream.set_nonblocking(false);
                let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
                // Read the whole request head: closing a socket with unread data resets it.
                let mut request = Vec::new();
                let mut buf = [0u8; 2048];
                while !request.ends_with(b"\r\n\r\n") && request.len() < 65_536 {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = body.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                    text.len()
                );
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, scrape};

    #[test]
    fn served_text_parses_back() {
        let server = MetricsServer::start("127.0.0.1:0".parse().unwrap()).unwrap();
        let mut e = Exposition::default();
        e.gauge(
            "acknowledged_per_second",
            "Messages acknowledged in the last second.",
            "",
            49_998.0,
        );
        e.summary(
            "publish_latency_seconds",
            "Publish latency of the last second.",
            &[(0.99, 0.0062)],
            12.5,
            1000,
        );
        e.counter("messages_sent_total", "Messages sent.", "", 7.0);
        server.publish(&e);
        let url = format!("http://{}/metrics", server.address());
        let text = scrape(&url, Duration::from_secs(2)).unwrap();
        let samples = parse(&text);
        assert_eq!(samples.len(), 5, "{text}");
        assert_eq!(samples[0].name, "brokerbench_acknowledged_per_second");
        assert_eq!(samples[0].value, 49_998.0);
        assert_eq!(samples[1].label("quantile"), Some("0.99"));
        assert_eq!(samples[2].name, "brokerbench_publish_latency_seconds_sum");
        assert_eq!(samples[3].value, 1000.0);
        assert!(text.contains("# TYPE brokerbench_publish_latency_seconds summary"));
        assert!(text.contains("# TYPE brokerbench_messages_sent_total counter"));
    }

    #[test]
    fn broker_metric_names_spell_out_units() {
        assert_eq!(
            exposition_name("messages_in_per_s"),
            ("messages_in_per_second".into(), 1.0)
        );
        assert_eq!(
            exposition_name("request_handler_idle_pct").0,
            "request_handler_idle_percent"
        );
        assert_eq!(
            exposition_name("log_flush_time_ms_mean"),
            ("log_flush_time_seconds_mean".into(), 1e-3)
        );
    }
}
