//! Artemis's management API over STOMP: an operation is a text message to the address
//! `activemq.management` naming the resource (`broker`, `queue.<name>`) and the operation, its parameters a
//! JSON array; the broker answers on the message's `reply-to` address, its
//! `_AMQ_OperationSucceeded` header saying whether the operation worked and its body what it
//! returned (or why not).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::conn::Conn;
use crate::stomp::write_text_frame;

const MANAGEMENT: &[u8] = b"activemq.management";

/// Invokes `operation` of `resource` (`broker`, `queue.<name>`, ...) with `params` on `conn`
/// (a connection that receives nothing else) and returns its answer's body; Err: the broker's reason, or no answer within
/// `timeout`. The answer comes to an anycast address of the connection's own, subscribed to for the call.
pub fn invoke(
    conn: &mut Conn,
    resource: &str,
    operation: &str,
    params: &serde_json::Value,
    timeout: Duration,
) -> Result<String, String> {
    static ASKED: AtomicU64 = AtomicU64::new(0);
    let asked = ASKED.fetch_add(1, Ordering::Relaxed);
    let reply = format!("brokerbench.management.{}.{asked}", std::process::id());
    let subscribe: [(&[u8], &[u8]); 3] = [
        (b"id", b"management"),
        (b"destination", reply.as_bytes()),
        (b"subscription-type", b"ANYCAST"),
    ];
    conn.request(b"SUBSCRIBE", &subscribe, timeout)?;
    let send: [(&[u8], &[u8]); 5] = [
        (b"destination", MANAGEMENT),
        (b"destination-type", b"ANYCAST"),
        (b"_AMQ_ResourceName", resource.as_bytes()),
        (b"_AMQ_OperationName", operation.as_bytes()),
        (b"reply-to", reply.as_bytes()),
    ];
    write_text_frame(conn.out(), b"SEND", &send, &params.to_string());
    let answered = answer(conn, operation, timeout);
    conn.request(b"UNSUBSCRIBE", &[(b"id", b"management")], timeout)?;
    answered
}

/// Waits for the management answer on the connection's one subscription.
fn answer(conn: &mut Conn, operation: &str, timeout: Duration) -> Result<String, String> {
    let deadline = Instant::now() + timeout;
    let mut answer = None;
    while answer.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("no answer to {operation} within {timeout:?}"));
        }
        conn.poll(left, &mut |frame, _| match frame.command {
            b"MESSAGE" => {
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
