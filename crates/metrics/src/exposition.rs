//! brokerbench's live figures served over HTTP (`--metrics-listen 127.0.0.1:9464`) for a
//! Prometheus server and Grafana to show a run while it runs: the families and their two
//! renderings (Prometheus text 0.0.4 and OpenMetrics 1.0.0, chosen per scrape from
//! `Accept`), and the small server that answers scrapes; the same server serves the live
//! dashboard's pages (`--dashboard`), which the caller builds.

mod cost;
mod http;

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Read};
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use self::cost::AnswerCost;
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

/// A page the server answers with instead of the figures (the live dashboard's): its media
/// type and body, built when asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

/// What a dashboard server answers a GET of each path with: `None` is 404. Called on the
/// connection's own thread, so it may take a few milliseconds without holding up another.
pub type Pages = Arc<dyn Fn(&str) -> Option<Page> + Send + Sync>;

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
    /// Those of them writing an answer (or lingering after it).
    answering: AtomicUsize,
    /// A dashboard server's pages (it serves no `/metrics`).
    pages: Option<Pages>,
    /// Listening on loopback only: requests must name a loopback host (below).
    loopback: bool,
    /// What answering has cost.
    cost: AnswerCost,
}

impl MetricsServer {
    /// Listens on `address` (e.g. 127.0.0.1:9464; port 0 picks a free one).
    pub fn start(address: SocketAddr) -> io::Result<MetricsServer> {
        Self::listen(address, None)
    }

    /// Listens on `address` and answers every GET with `pages` (the dashboard); no
    /// `/metrics` here.
    pub fn serve_pages(address: SocketAddr, pages: Pages) -> io::Result<MetricsServer> {
        Self::listen(address, Some(pages))
    }

    fn listen(address: SocketAddr, pages: Option<Pages>) -> io::Result<MetricsServer> {
        let listener = TcpListener::bind(address)?;
        let address = listener.local_addr()?;
        let state = Arc::new(ServerState {
            exposition: Mutex::new(Arc::new(Exposition::default())),
            stop: AtomicBool::new(false),
            connections: AtomicUsize::new(0),
            answering: AtomicUsize::new(0),
            cost: AnswerCost::default(),
            pages,
            loopback: address.ip().is_loopback(),
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

    /// Requests answered so far, and the CPU time their threads used (each connection's
    /// thread serves one; a connection that sent nothing adds its CPU, not a request).
    pub fn answer_cost(&self) -> (u64, Duration) {
        self.state.cost.so_far()
    }

    /// Replaces what is served.
    pub fn publish(&self, exposition: &Exposition) {
        *lock(&self.state.exposition) = Arc::new(exposition.clone());
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl MetricsServer {
    /// Stops listening and lets the answers being written finish (what dropping it does; a
    /// second call does nothing more).
    pub fn shutdown(&mut self) {
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
        // Answers being written are let finish (a dashboard's final page), for at most
        // the linger and a second: the process may exit next, cutting them off.
        let deadline = Instant::now() + LINGER + Duration::from_secs(1);
        while self.state.answering.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
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
    let head = match http::read_head(&mut stream, Instant::now() + IO_TIMEOUT) {
        Err(HeadError::Silent) => {
            state.cost.add_this_thread(false);
            return;
        }
        Err(HeadError::Answer(status)) => Err(status),
        Ok(head) => Ok(head),
    };
    // Counted from here, so that an answer being built when the server is dropped is
    // waited for too.
    let _answering = Answering::count(state);
    let (response, with_body) = match head {
        Err(status) => (error_response(status), true),
        Ok(head) => match http::parse_head(&head) {
            Ok(request) => (respond(&request, state), request.method != "HEAD"),
            Err(status) => (error_response(status), true),
        },
    };
    if response.write_to(&mut stream, with_body).is_ok() {
        linger(stream);
    }
}

/// One connection answering a request, counted until it has written and lingered (or
/// panicked); its thread's CPU is added to [`ServerState::cost`] before it stops counting, so
/// a dropped server has every answer's cost.
struct Answering<'a>(&'a ServerState);

impl<'a> Answering<'a> {
    fn count(state: &'a ServerState) -> Answering<'a> {
        state.answering.fetch_add(1, Ordering::AcqRel);
        Answering(state)
    }
}

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        self.0.cost.add_this_thread(true);
        self.0.answering.fetch_sub(1, Ordering::AcqRel);
    }
}

fn respond(request: &Request, state: &ServerState) -> Response {
    if let Some(pages) = &state.pages {
        if state.loopback && !names_loopback(request.host.as_deref()) {
            return Response::text(
                Status::Forbidden,
                "this dashboard answers requests for 127.0.0.1, [::1] or localhost only",
            );
        }
        return respond_with_page(request, pages);
    }
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

/// Whether a request's `Host` is a loopback name or address. A page on another site that
/// makes its own name resolve to 127.0.0.1 (DNS rebinding) could otherwise read a dashboard
/// on loopback from the viewer's browser; its requests carry that name.
fn names_loopback(host: Option<&str>) -> bool {
    let Some(host) = host else {
        // HTTP/1.0 without Host: not from a browser.
        return true;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// A dashboard's answer: never cached, since it changes every second.
fn respond_with_page(request: &Request, pages: &Pages) -> Response {
    if !matches!(request.method.as_str(), "GET" | "HEAD") {
        let mut response = error_response(Status::MethodNotAllowed);
        response.headers.push(("Allow", "GET, HEAD"));
        return response;
    }
    match pages(&request.path) {
        Some(page) => Response {
            status: Status::Ok,
            content_type: page.content_type.into(),
            headers: vec![("Cache-Control", "no-store")],
            body: page.body,
        },
        None => Response::text(Status::NotFound, "the dashboard is at /"),
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
        Status::Ok | Status::BadRequest | Status::Forbidden => "malformed request head",
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
mod tests;
