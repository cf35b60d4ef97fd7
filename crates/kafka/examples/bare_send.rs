//! Baseline for the benchmark: a bare librdkafka send loop with no measuring at all.
//! Usage: bare_send BOOTSTRAP TOPIC MESSAGES SIZE [key=value ...]
//! Prints one line: `messages=N seconds=S msg_per_s=R`.

use std::time::{Duration, Instant};

use brokerbench_kafka::TopicHandle;
use rdkafka::config::ClientConfig;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{BaseProducer, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
struct Counter {
    delivered: AtomicU64,
    failed: AtomicU64,
}
impl ClientContext for Counter {}
impl ProducerContext for Counter {
    type DeliveryOpaque = usize;
    fn delivery(&self, result: &DeliveryResult<'_>, _: usize) {
        match result {
            Ok(_) => self.delivered.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.failed.fetch_add(1, Ordering::Relaxed),
        };
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        eprintln!("usage: bare_send BOOTSTRAP TOPIC MESSAGES SIZE [key=value ...]");
        std::process::exit(2);
    }
    let (bootstrap, topic) = (&args[1], &args[2]);
    let messages: u64 = args[3].parse().expect("MESSAGES");
    let size: usize = args[4].parse().expect("SIZE");
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for kv in &args[5..] {
        let (k, v) = kv.split_once('=').expect("key=value");
        config.set(k, v);
    }
    let producer: BaseProducer<Counter> = config
        .create_with_context(Counter::default())
        .expect("producer");
    // The same once-made topic handle brokerbench's driver uses, so this stays the best case.
    let handle = TopicHandle::new(producer.client(), topic).expect("topic handle");
    let payload = vec![0x5au8; size];
    let started = Instant::now();
    for i in 0..messages {
        loop {
            match handle.produce(&payload, None, 0) {
                Ok(()) => break,
                Err(RDKafkaErrorCode::QueueFull) => producer.poll(Duration::from_millis(1)),
                Err(e) => panic!("send: {e}"),
            }
        }
        if i % 1024 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    drop(handle);
    let seconds = started.elapsed().as_secs_f64();
    let delivered = producer.context().delivered.load(Ordering::Relaxed);
    println!(
        "messages={delivered} failed={} seconds={seconds:.3} msg_per_s={:.0}",
        producer.context().failed.load(Ordering::Relaxed),
        delivered as f64 / seconds
    );
}
