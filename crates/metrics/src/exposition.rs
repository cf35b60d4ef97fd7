//! brokerbench's live figures served over HTTP (`--metrics-listen 127.0.0.1:9464`) for a
//! Prometheus server and Grafana to show a run while it runs: the families and their two
//! renderings (Prometheus text 0.0.4 and OpenMetrics 1.0.0, chosen per scrape from
//! `Accept`), and the small server that answers scrapes.

mod http;

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Read};
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use self::http::{HeadError, Request, Response, Status};

/// The metric families to publish, rebuilt each interval, typed as Prometheus expects:
/// counters (`…_total`) for everything users `rate()`, summaries for latency quantiles,
/// gauges for levels.
#[derive(Debug, Default, Clone)]
pub struct Exposition {
    families: Vec<Family>,
}

#[derive(Debug, Clone)]
struct Family {
    /// Without the `brokerbench_` prefix; a counter's ends in `_total`.
    name: String,
    help: String,
    kind: Kind,
    /// (name suffix such as `_sum`, labels, value)
    samples: Vec<(&'static str, String, f64)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Summary,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Summary => "summary",
        }
    }
}

impl Exposition {
    fn family(&mut self, name: &str, help: &str, kind: Kind) -> &mut Family {
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
        self.family(name, help, Kind::Gauge)
            .samples
            .push(("", labels.into(), value));
    }

    /// Adds a counter; its name ends in `_total`.
    pub fn counter(&mut self, name: &str, help: &str, labels: &str, value: f64) {
        debug_assert!(name.ends_with("_total"), "counter {name}");
        self.family(name, help, Kind::Counter)
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
        let family = self.family(name, help, Kind::Summary);
        for (q, v) in quantiles {
            family.samples.push(("", format!("quantile=\"{q}\""), *v));
        }
        family.samples.push(("_sum", String::new(), sum));
        family.samples.push(("_count", String::new(), count as f64));
    }

    /// The Prometheus text format, version 0.0.4: what every scraper reads.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let help = escape_help(&f.help, false);
            let _ = writeln!(out, "# HELP brokerbench_{} {help}", f.name);
            let _ = writeln!(out, "# TYPE brokerbench_{} {}", f.name, f.kind.as_str());
            f.write_samples(&mut out, &f.name);
        }
        out
    }

    /// The OpenMetrics text format, version 1.0.0, which Prometheus asks for first. It
    /// differs from [`render`](Self::render) where the specification does: a counter
    /// family is named without the `_total` that its sample keeps, help text escapes
    /// quotes, and the body ends with `# EOF`.
    pub fn render_openmetrics(&self) -> String {
        let mut out = String::new();
        for f in &self.families {
            let (family, sample) = match f.kind {
                Kind::Counter => {
                    let family = f.name.strip_suffix("_total").unwrap_or(&f.name);
                    (family, Cow::Owned(format!("{family}_total")))
                }
                Kind::Gauge | Kind::Summary => (f.name.as_str(), Cow::Borrowed(f.name.as_str())),
            };
            let _ = writeln!(out, "# TYPE brokerbench_{family} {}", f.kind.as_str());
            let help = escape_help(&f.help, true);
            let _ = writeln!(out, "# HELP brokerbench_{family} {help}");
            f.write_samples(&mut out, &sample);
        }
        out.push_str("# EOF\n");
        out
    }
}

impl Family {
    fn write_samples(&self, out: &mut String, name: &str) {
        for (suffix, labels, value) in &self.samples {
            let _ = write!(out, "brokerbench_{name}{suffix}");
            if !labels.is_empty() {
                let _ = write!(out, "{{{labels}}}");
            }
            out.push(' ');
            write_value(out, *value);
            out.push('\n');
        }
    }
}

/// Writes a sample value as both formats spell it: `+Inf`, `-Inf` and `NaN` (Rust would
/// write `inf`), and otherwise the shortest digits that read back to the same number, with
/// an exponent where plain digits would run to hundreds of characters.
fn write_value(out: &mut String, value: f64) {
    let _ = if value.is_nan() {
        write!(out, "NaN")
    } else if value.is_infinite() {
        write!(out, "{}", if value > 0.0 { "+Inf" } else { "-Inf" })
    } else if value != 0.0 && !(1e-4..1e16).contains(&value.abs()) {
        write!(out, "{value:e}")
    } else {
        write!(out, "{value}")
    };
}

/// Help text escaped as a `# HELP` line needs: backslash and line feed in both formats,
/// and the double quote too in OpenMetrics.
fn escape_help(help: &str, quotes: bool) -> Cow<'_, str> {
    if !(help.contains(['\\', '\n']) || quotes && help.contains('"')) {
        return Cow::Borrowed(help);
    }
    let mut escaped = String::with_capacity(help.len() + 8);
    for c in help.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '\n' => escaped.push_str("\\n"),
            '"' if quotes => escaped.push_str("\\\""),
            c => escaped.push(c),
        }
    }
    Cow::Owned(escaped)
}

/// The formats served at `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    PrometheusText,
    /// Versions 0.0.1 (what early clients ask for) and 1.0.0 are written alike; the
    /// response names the one the client asked for.
    OpenMetrics {
        version: &'static str,
    },
}

/// The formats in the order that wins when a client weighs several equally: the classic
/// text first, since a client sending `*/*` or no `Accept` may not know OpenMetrics.
const FORMATS: [Format; 3] = [
    Format::PrometheusText,
    Format::OpenMetrics { version: "1.0.0" },
    Format::OpenMetrics { version: "0.0.1" },
];

impl Format {
    /// (type, subtype, version) as `Accept` names them.
    fn media_type(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Format::PrometheusText => ("text", "plain", "0.0.4"),
            Format::OpenMetrics { version } => ("application", "openmetrics-text", version),
        }
    }

    fn content_type(self) -> String {
        let (kind, subtype, version) = self.media_type();
        format!("{kind}/{subtype}; version={version}; charset=utf-8")
    }
}

/// The format a scraper prefers by its `Accept` weights, as Prometheus's own client
/// libraries choose.
fn negotiate(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::PrometheusText;
    };
    let ranges = http::media_ranges(accept);
    let mut chosen = (Format::PrometheusText, 0.0);
    for format in FORMATS {
        let (kind, subtype, version) = format.media_type();
        let quality = http::quality(&ranges, kind, subtype, version);
        if quality > chosen.1 {
            chosen = (format, quality);
        }
    }
    // When nothing offered is acceptable, the text format is still the most useful answer:
    // RFC 9110 lets a server disregard `Accept` rather than answer 406.
    chosen.0
}

/// Connections served at once: Prometheus needs one, the rest leave room for browsers
/// and curl. One more is answered 503 straight away rather than queued behind them.
const MAX_CONNECTIONS: usize = 32;

/// How long a client may take to send its request head, and how long one write to it may
/// block, before its connection is dropped.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// How long to keep reading after answering, so that unread request bytes do not turn
/// the close into a reset that can destroy the response in flight.
const LINGER: Duration = Duration::from_secs(1);

const INDEX_PAGE: &str = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
    <title>brokerbench</title></head>\n<body><h1>brokerbench</h1>\n\
    <p>The running benchmark's live figures: <a href=\"/metrics\">/metrics</a></p>\n\
    </body></html>\n";

/// A small HTTP/1.1 server for the live figures: `/metrics` in the format the scraper
/// negotiates, a page pointing there at `/`, 404 elsewhere; GET and HEAD, 405 otherwise.
/// One thread sleeps in `accept` until a connection arrives, and each connection gets a
/// short-lived thread of its own (at most 32; one more is answered 503), so a slow or
/// silent client cannot hold up a scrape and an idle server costs no wake-ups during a run.
pub struct MetricsServer {
    address: SocketAddr,
    state: Arc<ServerState>,
    acceptor: Option<JoinHandle<()>>,
}

/// What the acceptor and connection threads share with the server's owner.
struct ServerState {
    /// The latest published families; each scrape renders them in its format, so
    /// publishing every second costs a clone, not two renderings nobody may read.
    exposition: Mutex<Arc<Exposition>>,
    /// Set by `Drop`; the acceptor checks it after each wake-up.
    stop: AtomicBool,
    /// Connection threads running now.
    connections: AtomicUsize,
}

impl MetricsServer {
    /// Listens on `address` (e.g. 127.0.0.1:9464; port 0 picks a free one).
    pub fn start(address: SocketAddr) -> io::Result<MetricsServer> {
        let listener = TcpListener::bind(address)?;
        let address = listener.local_addr()?;
        let state = Arc::new(ServerState {
            exposition: Mutex::new(Arc::new(Exposition::default())),
            stop: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
        });
        let acceptor = {
            let state = state.clone();
            std::thread::Builder::new()
                .name("metrics-listen".into())
                .spawn(move || accept_connections(listener, state))?
        };
        Ok(MetricsServer {
            address,
            state,
            acceptor: Some(acceptor),
        })
    }

    /// The address actually listened on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Replaces what is served.
    pub fn publish(&self, exposition: &Exposition) {
        *lock(&self.state.exposition) = Arc::new(exposition.clone());
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::Release);
        let Some(acceptor) = self.acceptor.take() else {
            return;
        };
        // The acceptor sleeps in `accept`; connecting to it is the portable way to wake it.
        let mut own = self.address;
        if own.ip().is_unspecified() {
            own.set_ip(match own {
                SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
            });
        }
        if TcpStream::connect_timeout(&own, Duration::from_secs(1)).is_ok() {
            let _ = acceptor.join();
        }
        // Otherwise it is left to end at its next connection: a join that may never
        // return would hang the end of the run.
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn accept_connections(listener: TcpListener, state: Arc<ServerState>) {
    for stream in listener.incoming() {
        if state.stop.load(Ordering::Acquire) {
            break;
        }
        let stream = match stream {
            Ok(stream) => stream,
            Err(e) => {
                // Running out of file descriptors and the like fail again at once; a pause
                // keeps the loop from spinning a core until they clear.
                if !matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionAborted
                        | io::ErrorKind::ConnectionReset
                        | io::ErrorKind::Interrupted
                ) {
                    std::thread::sleep(Duration::from_millis(100));
                }
                continue;
            }
        };
        let Some(slot) = ConnectionSlot::take(&state) else {
            turn_away(stream);
            continue;
        };
        // A failed spawn drops the closure, which closes the connection and frees the slot.
        let _ = std::thread::Builder::new()
            .name("metrics-scrape".into())
            .spawn(move || serve_connection(stream, &slot.0));
    }
}

/// One of the [`MAX_CONNECTIONS`] places, given back when its thread ends, even by a panic.
struct ConnectionSlot(Arc<ServerState>);

impl ConnectionSlot {
    fn take(state: &Arc<ServerState>) -> Option<ConnectionSlot> {
        if state.connections.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            state.connections.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(ConnectionSlot(state.clone()))
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Answers 503 on the acceptor's thread, which must not wait on this client.
fn turn_away(mut stream: TcpStream) {
    // Whatever request already arrived is read first, so that closing does not reset the
    // connection under the answer.
    if stream.set_nonblocking(true).is_ok() {
        let mut scratch = [0u8; 4096];
        for _ in 0..16 {
            if !matches!(stream.read(&mut scratch), Ok(n) if n > 0) {
                break;
            }
        }
    }
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(Duration::from_millis(100)));
    let mut response = Response::text(
        Status::ServiceUnavailable,
        "too many connections at once; retry",
    );
    response.headers.push(("Retry-After", "1"));
    let _ = response.write_to(&mut stream, true);
    let _ = stream.shutdown(Shutdown::Write);
}

fn serve_connection(mut stream: TcpStream, state: &ServerState) {
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let (response, with_body) = match http::read_head(&mut stream, Instant::now() + IO_TIMEOUT) {
        Err(HeadError::Silent) => return,
        Err(HeadError::Answer(status)) => (error_response(status), true),
        Ok(head) => match http::parse_head(&head) {
            Ok(request) => (respond(&request, state), request.method != "HEAD"),
            Err(status) => (error_response(status), true),
        },
    };
    if response.write_to(&mut stream, with_body).is_ok() {
        linger(stream);
    }
}

fn respond(request: &Request, state: &ServerState) -> Response {
    match request.path.as_str() {
        "/" | "/metrics" if !matches!(request.method.as_str(), "GET" | "HEAD") => {
            let mut response = error_response(Status::MethodNotAllowed);
            response.headers.push(("Allow", "GET, HEAD"));
            response
        }
        "/metrics" => {
            let format = negotiate(request.accept.as_deref());
            let exposition = lock(&state.exposition).clone();
            let body = match format {
                Format::PrometheusText => exposition.render(),
                Format::OpenMetrics { .. } => exposition.render_openmetrics(),
            };
            Response {
                status: Status::Ok,
                content_type: format.content_type(),
                // The body depends on `Accept`; a cache in between must not mix formats.
                headers: vec![("Vary", "Accept")],
                body: body.into_bytes(),
            }
        }
        "/" => Response {
            status: Status::Ok,
            content_type: "text/html; charset=utf-8".into(),
            headers: Vec::new(),
            body: INDEX_PAGE.as_bytes().to_vec(),
        },
        _ => error_response(Status::NotFound),
    }
}

fn error_response(status: Status) -> Response {
    let hint = match status {
        Status::NotFound => "the metrics are at /metrics",
        Status::MethodNotAllowed => "use GET or HEAD",
        Status::HeaderFieldsTooLarge => "the request head is over 64 KiB",
        Status::RequestTimeout => "the request head did not arrive within 5 s",
        Status::VersionNotSupported => "this server speaks HTTP/1.0 and HTTP/1.1",
        Status::ServiceUnavailable => "too many connections at once; retry",
        Status::Ok | Status::BadRequest => "malformed request head",
    };
    Response::text(status, hint)
}

/// Stops writing, then reads what the client still sends until it closes, for at most
/// [`LINGER`]: closing with unread bytes (a body, a pipelined request) would make the
/// kernel reset the connection, and a reset can discard the response before it is read.
fn linger(mut stream: TcpStream) {
    if stream.shutdown(Shutdown::Write).is_err() {
        return;
    }
    let deadline = Instant::now() + LINGER;
    let mut scratch = [0u8; 4096];
    let mut drained = 0;
    while drained < http::MAX_HEAD_BYTES {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut scratch) {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse;
    use std::io::Write;

    /// A response as a client sees it.
    #[derive(Debug)]
    struct Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    }

    impl Reply {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }
    }

    /// Sends `request` as is on a fresh connection and reads the response to the close.
    fn exchange(address: SocketAddr, request: &str) -> Reply {
        let mut stream = TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        stream.write_all(request.as_bytes()).unwrap();
        read_reply(&mut stream)
    }

    fn read_reply(stream: &mut TcpStream) -> Reply {
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let raw = String::from_utf8(raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").expect("a response head");
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        assert!(status_line.starts_with("HTTP/1.1 "), "{status_line}");
        Reply {
            status: status_line[9..12].parse().unwrap(),
            headers: lines
                .map(|line| {
                    let (name, value) = line.split_once(": ").expect("a header line");
                    (name.to_string(), value.to_string())
                })
                .collect(),
            body: body.to_string(),
        }
    }

    fn get(address: SocketAddr, path: &str, accept: Option<&str>) -> Reply {
        let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
        exchange(
            address,
            &format!("GET {path} HTTP/1.1\r\nHost: {address}\r\n{accept}\r\n"),
        )
    }

    fn figures() -> Exposition {
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
        e
    }

    fn server_with_figures() -> MetricsServer {
        let server = MetricsServer::start("127.0.0.1:0".parse().unwrap()).unwrap();
        server.publish(&figures());
        server
    }

    /// The Accept header Prometheus 2.x sends by default.
    const PROMETHEUS_2_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,\
        application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    /// The shape Prometheus 3.x sends: every range weighted, text/plain 1.0.0 in between.
    const PROMETHEUS_3_ACCEPT: &str = "application/openmetrics-text;version=1.0.0;q=0.5,\
        application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.1";

    #[test]
    fn served_text_parses_back() {
        let server = server_with_figures();
        let reply = get(server.address(), "/metrics", None);
        assert_eq!(reply.status, 200);
        assert_eq!(
            reply.header("Content-Type"),
            Some("text/plain; version=0.0.4; charset=utf-8")
        );
        let text = reply.body;
        let samples = parse(&text);
        assert_eq!(samples.len(), 5, "{text}");
        assert_eq!(samples[0].name, "brokerbench_acknowledged_per_second");
        assert_eq!(samples[0].value, 49_998.0);
        assert_eq!(samples[1].label("quantile"), Some("0.99"));
        assert_eq!(samples[2].name, "brokerbench_publish_latency_seconds_sum");
        assert_eq!(samples[3].value, 1000.0);
        assert!(text.contains("# TYPE brokerbench_publish_latency_seconds summary"));
        assert!(text.contains("# TYPE brokerbench_messages_sent_total counter"));
        assert!(!text.contains("# EOF"));
    }

    #[test]
    fn metrics_ignores_the_query_and_the_root_page_points_there() {
        let server = server_with_figures();
        let reply = get(server.address(), "/metrics?name[]=x", None);
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("Vary"), Some("Accept"));
        let root = get(server.address(), "/", None);
        assert_eq!(root.status, 200);
        assert!(root.body.contains("href=\"/metrics\""), "{}", root.body);
    }

    #[test]
    fn other_paths_are_404() {
        let server = server_with_figures();
        for path in ["/other", "/metrics/", "/favicon.ico"] {
            let reply = get(server.address(), path, None);
            assert_eq!(reply.status, 404, "{path}");
            assert!(reply.body.contains("/metrics"), "{}", reply.body);
            assert_eq!(
                reply.header("Content-Length"),
                Some(reply.body.len().to_string().as_str())
            );
        }
    }

    #[test]
    fn other_methods_are_405_with_allow() {
        let server = server_with_figures();
        let address = server.address();
        let post = exchange(
            address,
            &format!("POST /metrics HTTP/1.1\r\nHost: {address}\r\nContent-Length: 3\r\n\r\nx=1"),
        );
        assert_eq!(post.status, 405);
        assert_eq!(post.header("Allow"), Some("GET, HEAD"));
        let delete = exchange(address, "DELETE / HTTP/1.0\r\n\r\n");
        assert_eq!(delete.status, 405);
        assert_eq!(delete.header("Allow"), Some("GET, HEAD"));
    }

    #[test]
    fn head_has_the_length_and_no_body() {
        let server = server_with_figures();
        let address = server.address();
        let full = get(address, "/metrics", Some(PROMETHEUS_2_ACCEPT));
        let head = exchange(
            address,
            &format!(
                "HEAD /metrics HTTP/1.1\r\nHost: {address}\r\n\
                 Accept: {PROMETHEUS_2_ACCEPT}\r\n\r\n"
            ),
        );
        assert_eq!(head.status, 200);
        assert_eq!(head.body, "");
        assert_eq!(
            head.header("Content-Length"),
            Some(full.body.len().to_string().as_str())
        );
        assert_eq!(head.header("Content-Type"), full.header("Content-Type"));
    }

    #[test]
    fn silent_client_does_not_block_a_scrape() {
        let server = server_with_figures();
        let _silent = TcpStream::connect(server.address()).unwrap();
        let _half_sent = {
            let mut s = TcpStream::connect(server.address()).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\nHo").unwrap();
            s
        };
        let started = Instant::now();
        let reply = get(server.address(), "/metrics", None);
        assert_eq!(reply.status, 200);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn accept_header_chooses_the_format() {
        let server = server_with_figures();
        for accept in [PROMETHEUS_2_ACCEPT, PROMETHEUS_3_ACCEPT] {
            let reply = get(server.address(), "/metrics", Some(accept));
            assert_eq!(
                reply.header("Content-Type"),
                Some("application/openmetrics-text; version=1.0.0; charset=utf-8"),
                "{accept}"
            );
            assert!(reply.body.ends_with("\n# EOF\n"), "{}", reply.body);
            assert!(reply
                .body
                .contains("# TYPE brokerbench_messages_sent counter\n"));
            assert!(reply.body.contains("\nbrokerbench_messages_sent_total 7\n"));
        }
        for accept in [None, Some("text/plain"), Some("*/*"), Some("")] {
            let reply = get(server.address(), "/metrics", accept);
            assert_eq!(
                reply.header("Content-Type"),
                Some("text/plain; version=0.0.4; charset=utf-8"),
                "{accept:?}"
            );
        }

        let om = |version| Format::OpenMetrics { version };
        for (accept, format) in [
            (Some("application/json"), Format::PrometheusText),
            (Some("text/plain;q=0.9, application/*"), om("1.0.0")),
            (
                Some("application/openmetrics-text;version=0.0.1"),
                om("0.0.1"),
            ),
            (
                Some("application/openmetrics-text;version=2.0.0,text/plain;q=0.1"),
                Format::PrometheusText,
            ),
            (
                Some("text/plain;version=1.0.0;escaping=allow-utf-8;q=0.9,*/*;q=0.1"),
                Format::PrometheusText,
            ),
        ] {
            assert_eq!(negotiate(accept), format, "{accept:?}");
        }
    }

    #[test]
    fn openmetrics_rendering() {
        let mut e = figures();
        e.gauge(
            "phase",
            "1 for \"the\" current phase.",
            "phase=\"warmup\"",
            1.0,
        );
        e.gauge("phase", "", "phase=\"drain\"", 0.0);
        assert_eq!(
            e.render_openmetrics(),
            "# TYPE brokerbench_acknowledged_per_second gauge\n\
             # HELP brokerbench_acknowledged_per_second Messages acknowledged in the last second.\n\
             brokerbench_acknowledged_per_second 49998\n\
             # TYPE brokerbench_publish_latency_seconds summary\n\
             # HELP brokerbench_publish_latency_seconds Publish latency of the last second.\n\
             brokerbench_publish_latency_seconds{quantile=\"0.99\"} 0.0062\n\
             brokerbench_publish_latency_seconds_sum 12.5\n\
             brokerbench_publish_latency_seconds_count 1000\n\
             # TYPE brokerbench_messages_sent counter\n\
             # HELP brokerbench_messages_sent Messages sent.\n\
             brokerbench_messages_sent_total 7\n\
             # TYPE brokerbench_phase gauge\n\
             # HELP brokerbench_phase 1 for \\\"the\\\" current phase.\n\
             brokerbench_phase{phase=\"warmup\"} 1\n\
             brokerbench_phase{phase=\"drain\"} 0\n\
             # EOF\n"
        );
        assert!(e
            .render()
            .contains("# HELP brokerbench_phase 1 for \"the\" current phase.\n"));
    }

    #[test]
    fn special_values_are_written_as_the_formats_spell_them() {
        let mut e = Exposition::default();
        let values = [
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            1e300,
            1.5e-7,
            0.0,
            -2.5,
            9_007_199_254_740_992.0,
        ];
        for (i, v) in values.iter().enumerate() {
            e.gauge(
                "value",
                "Help with a \\ and a\nline feed.",
                &format!("i=\"{i}\""),
                *v,
            );
        }
        let text = e.render();
        for written in [
            "{i=\"0\"} +Inf\n",
            "{i=\"1\"} -Inf\n",
            "{i=\"2\"} NaN\n",
            "{i=\"3\"} 1e300\n",
            "{i=\"4\"} 1.5e-7\n",
            "{i=\"5\"} 0\n",
            "{i=\"6\"} -2.5\n",
            "{i=\"7\"} 9007199254740992\n",
        ] {
            assert!(text.contains(written), "{written} in {text}");
        }
        assert!(text.contains("# HELP brokerbench_value Help with a \\\\ and a\\nline feed.\n"));
        let parsed = parse(&text);
        assert_eq!(parsed.len(), values.len());
        for (sample, value) in parsed.iter().zip(values) {
            assert!(
                sample.value == value || (sample.value.is_nan() && value.is_nan()),
                "{sample:?}"
            );
        }
    }

    #[test]
    fn bad_heads_get_400_431_and_505() {
        let server = server_with_figures();
        let address = server.address();
        assert_eq!(exchange(address, "GET /metrics\r\n\r\n").status, 400);
        assert_eq!(
            exchange(address, "GET /metrics HTTP/1.1\r\n\r\n").status,
            400,
            "HTTP/1.1 without Host"
        );
        assert_eq!(
            exchange(address, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").status,
            505
        );
        let long = format!(
            "GET /metrics HTTP/1.1\r\nHost: {address}\r\nX-Padding: {}\r\n\r\n",
            "a".repeat(http::MAX_HEAD_BYTES)
        );
        assert_eq!(exchange(address, &long).status, 431);
    }

    #[test]
    fn connections_beyond_the_cap_get_503() {
        let server = server_with_figures();
        let address = server.address();
        let silent: Vec<TcpStream> = (0..MAX_CONNECTIONS)
            .map(|_| TcpStream::connect(address).unwrap())
            .collect();
        let mut one_more = TcpStream::connect(address).unwrap();
        one_more
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        let reply = read_reply(&mut one_more);
        assert_eq!(reply.status, 503);
        assert_eq!(reply.header("Retry-After"), Some("1"));
        drop(silent);
        // Their threads see the close and give their places back.
        let deadline = Instant::now() + Duration::from_secs(2);
        while server.state.connections.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(get(address, "/metrics", None).status, 200);
    }

    #[test]
    fn drop_returns_promptly() {
        let server = server_with_figures();
        let address = server.address();
        let _silent = TcpStream::connect(address).unwrap();
        assert_eq!(get(address, "/metrics", None).status, 200);
        let started = Instant::now();
        drop(server);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        assert!(TcpStream::connect(address).is_err(), "still listening");
    }
}
