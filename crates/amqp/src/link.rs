//! One AMQP connection and the tokio runtime that drives it. amqprs runs a connection as
//! tasks (socket reader, socket writer, one dispatcher per channel). A consumer connection
//! (and an admin one) runs them on a current-thread runtime owned by the connection, driven
//! by whichever thread is inside `block_on` (in `poll`), so no extra thread and no cross-thread
//! hand-over sits on the delivery path. A producer connection runs them on a runtime with one
//! background I/O thread ([`Io::Background`]), so that confirms are read and timestamped as
//! they arrive even while the producer threads sleep between sends. Channels sharing a
//! connection share its runtime.
//!
//! amqprs spawns tasks when its handles drop, so every drop of a connection or channel
//! happens inside this runtime's context (see the `Drop` impls).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use amqprs::callbacks::ChannelCallback;
use amqprs::channel::Channel;
use amqprs::connection::{Connection, OpenConnectionArguments};
use amqprs::{Ack, BasicProperties, Cancel, CloseChannel, Nack, Return};
use brokerbench_driver::{Clock, DriverError, Envelope};
use brokerbench_model::driver_config::AmqpUri;
use tokio::runtime::Runtime;
use tokio::sync::Notify;

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

/// Which threads drive a connection's I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    /// Whichever thread is inside [`Link::block_on`].
    Caller,
    /// A background thread of the connection's own, always.
    Background,
}

/// A connection with its runtime.
pub struct Link {
    connection: Option<Connection>,
    runtime: Runtime,
}

impl Link {
    /// Opens a connection named `name` (shown in the management UI) within [`CONNECT_TIMEOUT`].
    pub fn open(uri: &AmqpUri, name: &str, io: Io) -> Result<Link, DriverError> {
        let mut builder = match io {
            Io::Caller => tokio::runtime::Builder::new_current_thread(),
            Io::Background => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(1).thread_name("amqp-io");
                b
            }
        };
        let runtime = builder
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

    /// Runs `future` as a task of this connection's runtime.
    pub fn spawn<F>(&self, future: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.runtime.spawn(future)
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

/// What a channel's dispatcher reported, in arrival order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelEvent {
    /// basic.ack (`ack`) or basic.nack from the broker in confirm mode, processed at `at_ns`
    /// ([`Clock::process`]).
    Confirm {
        tag: u64,
        multiple: bool,
        ack: bool,
        at_ns: u64,
    },
    /// basic.return of a mandatory message no queue took.
    Returned(Envelope),
}

/// Events of one channel, filled by its callback (on the runtime) and read by its owner.
#[derive(Default)]
pub struct ChannelEvents {
    events: Mutex<Vec<ChannelEvent>>,
    /// Woken when an event arrives (for owners waiting inside the runtime).
    pub arrived: Notify,
    /// Signalled when an event arrives (for owners waiting outside the runtime, see
    /// [`ChannelEvents::wait`]).
    ready: Condvar,
    /// Threads waiting on `ready`; changed only under the `events` lock. Signalling a condvar
    /// is a system call even with nobody waiting, so it is skipped then.
    waiting: AtomicUsize,
    /// Why the broker closed the channel (`404 NOT_FOUND - ...`), if it did.
    closed: Mutex<Option<String>>,
    /// Set when the broker cancelled the channel's consumer (e.g. its queue was deleted).
    cancelled: Mutex<bool>,
}

impl ChannelEvents {
    /// Moves the events that have arrived into `into` (which is expected to be empty).
    pub fn take(&self, into: &mut Vec<ChannelEvent>) {
        let mut events = lock(&self.events);
        if !events.is_empty() {
            std::mem::swap(&mut *events, into);
        }
    }

    /// Waits up to `timeout` for an event (or the channel's close or cancel) unless one has
    /// already arrived. For channels whose connection I/O runs on a background thread.
    pub fn wait(&self, timeout: Duration) {
        if timeout.is_zero() {
            return;
        }
        let events = lock(&self.events);
        if events.is_empty() && self.close_reason().is_none() && !self.cancelled() {
            self.waiting.fetch_add(1, Ordering::Relaxed);
            let (events, _) = self
                .ready
                .wait_timeout(events, timeout)
                .unwrap_or_else(|e| e.into_inner());
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            drop(events);
        }
    }

    /// Wakes the owner, whether it waits in [`ChannelEvents::wait`] or on `arrived`.
    fn signal(&self) {
        // Reading `waiting` under the lock orders this after a waiter's check of the
        // events, so no wake-up is missed.
        let waiting = {
            let _events = lock(&self.events);
            self.waiting.load(Ordering::Relaxed)
        };
        if waiting > 0 {
            self.ready.notify_all();
        }
        self.arrived.notify_one();
    }

    pub fn is_empty(&self) -> bool {
        lock(&self.events).is_empty()
    }

    pub fn close_reason(&self) -> Option<String> {
        lock(&self.closed).clone()
    }

    pub fn cancelled(&self) -> bool {
        *lock(&self.cancelled)
    }

    fn push(&self, event: ChannelEvent) {
        let waiting = {
            let mut events = lock(&self.events);
            events.push(event);
            self.waiting.load(Ordering::Relaxed)
        };
        if waiting > 0 {
            self.ready.notify_all();
        }
        self.arrived.notify_one();
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
        self.0.signal();
        Ok(())
    }
    async fn cancel(&mut self, _: &Channel, _: Cancel) -> Result<(), amqprs::error::Error> {
        *lock(&self.0.cancelled) = true;
        self.0.signal();
        Ok(())
    }
    async fn flow(&mut self, _: &Channel, active: bool) -> Result<bool, amqprs::error::Error> {
        Ok(active)
    }
    async fn publish_ack(&mut self, _: &Channel, ack: Ack) {
        self.0.push(ChannelEvent::Confirm {
            tag: ack.delivery_tag(),
            multiple: ack.mutiple(),
            ack: true,
            at_ns: Clock::process().now_ns(),
        });
    }
    async fn publish_nack(&mut self, _: &Channel, nack: Nack) {
        self.0.push(ChannelEvent::Confirm {
            tag: nack.delivery_tag(),
            multiple: nack.multiple(),
            ack: false,
            at_ns: Clock::process().now_ns(),
        });
    }
    async fn publish_return(&mut self, _: &Channel, _: Return, _: BasicProperties, body: Vec<u8>) {
        if let Ok(envelope) = Envelope::read(&body) {
            self.0.push(ChannelEvent::Returned(envelope));
        }
    }
}

/// A snake_case error kind for an amqprs error on the message path.
pub fn error_kind(error: &amqprs::error::Error) -> &'static str {
    use amqprs::error::Error;
    match error {
        Error::InternalChannelError(_) | Error::NetworkError(_) => CONNECTION_CLOSED,
        Error::ChannelUseError(_) | Error::ChannelCloseError(_) => CHANNEL_CLOSED,
        _ => "client_error",
    }
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

/// Polls `future` once without waiting: Some(output) if it completed at once. Used to hand a
/// frame to the connection's bounded outgoing queue only when that takes no waiting.
pub fn poll_once<F: Future>(future: F) -> Option<F::Output> {
    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    thread_local! {
        static NOOP: Waker = Waker::from(Arc::new(Noop));
    }
    let future = std::pin::pin!(future);
    NOOP.with(|waker| match future.poll(&mut Context::from_waker(waker)) {
        Poll::Ready(output) => Some(output),
        Poll::Pending => None,
    })
}
