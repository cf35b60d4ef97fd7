//! The admin connection, on amqprs: declaring, binding and deleting exchanges and queues
//! (the message path has its own connections, see [`crate::session`]). It runs on a
//! current-thread tokio runtime owned by the connection and driven by whichever thread is
//! inside `block_on`.
//!
//! amqprs spawns tasks when its handles drop, so every drop of a connection or channel
//! happens inside this runtime's context (see the `Drop` impls).

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use amqprs::callbacks::ChannelCallback;
use amqprs::channel::Channel;
use amqprs::connection::{Connection, OpenConnectionArguments};
use amqprs::{Ack, BasicProperties, Cancel, CloseChannel, Nack, Return};
use brokerbench_driver::DriverError;
use brokerbench_model::driver_config::AmqpUri;
use tokio::runtime::Runtime;

use crate::naming::Argument;

/// How long opening a connection may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long declaring, binding or deleting one object may take.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long closing a channel or connection may hold up the end of a run.
pub const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Kind of a send or poll failure after the connection was lost.
pub const CONNECTION_CLOSED: &str = "connection_closed";
/// Kind of a send or poll failure after the broker closed the channel.
pub const CHANNEL_CLOSED: &str = "channel_closed";

/// A connection with its runtime.
pub struct Link {
    connection: Option<Connection>,
    runtime: Runtime,
}

impl Link {
    /// Opens a connection named `name` (shown in the management UI) within [`CONNECT_TIMEOUT`].
    pub fn open(uri: &AmqpUri, name: &str) -> Result<Link, DriverError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| DriverError::Other(format!("starting a tokio runtime: {e}")))?;
        let mut arguments =
            OpenConnectionArguments::new(&uri.host, uri.port, &uri.username, uri.password());
        arguments.virtual_host(&uri.vhost).connection_name(name);
        if let Some(heartbeat) = uri.heartbeat {
            arguments.heartbeat(heartbeat);
        }
        let _entered = runtime.enter();
        let opened = runtime.block_on(async {
            tokio::time::timeout(CONNECT_TIMEOUT, Connection::open(&arguments)).await
        });
        let connection = match opened {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => {
                let reason = e.to_string();
                return Err(if reason.contains("refused") || reason.contains("reset") {
                    DriverError::Unreachable {
                        broker: "rabbitmq",
                        address: uri.address(),
                        reason,
                        hint: crate::HINT.into(),
                    }
                } else {
                    DriverError::Other(format!(
                        "opening an AMQP connection to {}: {reason}",
                        uri.address()
                    ))
                });
            }
            Err(_) => {
                return Err(DriverError::Unreachable {
                    broker: "rabbitmq",
                    address: uri.address(),
                    reason: format!("the AMQP handshake did not finish within {CONNECT_TIMEOUT:?}"),
                    hint: crate::HINT.into(),
                })
            }
        };
        drop(_entered);
        Ok(Link {
            connection: Some(connection),
            runtime,
        })
    }

    /// Runs `future` to completion on this connection's runtime, driving its I/O meanwhile.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Like [`Link::block_on`], giving up after `limit`.
    pub fn block_on_for<F: Future>(&self, limit: Duration, future: F) -> Option<F::Output> {
        self.runtime
            .block_on(async { tokio::time::timeout(limit, future).await.ok() })
    }

    /// Enters the runtime's context, as amqprs needs when its handles are dropped.
    pub fn enter(&self) -> tokio::runtime::EnterGuard<'_> {
        self.runtime.enter()
    }

    pub fn connection(&self) -> &Connection {
        self.connection.as_ref().expect("open until dropped")
    }

    pub fn is_open(&self) -> bool {
        self.connection().is_open()
    }

    /// Opens a channel whose callbacks report into `events`.
    pub fn channel(&self, events: &Arc<ChannelEvents>) -> Result<Channel, DriverError> {
        let _entered = self.enter();
        let connection = self.connection();
        let opened = self.block_on_for(ADMIN_TIMEOUT, async {
            let channel = connection.open_channel(None).await?;
            channel
                .register_callback(ChannelEventSink(events.clone()))
                .await?;
            Ok::<_, amqprs::error::Error>(channel)
        });
        match opened {
            Some(Ok(channel)) => Ok(channel),
            Some(Err(e)) => Err(DriverError::Other(format!("opening an AMQP channel: {e}"))),
            None => Err(DriverError::Other(format!(
                "opening an AMQP channel took longer than {ADMIN_TIMEOUT:?}"
            ))),
        }
    }

    /// Closes `channel` (its queued frames go out first), within [`CLOSE_TIMEOUT`].
    pub fn close_channel(&self, channel: Channel) {
        let _entered = self.enter();
        if channel.is_open() && self.is_open() {
            let _ = self.block_on_for(CLOSE_TIMEOUT, channel.close());
        } else {
            drop(channel);
        }
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _entered = self.runtime.enter();
        if let Some(connection) = self.connection.take() {
            if connection.is_open() {
                let _ = self.runtime.block_on(async {
                    tokio::time::timeout(CLOSE_TIMEOUT, connection.close()).await
                });
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the broker said when it closed an admin channel.
#[derive(Default)]
pub struct ChannelEvents {
    /// Why the broker closed the channel (`404 NOT_FOUND - ...`), if it did.
    closed: Mutex<Option<String>>,
}

impl ChannelEvents {
    pub fn close_reason(&self) -> Option<String> {
        lock(&self.closed).clone()
    }
}

struct ChannelEventSink(Arc<ChannelEvents>);

#[async_trait::async_trait]
impl ChannelCallback for ChannelEventSink {
    async fn close(
        &mut self,
        _: &Channel,
        close: CloseChannel,
    ) -> Result<(), amqprs::error::Error> {
        *lock(&self.0.closed) = Some(format!("{} {}", close.reply_code(), close.reply_text()));
        Ok(())
    }
    async fn cancel(&mut self, _: &Channel, _: Cancel) -> Result<(), amqprs::error::Error> {
        Ok(())
    }
    async fn flow(&mut self, _: &Channel, active: bool) -> Result<bool, amqprs::error::Error> {
        Ok(active)
    }
    async fn publish_ack(&mut self, _: &Channel, _: Ack) {}
    async fn publish_nack(&mut self, _: &Channel, _: Nack) {}
    async fn publish_return(&mut self, _: &Channel, _: Return, _: BasicProperties, _: Vec<u8>) {}
}

/// Converts argument pairs into an AMQP field table.
pub fn field_table(arguments: &[(&'static str, Argument)]) -> amqprs::FieldTable {
    let mut table = amqprs::FieldTable::new();
    for (name, value) in arguments {
        let value = match value {
            Argument::Text(t) => amqprs::FieldValue::from(t.clone()),
            Argument::Integer(n) => amqprs::FieldValue::l(*n),
        };
        table.insert((*name).try_into().expect("argument names are short"), value);
    }
    table
}
