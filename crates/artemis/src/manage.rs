//! Artemis's management API over STOMP: an operation is a text message to the address
//! `activemq.management` naming the resource (`broker`, `queue.<name>`) and the operation,
//! its parameters a JSON array; the broker answers on the message's `reply-to` address, its
//! `_AMQ_OperationSucceeded` header saying whether the operation worked and its body what it
//! returned (or why not). On a broker with security on, the user needs the `manage`
//! permission on `activemq.management`, and on `brokerbench.management.#` those to have an
//! address and queue created on first use and to consume from them. (With Artemis's
//! `management-message-rbac` on, `countMessages` is a view and `flushExecutor` an update: a user
//! allowed views only still gets the count, unflushed.)

use std::hash::{BuildHasher, Hasher};
use std::time::{Duration, Instant};

use crate::conn::Conn;
use crate::stomp::write_text_frame;

const MANAGEMENT: &[u8] = b"activemq.management";

/// Invokes `operation` of `resource` (`broker`, `queue.<name>`, ...) with `params` on `conn`
/// (a connection that receives nothing else) and returns its answer's body; Err: the broker's
/// reason, or no answer by `deadline`. The answer comes to an anycast address of this call's
/// own (`brokerbench.management.<random>`), subscribed to for the call; the broker deletes it
/// once it is unused (its auto-delete).
pub fn invoke(
    conn: &mut Conn,
    resource: &str,
    operation: &str,
    params: &serde_json::Value,
    deadline: Instant,
) -> Result<String, String> {
    let reply = format!("brokerbench.management.{:016x}", random());
    let subscribe: [(&[u8], &[u8]); 3] = [
        (b"id", reply.as_bytes()),
        (b"destination", reply.as_bytes()),
        (b"subscription-type", b"ANYCAST"),
    ];
    conn.request(b"SUBSCRIBE", &subscribe, left(deadline))?;
    let send: [(&[u8], &[u8]); 5] = [
        (b"destination", MANAGEMENT),
        (b"destination-type", b"ANYCAST"),
        (b"_AMQ_ResourceName", resource.as_bytes()),
        (b"_AMQ_OperationName", operation.as_bytes()),
        (b"reply-to", reply.as_bytes()),
    ];
    write_text_frame(conn.link.out(), b"SEND", &send, &params.to_string());
    let answered = answer(conn, &reply, operation, deadline);
    // Not needed for the answer, and each call subscribes under an id of its own.
    let _ = conn.request(b"UNSUBSCRIBE", &[(b"id", reply.as_bytes())], left(deadline));
    answered
}

/// What is left until `deadline` (at least a moment, so that a late step still sends).
fn left(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1))
}

/// A random number (the OS seeds std's hasher keys): reply addresses of two processes, on
/// two hosts or in two containers with the same pid, do not meet.
fn random() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    hasher.finish()
}

/// Waits for the management answer on the call's subscription (its id `subscription`).
fn answer(
    conn: &mut Conn,
    subscription: &str,
    operation: &str,
    deadline: Instant,
) -> Result<String, String> {
    let mut answer = None;
    while answer.is_none() {
        if Instant::now() >= deadline {
            return Err(format!("no answer to {operation} in time"));
        }
        conn.poll(left(deadline), &mut |frame, _| match frame.command {
            b"MESSAGE" if frame.header(b"subscription") == Some(subscription.as_bytes()) => {
                let body = String::from_utf8_lossy(frame.body).into_owned();
                answer = Some(match frame.header(b"_AMQ_OperationSucceeded") {
                    Some(b"true") => Ok(body),
                    _ => Err(format!("{operation} refused: {}", body.trim())),
                });
            }
            b"ERROR" => answer = Some(Err(frame.error_text())),
            _ => {}
        })?;
    }
    answer.expect("the loop ends with an answer")
}
