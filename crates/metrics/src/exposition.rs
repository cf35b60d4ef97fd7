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

/// Gauges to publish, rebuilt each interval.
#[derive(Debug, Default, Clone)]
pub struct Exposition {
    lines: Vec<(String, String, String, f64)>,
}

impl Exposition {
    /// Adds a gauge `brokerbench_<name>{labels} value` with its help text.
    pub fn gauge(&mut self, name: &str, help: &str, labels: &str, value: f64) {
        self.lines
            .push((name.into(), help.into(), labels.into(), value));
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut described = std::collections::HashSet::new();
        for (name, help, labels, value) in &self.lines {
            if described.insert(name.clone()) {
                let _ = writeln!(out, "# HELP brokerbench_{name} {help}");
                let _ = writeln!(out, "# TYPE brokerbench_{name} gauge");
            }
            if labels.is_empty() {
                let _ = writeln!(out, "brokerbench_{name} {value}");
            } else {
                let _ = writeln!(out, "brokerbench_{name}{{{labels}}} {value}");
            }
        }
        out
    }
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
        e.gauge(
            "publish_latency_seconds",
            "Publish latency of the last second.",
            "quantile=\"0.99\"",
            0.0062,
        );
        server.publish(&e);
        let url = format!("http://{}/metrics", server.address());
        let samples = parse(&scrape(&url, Duration::from_secs(2)).unwrap());
        assert_eq!(samples.len(), 2);
        assert_eq!(samples[0].name, "brokerbench_acknowledged_per_second");
        assert_eq!(samples[0].value, 49_998.0);
        assert_eq!(samples[1].label("quantile"), Some("0.99"));
    }
}
