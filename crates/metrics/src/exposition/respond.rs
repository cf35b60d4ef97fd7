//! The answer to one request: `/metrics` in the format the scraper's `Accept` weighs
//! highest, the index page, a dashboard's pages (for a loopback host only), and errors.

use super::http::{self, Request, Response, Status};
use super::state::{lock, Pages, ServerState};

/// The formats served at `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
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
pub(super) fn negotiate(accept: Option<&str>) -> Format {
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

const INDEX_PAGE: &str = "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
    <title>brokerbench</title></head>\n<body><h1>brokerbench</h1>\n\
    <p>The running benchmark's live figures: <a href=\"/metrics\">/metrics</a></p>\n\
    </body></html>\n";

pub(super) fn respond(request: &Request, state: &ServerState) -> Response {
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

pub(super) fn error_response(status: Status) -> Response {
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
