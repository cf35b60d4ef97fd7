//! The small HTTP/1.1 server that answers scrapes: one thread accepting connections, a
//! short-lived thread for each (at most 32), and a shutdown that lets answers finish.

use std::io::{self, Read};
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::cost::AnswerCost;
use super::families::Exposition;
use super::http::{self, HeadError, Response, Status};
use super::respond::{error_response, respond};
use super::state::{lock, Pages, ServerState};

/// Connections served at once: Prometheus needs one, the rest leave room for browsers
/// and curl. One more is answered 503 straight away rather than queued behind them.
pub(super) const MAX_CONNECTIONS: usize = 32;

/// How long a client may take to send its request head, and how long one write to it may
/// block, before its connection is dropped.
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// How long to keep reading after answering, so that unread request bytes do not turn
/// the close into a reset that can destroy the response in flight.
const LINGER: Duration = Duration::from_secs(1);

/// A small HTTP/1.1 server for the live figures: `/metrics` in the format the scraper
/// negotiates, a page pointing there at `/`, 404 elsewhere; GET and HEAD, 405 otherwise.
/// One thread sleeps in `accept` until a connection arrives, and each connection gets a
/// short-lived thread of its own (at most 32; one more is answered 503), so a slow or
/// silent client cannot hold up a scrape and an idle server costs no wake-ups during a run.
pub struct MetricsServer {
    address: SocketAddr,
    pub(super) state: Arc<ServerState>,
    acceptor: Option<JoinHandle<()>>,
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
