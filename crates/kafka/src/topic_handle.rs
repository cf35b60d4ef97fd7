//! A librdkafka topic handle made once per producer. `BaseProducer::send` names the topic on
//! every message, which costs an allocation, a string copy and a topic lookup each time; at
//! millions of messages per second that is a measurable share of the client's CPU.

use std::ffi::CString;
use std::ptr::NonNull;

use rdkafka::bindings as rd;
use rdkafka::client::Client;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::ClientContext;

/// A topic handle bound to one producer. It must be dropped before that producer: keep it in
/// a field declared before the producer's.
pub struct TopicHandle {
    handle: NonNull<rd::rd_kafka_topic_t>,
}

// SAFETY: librdkafka topic handles may be used from any thread.
unsafe impl Send for TopicHandle {}

impl TopicHandle {
    /// A handle for `name` on a producer's client (`producer.client()`).
    pub fn new<C: ClientContext>(client: &Client<C>, name: &str) -> Result<TopicHandle, String> {
        let name =
            CString::new(name).map_err(|_| format!("topic name {name:?} contains a NUL byte"))?;
        // SAFETY: the client pointer is valid while its producer lives; a null config means the
        // topic takes the producer's defaults (librdkafka copies the name).
        let raw = unsafe {
            rd::rd_kafka_topic_new(client.native_ptr(), name.as_ptr(), std::ptr::null_mut())
        };
        NonNull::new(raw)
            .map(|handle| TopicHandle { handle })
            .ok_or_else(|| format!("librdkafka refused topic {name:?}: {}", last_error()))
    }

    /// Enqueues a copy of `payload` (and `key`) for the partitioner to place; `opaque` comes
    /// back in the delivery report.
    #[inline]
    pub fn produce(
        &self,
        payload: &[u8],
        key: Option<&[u8]>,
        opaque: usize,
    ) -> Result<(), RDKafkaErrorCode> {
        let (key_ptr, key_len) = key.map_or((std::ptr::null(), 0), |k| (k.as_ptr(), k.len()));
        // SAFETY: the handle is live; with RD_KAFKA_MSG_F_COPY librdkafka copies payload and key
        // before returning, so the borrowed slices need not outlive the call.
        let result = unsafe {
            rd::rd_kafka_produce(
                self.handle.as_ptr(),
                PARTITION_UNASSIGNED,
                rd::RD_KAFKA_MSG_F_COPY,
                payload.as_ptr() as *mut _,
                payload.len(),
                key_ptr as *const _,
                key_len,
                opaque as *mut _,
            )
        };
        if result == 0 {
            Ok(())
        } else {
            Err(last_error())
        }
    }
}

/// librdkafka's RD_KAFKA_PARTITION_UA: let the partitioner choose.
const PARTITION_UNASSIGNED: i32 = -1;

fn last_error() -> RDKafkaErrorCode {
    // SAFETY: reads librdkafka's thread-local last error.
    RDKafkaErrorCode::from(unsafe { rd::rd_kafka_last_error() })
}

impl Drop for TopicHandle {
    fn drop(&mut self) {
        // SAFETY: the handle came from rd_kafka_topic_new and is released once.
        unsafe { rd::rd_kafka_topic_destroy(self.handle.as_ptr()) };
    }
}
