//! A librdkafka producer client whose acknowledgements are stamped and routed on the thread
//! that receives them: an `on_acknowledgement` interceptor, which librdkafka calls on its
//! broker thread as it reads the produce response (or on its main thread when a message
//! times out or is purged). The time is read once per response, when librdkafka has received
//! it (an `on_response_received` interceptor, called on the same thread just before the
//! response's messages are acknowledged): every message of a response arrived with it, and a
//! response of thousands of messages no longer reads the clock thousands of times. The
//! delivery reports that follow only carry the messages back to be freed, by a producer task
//! serving the queue when it polls anyway: no thread of ours
//! waits for them (rust-rdkafka's `ThreadedProducer` woke a polling thread for every batch of
//! reports, and the broker thread paid a futex wake-up to rouse it).
//!
//! Each acknowledgement goes to the producer task that sent the message (the producer id in
//! the message's opaque), so a client shared by many tasks keeps every task's latencies and
//! ledger its own. The interceptor reads nothing of the message but its opaque, length and
//! error: the task knows the rest ([`crate::in_flight`]).

use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use rdkafka::bindings as rd;
use rdkafka::client::Client;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaType};
use rdkafka::ClientContext;

use brokerbench_driver::Clock;

use crate::in_flight::producer_of;
use crate::mailbox::Mailbox;
use crate::statistics::{self, Increases};

/// One message's outcome as librdkafka's thread saw it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawAck {
    /// The opaque the message was produced with.
    pub opaque: u64,
    /// When the outcome arrived, ns since the UNIX epoch.
    pub arrived_ns: u64,
    pub bytes: u32,
    pub error: Option<RDKafkaErrorCode>,
}

/// Where one producer task's acknowledgements wait for it.
pub(crate) type AckSlot = Mailbox<RawAck>;

/// The producer tasks' slots, indexed by producer id: registration happens before the run,
/// lookups on every acknowledgement.
#[derive(Default)]
pub(crate) struct AckRouter {
    slots: RwLock<Vec<Option<Arc<AckSlot>>>>,
    /// When librdkafka last found a broker it needs unreachable, ns since the UNIX epoch; 0
    /// while it has not, or since a message was acknowledged again.
    lost_ns: AtomicU64,
    /// Requests the client sent again, from librdkafka's statistics.
    requests_again: Increases,
    /// Messages it transmitted again, from the same.
    messages_again: Increases,
}

impl AckRouter {
    pub(crate) fn register(&self, producer: u32) -> Arc<AckSlot> {
        let slot = Arc::new(AckSlot::default());
        let mut slots = self.slots.write().unwrap_or_else(|e| e.into_inner());
        let index = producer as usize;
        if slots.len() <= index {
            slots.resize(index + 1, None);
        }
        slots[index] = Some(slot.clone());
        slot
    }

    /// Every increase of the requests the client sent again: (ns since the UNIX epoch, how
    /// many).
    pub(crate) fn requests_sent_again(&self) -> Vec<(u64, u64)> {
        self.requests_again.list()
    }

    /// Every increase of the messages the client transmitted again.
    pub(crate) fn messages_sent_again(&self) -> Vec<(u64, u64)> {
        self.messages_again.list()
    }

    /// What a statistics report says the client sent again so far.
    fn statistics(&self, report: &[u8]) {
        self.requests_again
            .report(statistics::requests_sent_again(report));
        self.messages_again
            .report(statistics::messages_sent_again(report));
    }

    /// Since when a broker has been unreachable, as librdkafka said; None once a message was
    /// acknowledged after that.
    pub(crate) fn lost_since(&self) -> Option<u64> {
        match self.lost_ns.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(ns),
        }
    }

    /// One message's outcome.
    #[inline]
    fn acknowledge(&self, opaque: u64, bytes: usize, error: Option<RDKafkaErrorCode>) {
        // A success comes only from a produce response (or, with acks=0, from the request's
        // send), stamped when it was received; a failure (a timeout, a purge) when it is seen.
        let arrived_ns = match (error, RESPONSE_RECEIVED_NS.get()) {
            (None, stamp) if stamp != 0 => stamp,
            _ => Clock::process().now_ns(),
        };
        // A load first: the store (a shared cache line) only once per outage.
        if error.is_none() && self.lost_ns.load(Ordering::Relaxed) != 0 {
            self.lost_ns.store(0, Ordering::Relaxed);
        }
        let slots = self.slots.read().unwrap_or_else(|e| e.into_inner());
        let Some(Some(slot)) = slots.get(producer_of(opaque) as usize) else {
            return;
        };
        slot.put(RawAck {
            opaque,
            arrived_ns,
            bytes: bytes as u32,
            error,
        });
    }
}

/// The client's context: it keeps the router alive as long as the client (the client's
/// native handle is destroyed, and its threads joined, before its context is dropped).
pub(crate) struct Routes(#[allow(dead_code)] Arc<AckRouter>);

impl ClientContext for Routes {}

/// librdkafka's error callback, served by `rd_kafka_poll`: a failed attempt to connect to a
/// broker (`__TRANSPORT` "in state CONNECT": the broker is not there, not an idle connection
/// closed) or "all brokers down" starts an outage, which ends with the next acknowledgement;
/// other errors are left to the client's retries. The opaque is the client's context, which
/// rust-rdkafka sets on the configuration.
unsafe extern "C" fn on_error(
    _rk: *mut rd::rd_kafka_t,
    error: i32,
    reason: *const c_char,
    routes: *mut c_void,
) {
    let all_down = error == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN as i32;
    let transport = error == rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR__TRANSPORT as i32;
    // SAFETY: librdkafka passes a valid C string for the duration of the call.
    let connecting = transport
        && !reason.is_null()
        && unsafe { CStr::from_ptr(reason) }
            .to_bytes()
            .windows(b"in state CONNECT".len())
            .any(|w| w == b"in state CONNECT");
    if all_down || connecting {
        // SAFETY: the opaque is the `Routes` the client's context keeps alive.
        let routes = unsafe { &*(routes as *const Routes) };
        let now = Clock::process().now_ns();
        let _ = routes
            .0
            .lost_ns
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
    }
}

/// A producer client with its acknowledgement router.
pub(crate) struct ProducerClient {
    client: Client<Routes>,
    router: Arc<AckRouter>,
}

impl ProducerClient {
    /// A producer with `config`, routing its acknowledgements by producer id.
    pub(crate) fn new(config: &ClientConfig) -> Result<ProducerClient, KafkaError> {
        let router = Arc::new(AckRouter::default());
        // Statistics once a second (unless the driver file says otherwise), for the requests
        // the client retried: a retried produce request can land after a newer one.
        let mut config = config.clone();
        if config.get("statistics.interval.ms").is_none() {
            config.set("statistics.interval.ms", STATISTICS_INTERVAL_MS);
        }
        let config = &config;
        let native = config.create_native_config()?;
        // SAFETY: the opaque is the router, which the client's context keeps alive until the
        // client is destroyed; the interceptor name is copied by librdkafka.
        let code = unsafe {
            rd::rd_kafka_conf_interceptor_add_on_new(
                native.ptr(),
                INTERCEPTOR.as_ptr(),
                Some(on_new),
                Arc::as_ptr(&router) as *mut c_void,
            )
        };
        if code != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(KafkaError::ClientCreation(format!(
                "adding the acknowledgement interceptor: {}",
                RDKafkaErrorCode::from(code)
            )));
        }
        // Delivery reports that say nothing: they bring each message back to the thread that
        // serves the queue (a producer task, which allocated it) to be freed there. Freed on
        // the broker thread instead, every message crossed malloc arenas, on the client's
        // busiest thread.
        // SAFETY: sets a callback on a configuration we own.
        unsafe { rd::rd_kafka_conf_set_dr_msg_cb(native.ptr(), Some(discard_report)) };
        // SAFETY: sets a callback on a configuration we own; its opaque is set by Client::new.
        unsafe { rd::rd_kafka_conf_set_error_cb(native.ptr(), Some(on_error)) };
        // SAFETY: as above.
        unsafe { rd::rd_kafka_conf_set_stats_cb(native.ptr(), Some(on_statistics)) };
        let client = Client::new(
            config,
            native,
            RDKafkaType::RD_KAFKA_PRODUCER,
            Routes(router.clone()),
        )?;
        Ok(ProducerClient { client, router })
    }

    pub(crate) fn router(&self) -> &AckRouter {
        &self.router
    }

    pub(crate) fn router_handle(&self) -> Arc<AckRouter> {
        self.router.clone()
    }

    pub(crate) fn client(&self) -> &Client<Routes> {
        &self.client
    }

    /// Serves what the client queued for the application (delivery reports, which frees
    /// their messages; errors; logs), without waiting.
    pub(crate) fn serve(&self) {
        // SAFETY: the handle is live; the delivery-report callback does nothing.
        unsafe { rd::rd_kafka_poll(self.client.native_ptr(), 0) };
    }

    /// Fails every message still queued or in flight (each is acknowledged as purged).
    pub(crate) fn purge(&self) {
        // SAFETY: the handle is live.
        unsafe {
            rd::rd_kafka_purge(
                self.client.native_ptr(),
                rd::RD_KAFKA_PURGE_F_QUEUE | rd::RD_KAFKA_PURGE_F_INFLIGHT,
            )
        };
    }
}

impl Drop for ProducerClient {
    fn drop(&mut self) {
        self.purge();
        self.serve();
    }
}

const INTERCEPTOR: &CStr = c"brokerbench-acks";

/// Kafka's API key of a produce request.
const PRODUCE_API_KEY: i16 = 0;

thread_local! {
    /// When this thread (a librdkafka broker thread) last received a produce response, ns
    /// since the UNIX epoch; 0 before the first.
    static RESPONSE_RECEIVED_NS: Cell<u64> = const { Cell::new(0) };
}

/// How often librdkafka reports its statistics (for the sends made again), ms.
const STATISTICS_INTERVAL_MS: &str = "1000";

/// librdkafka's statistics callback, served by `rd_kafka_poll`: what the client sent again so
/// far. Returns 0: librdkafka frees the JSON.
unsafe extern "C" fn on_statistics(
    _rk: *mut rd::rd_kafka_t,
    json: *mut c_char,
    length: usize,
    routes: *mut c_void,
) -> i32 {
    if json.is_null() || routes.is_null() {
        return 0;
    }
    // SAFETY: librdkafka passes `length` bytes of JSON valid for the call; the opaque is the
    // `Routes` the client's context keeps alive.
    let (text, routes) = unsafe {
        (
            std::slice::from_raw_parts(json as *const u8, length),
            &*(routes as *const Routes),
        )
    };
    let _ = catch_unwind(AssertUnwindSafe(|| routes.0.statistics(text)));
    0
}

/// The delivery-report callback: the interceptor has already acknowledged the message.
unsafe extern "C" fn discard_report(
    _rk: *mut rd::rd_kafka_t,
    _message: *const rd::rd_kafka_message_t,
    _opaque: *mut c_void,
) {
}

/// Called by `rd_kafka_new` before the client's threads start: adds the acknowledgement
/// interceptor to the new client.
unsafe extern "C" fn on_new(
    rk: *mut rd::rd_kafka_t,
    _conf: *const rd::rd_kafka_conf_t,
    router: *mut c_void,
    _errstr: *mut c_char,
    _errstr_size: usize,
) -> rd::rd_kafka_resp_err_t {
    // SAFETY: called by librdkafka on a client being created, with the opaque given above.
    let code = unsafe {
        rd::rd_kafka_interceptor_add_on_response_received(
            rk,
            INTERCEPTOR.as_ptr(),
            Some(on_response_received),
            router,
        )
    };
    if code != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
        return code;
    }
    // SAFETY: as above.
    unsafe {
        rd::rd_kafka_interceptor_add_on_acknowledgement(
            rk,
            INTERCEPTOR.as_ptr(),
            Some(on_acknowledgement),
            router,
        )
    }
}

/// Called by librdkafka on a broker thread for every response it receives (and for a
/// request that expects none, once sent), before the response is handled: a produce
/// response's time is its messages' acknowledgement time.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn on_response_received(
    _rk: *mut rd::rd_kafka_t,
    _sockfd: i32,
    _broker_name: *const c_char,
    _broker_id: i32,
    api_key: i16,
    _api_version: i16,
    _correlation_id: i32,
    _size: usize,
    _rtt: i64,
    _error: rd::rd_kafka_resp_err_t,
    _router: *mut c_void,
) -> rd::rd_kafka_resp_err_t {
    if api_key == PRODUCE_API_KEY {
        RESPONSE_RECEIVED_NS.set(Clock::process().now_ns());
    }
    rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
}

/// Called by librdkafka for every message that was acknowledged, failed or purged.
unsafe extern "C" fn on_acknowledgement(
    _rk: *mut rd::rd_kafka_t,
    message: *mut rd::rd_kafka_message_t,
    router: *mut c_void,
) -> rd::rd_kafka_resp_err_t {
    // SAFETY: the opaque is the router the client's context keeps alive; the message is valid
    // for the duration of the call.
    let (router, message) = unsafe { (&*(router as *const AckRouter), &*message) };
    let error = (message.err != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR)
        .then(|| RDKafkaErrorCode::from(message.err));
    // Nothing may unwind into librdkafka.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        router.acknowledge(message._private as usize as u64, message.len, error)
    }));
    rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR
}
