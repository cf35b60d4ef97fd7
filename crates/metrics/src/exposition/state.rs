//! What the server's threads share with its owner: the latest published families, the
//! dashboard's pages, the connections counted and what answering has cost.

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};

use super::cost::AnswerCost;
use super::families::Exposition;

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

/// What the acceptor and connection threads share with the server's owner.
pub(super) struct ServerState {
    /// The latest published families; each scrape renders them in its format, so
    /// publishing every second costs a clone, not two renderings nobody may read.
    pub(super) exposition: Mutex<Arc<Exposition>>,
    /// Set by `Drop`; the acceptor checks it after each wake-up.
    pub(super) stop: AtomicBool,
    /// Connection threads running now.
    pub(super) connections: AtomicUsize,
    /// Those of them writing an answer (or lingering after it).
    pub(super) answering: AtomicUsize,
    /// A dashboard server's pages (it serves no `/metrics`).
    pub(super) pages: Option<Pages>,
    /// Listening on loopback only: requests must name a loopback host (below).
    pub(super) loopback: bool,
    /// What answering has cost.
    pub(super) cost: AnswerCost,
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}
