//! The floor for client cost on RabbitMQ: brokerbench's own AMQP 0-9-1 client (this crate's
//! producers and consumers, the same connections, channels, confirms and acks) driven by a
//! bare loop with no measuring at all, paced the way brokerbench paces, so
//! `bench/cost_matrix.py` can say how much CPU brokerbench's engine adds on top of the client.
//!
//! Usage: amqp_floor URI [--topics N] [--rate MSG_PER_S | max] [--seconds S] [--size BYTES]
//!        [--consumers N] [--min-sleep-us US] [--max-outstanding N] [--one-thread yes|no]
//!        [-D field=value]...
//!
//! One producer thread per topic at rate/N, sleeping at least `--min-sleep-us` (brokerbench's
//! schedule resolution) and then sending what has come due; with `max`, as fast as
//! `--max-outstanding` unconfirmed messages allow. `--consumers` consumer threads per topic.
//! `--one-thread yes` (one topic, one consumer, a rate): the producer and the consumer share
//! one thread, which waits on the consumer's socket until the next send is due; a delivery
//! that wakes it once the send is due sends it then, sparing the producer that wake-up.
//! `-D` sets a field of the RabbitMQ driver file (e.g. `-D queue.durable=false`). Prints one
//! line: `sent=… delivered=… failed=… consumed=… seconds=… msg_per_s=… lag_p50_us=…
//! lag_p99_us=…` (the lags: how long after its due time each send went, at a rate).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use brokerbench_amqp::config::{AmqpUri, RabbitMqDriverConfig};
use brokerbench_amqp::AmqpDriver;
use brokerbench_driver::{
    set_precise_sleep, Ack, Consumer, ConsumerSlot, Delivery, Driver, Envelope, OutgoingMessage,
    Producer, ProducerSlot, SendError, Topology,
};

#[derive(Default)]
struct Counters {
    sent: AtomicU64,
    delivered: AtomicU64,
    failed: AtomicU64,
    consumed: AtomicU64,
    lags_us: std::sync::Mutex<Vec<u32>>,
}

struct Options {
    uri: String,
    topics: u32,
    rate: Option<f64>,
    seconds: f64,
    size: usize,
    consumers: u32,
    min_sleep: Duration,
    max_outstanding: usize,
    fields: Vec<(String, String)>,
    one_thread: bool,
}

fn options() -> Options {
    let mut args = std::env::args().skip(1);
    let mut o = Options {
        uri: args.next().unwrap_or_else(|| usage("missing URI")),
        topics: 1,
        rate: Some(10_000.0),
        seconds: 10.0,
        size: 100,
        consumers: 1,
        min_sleep: Duration::from_micros(100),
        max_outstanding: 1000,
        fields: Vec::new(),
        one_thread: false,
    };
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        let number = |v: &str| -> f64 {
            v.parse()
                .unwrap_or_else(|_| usage(&format!("{flag}: '{v}' is not a number")))
        };
        match flag.as_str() {
            "--topics" => o.topics = number(&value) as u32,
            "--rate" if value == "max" => o.rate = None,
            "--rate" => o.rate = Some(number(&value)),
            "--seconds" => o.seconds = number(&value),
            "--size" => o.size = number(&value) as usize,
            "--consumers" => o.consumers = number(&value) as u32,
            "--min-sleep-us" => o.min_sleep = Duration::from_micros(number(&value) as u64),
            "--max-outstanding" => o.max_outstanding = number(&value) as usize,
            "--one-thread" => o.one_thread = yes_or_no(&value),
            "-D" => match value.split_once('=') {
                Some((k, v)) => o.fields.push((k.to_string(), v.to_string())),
                None => usage("-D needs field=value"),
            },
            _ => usage(&format!("unknown option {flag}")),
        }
    }
    if o.one_thread && (o.topics != 1 || o.consumers != 1 || o.rate.is_none()) {
        usage("--one-thread yes needs --topics 1, --consumers 1 and a --rate");
    }
    o
}

fn yes_or_no(value: &str) -> bool {
    match value {
        "yes" => true,
        "no" => false,
        _ => usage(&format!("--one-thread: '{value}' is neither yes nor no")),
    }
}

fn usage(problem: &str) -> ! {
    eprintln!("amqp_floor: {problem}\nusage: amqp_floor URI [--topics N] [--rate MSG_PER_S|max] [--seconds S] [--size BYTES] [--consumers N] [--min-sleep-us US] [--max-outstanding N] [--one-thread yes|no] [-D field=value]...");
    std::process::exit(2)
}

/// The driver file as YAML: `-D` fields as nested mappings.
fn config(fields: &[(String, String)]) -> RabbitMqDriverConfig {
    let mut root = serde_json::Map::new();
    for (path, value) in fields {
        let parsed: serde_json::Value = serde_json::from_str(value)
            .unwrap_or_else(|_| serde_json::Value::String(value.clone()));
        let mut map = &mut root;
        let parts: Vec<&str> = path.split('.').collect();
        for part in &parts[..parts.len() - 1] {
            map = map
                .entry(part.to_string())
                .or_insert_with(|| serde_json::Value::Object(Default::default()))
                .as_object_mut()
                .unwrap_or_else(|| usage(&format!("-D {path}: not a mapping")));
        }
        map.insert(parts[parts.len() - 1].to_string(), parsed);
    }
    let text = serde_json::Value::Object(root).to_string();
    brokerbench_model::yaml::from_str(&text).unwrap_or_else(|e| usage(&format!("-D: {e}")))
}

/// The driver, connected, with the run's topics prepared.
fn prepared_driver(o: &Options) -> AmqpDriver {
    let uri = AmqpUri::parse(&o.uri).unwrap_or_else(|e| usage(&e));
    let mut driver = AmqpDriver::new(config(&o.fields), uri);
    driver.connect().unwrap_or_else(|e| usage(&e.to_string()));
    let run_id = format!("{:x}", std::process::id());
    driver
        .prepare(&Topology {
            run_id,
            workload: "floor".into(),
            topics: o.topics,
            partitions_per_topic: 1,
            consumers_per_topic: o.consumers,
            subscriptions_per_topic: 1,
            shard: None,
        })
        .unwrap_or_else(|e| usage(&e.to_string()));
    driver
}

/// `--consumers` consumer threads per topic, each counting what it receives until
/// `stop_consumers` is set.
fn start_consumers(
    driver: &AmqpDriver,
    o: &Options,
    counters: &Arc<Counters>,
    stop_consumers: &Arc<AtomicBool>,
) -> Vec<JoinHandle<()>> {
    let mut consumers = Vec::new();
    for topic in 0..o.topics {
        for member in 0..o.consumers {
            let mut consumer = driver
                .consumer(ConsumerSlot {
                    topic,
                    subscription: 0,
                    member,
                })
                .unwrap_or_else(|e| usage(&e.to_string()));
            let (counters, stop) = (counters.clone(), stop_consumers.clone());
            consumers.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = consumer.poll(Duration::from_millis(100), &mut |_| {
                        count_delivery(&counters)
                    });
                }
            }));
        }
    }
    consumers
}

/// One producer thread per topic, each sending from `start` until `end`.
fn start_producers(
    driver: &AmqpDriver,
    o: &Arc<Options>,
    counters: &Arc<Counters>,
    start: Instant,
    end: Instant,
) -> Vec<JoinHandle<()>> {
    let mut producers = Vec::new();
    for topic in 0..o.topics {
        let producer = driver
            .producer(ProducerSlot {
                topic,
                producer: topic,
                thread: topic,
            })
            .unwrap_or_else(|e| usage(&e.to_string()));
        let (counters, o) = (counters.clone(), o.clone());
        producers.push(std::thread::spawn(move || {
            produce(producer, None, &counters, &o, topic, start, end)
        }));
    }
    producers
}

/// One producer thread: sends to `topic` from `start` until `end`, at its share of the rate
/// (or as fast as `--max-outstanding` allows), then waits up to 30 s for what is still
/// unconfirmed. With `consumer` (`--one-thread yes`) the thread serves it too: it waits on the
/// consumer's socket rather than sleeping, so a delivery that wakes it once the next send is
/// due sends it then, and at the end it waits for the deliveries as well.
fn produce(
    mut producer: Box<dyn Producer>,
    mut consumer: Option<Box<dyn Consumer>>,
    counters: &Counters,
    o: &Options,
    topic: u32,
    start: Instant,
    end: Instant,
) {
    let (size, min_sleep, max_outstanding, topics) =
        (o.size, o.min_sleep, o.max_outstanding, o.topics);
    let gap = o.rate.map(|r| Duration::from_secs_f64(o.topics as f64 / r));
    set_precise_sleep();
    let mut message = vec![0u8; size];
    let mut acks = |ack: Ack| count_ack(counters, &ack);
    let mut consumed = |_: Delivery<'_>| count_delivery(counters);
    let stagger = gap.map_or(Duration::ZERO, |g| g.mul_f64(topic as f64 / topics as f64));
    let mut due = start + stagger;
    let mut sequence = 0u64;
    let mut lags = Vec::with_capacity(1 << 20);
    loop {
        let now = Instant::now();
        if now >= end {
            break;
        }
        match gap {
            Some(gap) => {
                if now < due {
                    producer.poll(Duration::ZERO, &mut acks);
                    match consumer.as_deref_mut() {
                        Some(c) => wait_on_deliveries(c, due, now + min_sleep, &mut consumed),
                        None => std::thread::sleep((due - now).max(min_sleep)),
                    }
                    continue;
                }
                lags.push((now - due).as_micros() as u32);
                due += gap;
            }
            None => {
                while producer.in_flight() >= max_outstanding {
                    producer.poll(Duration::from_millis(1), &mut acks);
                }
            }
        }
        send_next(
            producer.as_mut(),
            topic,
            &mut sequence,
            &mut message,
            counters,
            &mut acks,
        );
        if sequence.is_multiple_of(64) {
            producer.poll(Duration::ZERO, &mut acks);
        }
    }
    let consumer = consumer.as_mut().map(|c| c.as_mut() as &mut dyn Consumer);
    drain(producer.as_mut(), consumer, counters);
    counters.lags_us.lock().unwrap().extend(lags);
}

/// Serves deliveries until `due` has passed and one came after it, or until `latest`
/// (whichever is later of `due` and `latest`).
fn wait_on_deliveries(
    consumer: &mut dyn Consumer,
    due: Instant,
    latest: Instant,
    consumed: &mut dyn FnMut(Delivery<'_>),
) {
    let deadline = due.max(latest);
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let _ = consumer.poll(deadline - now, consumed);
        if Instant::now() >= due {
            return;
        }
    }
}

/// After the sends: confirms until every sent message has one, and with `consumer` its
/// deliveries until every sent message came (at most 30 s).
fn drain(
    producer: &mut dyn Producer,
    mut consumer: Option<&mut dyn Consumer>,
    counters: &Counters,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let sent = counters.sent.load(Ordering::Relaxed);
    let mut acks = |ack: Ack| count_ack(counters, &ack);
    let mut consumed = |_: Delivery<'_>| count_delivery(counters);
    let undelivered = || counters.consumed.load(Ordering::Relaxed) < sent;
    while (producer.in_flight() > 0 || consumer.is_some() && undelivered())
        && Instant::now() < deadline
    {
        match consumer.as_deref_mut() {
            Some(c) => {
                producer.poll(Duration::ZERO, &mut acks);
                let _ = c.poll(Duration::from_millis(10), &mut consumed);
            }
            None => producer.poll(Duration::from_millis(10), &mut acks),
        }
    }
}

/// Counts a delivery.
fn count_delivery(counters: &Counters) {
    counters.consumed.fetch_add(1, Ordering::Relaxed);
}

/// Counts a confirm (or a refusal).
fn count_ack(counters: &Counters, ack: &Ack) {
    let counter = if ack.result.is_ok() {
        &counters.delivered
    } else {
        &counters.failed
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Numbers the next message of `producer_id` and sends it (see [`send_message`]).
fn send_next(
    producer: &mut dyn Producer,
    producer_id: u32,
    sequence: &mut u64,
    message: &mut [u8],
    counters: &Counters,
    acks: &mut dyn FnMut(Ack),
) {
    Envelope {
        producer: producer_id,
        sequence: *sequence,
        intended_ns: 0,
    }
    .write(message);
    *sequence += 1;
    send_message(producer, message, acks);
    counters.sent.fetch_add(1, Ordering::Relaxed);
}

/// Sends one message, serving acknowledgements while the client pushes back.
fn send_message(producer: &mut dyn Producer, message: &[u8], acks: &mut dyn FnMut(Ack)) {
    loop {
        let sent = producer.send(OutgoingMessage {
            key: None,
            payload: message,
            sent_ns: 0,
        });
        match sent {
            Err(SendError::Backpressure) => producer.poll(Duration::from_millis(1), acks),
            _ => break,
        }
    }
}

/// Waits, at most 30 s, until the consumers (if any) have received `sent` messages.
fn wait_for_consumers(o: &Options, counters: &Counters, sent: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while o.consumers > 0
        && counters.consumed.load(Ordering::Relaxed) < sent
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn main() {
    let o = Arc::new(options());
    let mut driver = prepared_driver(&o);
    let counters = Arc::new(Counters::default());
    let stop_consumers = Arc::new(AtomicBool::new(false));
    let consumers = if o.one_thread {
        Vec::new()
    } else {
        start_consumers(&driver, &o, &counters, &stop_consumers)
    };
    let start = Instant::now() + Duration::from_millis(50);
    let end = start + Duration::from_secs_f64(o.seconds);
    let producers = if o.one_thread {
        vec![start_one_thread(&driver, &o, &counters, start, end)]
    } else {
        start_producers(&driver, &o, &counters, start, end)
    };
    for p in producers {
        let _ = p.join();
    }
    let sent = counters.sent.load(Ordering::Relaxed);
    wait_for_consumers(&o, &counters, sent);
    stop_consumers.store(true, Ordering::Relaxed);
    for c in consumers {
        let _ = c.join();
    }
    let _ = driver.cleanup();
    report(&counters, o.seconds);
}

/// The one thread of `--one-thread yes`: topic 0's producer and its consumer.
fn start_one_thread(
    driver: &AmqpDriver,
    o: &Arc<Options>,
    counters: &Arc<Counters>,
    start: Instant,
    end: Instant,
) -> JoinHandle<()> {
    let producer = driver
        .producer(ProducerSlot {
            topic: 0,
            producer: 0,
            thread: 0,
        })
        .unwrap_or_else(|e| usage(&e.to_string()));
    let slot = ConsumerSlot {
        topic: 0,
        subscription: 0,
        member: 0,
    };
    let consumer = driver
        .consumer(slot)
        .unwrap_or_else(|e| usage(&e.to_string()));
    let (counters, o) = (counters.clone(), o.clone());
    std::thread::spawn(move || produce(producer, Some(consumer), &counters, &o, 0, start, end))
}

/// The one line of counts, rate and send lags.
fn report(counters: &Counters, seconds: f64) {
    let delivered = counters.delivered.load(Ordering::Relaxed);
    let mut lags = std::mem::take(&mut *counters.lags_us.lock().unwrap());
    lags.sort_unstable();
    let at = |q: f64| {
        let i = (lags.len() as f64 * q) as usize;
        lags.get(i.min(lags.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    println!(
        "sent={} delivered={delivered} failed={} consumed={} seconds={seconds} msg_per_s={:.1} \
         lag_p50_us={} lag_p99_us={}",
        counters.sent.load(Ordering::Relaxed),
        counters.failed.load(Ordering::Relaxed),
        counters.consumed.load(Ordering::Relaxed),
        delivered as f64 / seconds,
        at(0.5),
        at(0.99)
    );
}
