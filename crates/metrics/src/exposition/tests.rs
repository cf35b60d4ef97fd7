use super::http;
use super::respond::{negotiate, Format};
use super::server::MAX_CONNECTIONS;
use super::*;
use crate::text::parse;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
fn a_dashboard_server_answers_with_its_pages_uncached_and_serves_no_metrics() {
    let pages: Pages = Arc::new(|path: &str| {
        (path == "/").then(|| Page {
            content_type: "text/html; charset=utf-8",
            body: b"<p>live</p>".to_vec(),
        })
    });
    let server = MetricsServer::serve_pages("127.0.0.1:0".parse().unwrap(), pages).unwrap();
    server.publish(&figures());
    let root = get(server.address(), "/?t=1", None);
    assert_eq!((root.status, root.body.as_str()), (200, "<p>live</p>"));
    assert_eq!(root.header("Cache-Control"), Some("no-store"));
    let metrics = get(server.address(), "/metrics", None);
    assert_eq!(metrics.status, 404);
    assert!(
        metrics.body.contains("the dashboard is at /"),
        "{}",
        metrics.body
    );
    let post = exchange(
        server.address(),
        "POST / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    assert_eq!(post.status, 405);
    // A name that only resolves to loopback (DNS rebinding) is refused; loopback names are not.
    let rebound = exchange(
        server.address(),
        "GET / HTTP/1.1\r\nHost: attacker.example:8080\r\n\r\n",
    );
    assert_eq!(rebound.status, 403);
    for host in [
        "127.0.0.1.attacker.example",
        "localhost.attacker.example",
        "",
    ] {
        let reply = exchange(
            server.address(),
            &format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        );
        assert_eq!(reply.status, 403, "{host}");
    }
    for host in [
        "localhost:1",
        "localhost.",
        "127.0.0.1",
        "[::1]:8080",
        "127.0.0.2:80",
        "[::ffff:127.0.0.1]",
    ] {
        let reply = exchange(
            server.address(),
            &format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n"),
        );
        assert_eq!(reply.status, 200, "{host}");
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
