//! A member of a subscription: a durable, shared subscription queue on the topic's multicast
//! address (`<client id>.<subscription name>`, every member with the same names shares it),
//! each delivery acknowledged on its own (`ack: client-individual`), the broker sending at
//! most `consumer_window_size` bytes ahead of the acknowledgements.

use std::time::Duration;

use brokerbench_driver::{Consumer, Deliveries, Delivery, Unread};

use crate::config::ArtemisUrl;
use crate::conn::Conn;
use crate::conn::Reconnector;
use crate::stomp::{push_number, write_frame};

pub struct ArtemisConsumer {
    conn: Conn,
    subscription: Subscription,
    /// Backlog mode's pause: the socket is not read (the broker's window fills and it stops
    /// sending), heart-beats go on.
    paused: bool,
    reconnector: Reconnector,
}

/// What a subscription member subscribes to.
pub struct Subscription {
    pub address: String,
    pub name: String,
    pub window: u64,
}

impl Subscription {
    /// The subscription's queue: `<address>.<name>` (the address is every member's client id).
    fn queue(&self) -> String {
        format!("{}.{}", self.address, self.name)
    }

    /// The SUBSCRIBE frame's headers, with `window` written out.
    fn headers<'a>(&'a self, window: &'a [u8]) -> [(&'a [u8], &'a [u8]); 7] {
        [
            (b"id", b"0"),
            (b"destination", self.address.as_bytes()),
            (b"subscription-type", b"MULTICAST"),
            (b"durable-subscription-name", self.name.as_bytes()),
            (b"shared-subscription-name", self.name.as_bytes()),
            (b"ack", b"client-individual"),
            (b"consumer-window-size", window),
        ]
    }

    fn window(&self) -> Vec<u8> {
        let mut window = Vec::new();
        push_number(&mut window, self.window);
        window
    }

    /// Subscribes on `conn` (connected with the subscription's client id) and waits for the
    /// broker's receipt: the queue exists once this returns. Only for a new queue: frames
    /// before the receipt are dropped, and a new queue has no messages yet.
    fn create(&self, conn: &mut Conn) -> Result<(), String> {
        let window = self.window();
        conn.request(b"SUBSCRIBE", &self.headers(&window), crate::ADMIN_TIMEOUT)
    }

    /// Subscribes again on a new connection without waiting: the queue holds what came
    /// meanwhile, and its deliveries may come before any receipt would; a refusal comes as
    /// an ERROR to the next poll.
    fn resume(&self, conn: &mut Conn) {
        let window = self.window();
        write_frame(conn.link.out(), b"SUBSCRIBE", &self.headers(&window), b"");
    }
}

impl ArtemisConsumer {
    pub fn new(
        mut conn: Conn,
        reconnector: Reconnector,
        subscription: Subscription,
    ) -> Result<Self, String> {
        subscription.create(&mut conn)?;
        Ok(ArtemisConsumer {
            conn,
            subscription,
            paused: false,
            reconnector,
        })
    }

    /// Connects and subscribes again when due: what was delivered and not acknowledged
    /// before the loss comes again (a refused SUBSCRIBE breaks the new connection in `poll`).
    fn recover(&mut self, timeout: Duration) {
        if self.reconnector.recover_into(&mut self.conn, timeout) {
            self.subscription.resume(&mut self.conn);
        }
    }
}

impl Consumer for ArtemisConsumer {
    fn poll(&mut self, timeout: Duration, deliveries: Deliveries<'_>) -> Result<(), String> {
        if self.reconnector.is_lost() {
            self.recover(timeout);
            return Ok(());
        }
        if self.paused {
            std::thread::sleep(timeout);
            return self
                .conn
                .heart_beat()
                .inspect_err(|kind| self.reconnector.lose(kind));
        }
        let mut error = None;
        let result = self
            .conn
            .poll(timeout, &mut |frame, out| match frame.command {
                b"MESSAGE" => {
                    deliveries(Delivery {
                        stream: 0,
                        payload: frame.body,
                        received_ns: None,
                        slot: 0,
                    });
                    if let Some(id) = frame.header(b"ack") {
                        write_frame(out, b"ACK", &[(b"id", id)], b"");
                    }
                }
                b"ERROR" => error = Some(frame.error_text()),
                _ => {}
            });
        let failed = match (result, error) {
            (Err(kind), _) => kind,
            (Ok(_), Some(text)) => crate::producer::kind_of(&text),
            (Ok(_), None) => return Ok(()),
        };
        self.reconnector.lose(&failed);
        Err(failed)
    }

    fn assigned(&self, _slot: usize) -> usize {
        1
    }

    fn pause(&mut self, paused: bool) -> bool {
        self.paused = paused;
        true
    }

    /// The subscription queue's message count, asked on a connection of its own (also when
    /// this member's connection was lost: the durable queue outlives it): what it stores and
    /// no consumer acknowledged, deliveries this member was sent and did not hand on included
    /// (the broker delivers those again). Every member names the queue alike.
    ///
    /// The queue's executor is flushed first: Artemis acknowledges a send once the message is
    /// in the journal and handed to the queue, but the queue counts it only after its executor
    /// has taken it in, which an overloaded broker may do late (counted at once, runs on a
    /// saturated host called some of the messages acknowledged in their last seconds lost).
    fn unread(&mut self) -> Option<Vec<Unread>> {
        let queue = self.subscription.queue();
        let resource = format!("queue.{queue}");
        let url = &self.reconnector.target().0;
        // A flush refused or not over in time leaves the count as it is; a broker that cannot
        // be reached has no count to give.
        let _flushed = operate(url, &resource, "flushExecutor", FLUSH_WITHIN)?;
        let answer = operate(url, &resource, "countMessages", COUNT_WITHIN)?.ok()?;
        let count = serde_json::from_str::<serde_json::Value>(&answer).ok()?;
        Some(vec![Unread {
            slot: 0,
            place: queue,
            messages: count.get(0)?.as_u64()?,
            evidence: "ActiveMQ Artemis: the subscription queue's countMessages from its management API, what it stores and no consumer acknowledged",
        }])
    }
}

/// Management `operation` of `resource` without parameters, on a connection of its own (a late
/// answer to an earlier operation cannot be taken for its own) within `within`, its connection
/// within [`CONNECT_WITHIN`] of that: the operation's answer or why not; None when the broker
/// cannot be reached.
fn operate(
    url: &ArtemisUrl,
    resource: &str,
    operation: &str,
    within: Duration,
) -> Option<Result<String, String>> {
    let deadline = std::time::Instant::now() + within;
    let mut conn = Conn::connect(url, CONNECT_WITHIN, None).ok()?;
    let params = serde_json::json!([]);
    Some(crate::manage::invoke(
        &mut conn, resource, operation, &params, deadline,
    ))
}

/// The longest the flush of the subscription queue's executor is waited for, its connection
/// included (the broker gives up on its own after 10 s)...
const FLUSH_WITHIN: Duration = Duration::from_secs(11);

/// ... and the count after it.
const COUNT_WITHIN: Duration = Duration::from_secs(5);

/// How long a connection for either may take (a broker that is gone or paused does not hold
/// up the run's end).
const CONNECT_WITHIN: Duration = Duration::from_secs(5);
