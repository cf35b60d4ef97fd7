//! A member of a subscription: a durable, shared subscription queue on the topic's multicast
//! address (`<client id>.<subscription name>`, every member with the same names shares it),
//! each delivery acknowledged on its own (`ack: client-individual`), the broker sending at
//! most `consumer_window_size` bytes ahead of the acknowledgements.

use std::time::Duration;

use brokerbench_driver::{Consumer, Delivery};

use crate::conn::Conn;
use crate::stomp::{push_number, write_frame};

pub struct ArtemisConsumer {
    conn: Conn,
    /// Set once the connection is gone (reported once; later polls wait).
    broken: bool,
}

/// The SUBSCRIBE frame of a subscription member.
pub struct Subscription<'a> {
    pub address: &'a str,
    pub name: &'a str,
    pub window: u64,
}

impl ArtemisConsumer {
    /// Subscribes on `conn` (connected with the subscription's client id) and waits for the
    /// broker's receipt: the queue exists once this returns.
    pub fn new(mut conn: Conn, subscription: &Subscription<'_>) -> Result<Self, String> {
        let mut window = Vec::new();
        push_number(&mut window, subscription.window);
        conn.request(
            b"SUBSCRIBE",
            &[
                (b"id", b"0"),
                (b"destination", subscription.address.as_bytes()),
                (b"subscription-type", b"MULTICAST"),
                (b"durable-subscription-name", subscription.name.as_bytes()),
                (b"shared-subscription-name", subscription.name.as_bytes()),
                (b"ack", b"client-individual"),
                (b"consumer-window-size", &window),
            ],
            crate::ADMIN_TIMEOUT,
        )?;
        Ok(ArtemisConsumer {
            conn,
            broken: false,
        })
    }
}

impl Consumer for ArtemisConsumer {
    fn poll(
        &mut self,
        timeout: Duration,
        deliveries: &mut dyn FnMut(Delivery<'_>),
    ) -> Result<(), String> {
        if self.broken {
            std::thread::sleep(timeout);
            return Ok(());
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
        match (result, error) {
            (Err(kind), _) => {
                self.broken = true;
                Err(kind)
            }
            (Ok(_), Some(text)) => {
                self.broken = true;
                Err(format!("broker_error: {text}"))
            }
            (Ok(_), None) => Ok(()),
        }
    }

    fn assigned(&self, _slot: usize) -> usize {
        1
    }
}
