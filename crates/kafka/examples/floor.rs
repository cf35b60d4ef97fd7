//! The floor for client cost: a bare librdkafka producer (and optionally consumers) with no
//! measuring at all, paced the way brokerbench paces, so `bench/cost_matrix.py` can say how
//! much CPU brokerbench adds on top of the client library itself.
//!
//! Usage: floor BOOTSTRAP (--topics T1,T2,... | --create N:PARTITIONS) [--rate MSG_PER_S | max] [--seconds S]
//!        [--size BYTES] [--producers N] [--consumers N] [--keys none|random]
//!        [--min-sleep-us US] [--clients C] [-P key=value]... [-C key=value]...
//!
//! Producer thread i sends through producer client i mod C (`--clients`, default 1: one
//! client for all, as brokerbench's default `producer_clients: shared`; 4 is `per_thread`
//! with 4 producer threads), to topic i mod T (T topics, N >= T producers) or to
//! topics i, i+N, ... in turn (N < T), at rate/N, sleeping at
//! least `--min-sleep-us` (brokerbench's schedule resolution) and then sending what has come
//! due. `--create N:P` makes N topics of P partitions for the run and deletes them after it.
//! Each consumer is its own client in one group subscribed to all topics. Prints one line:
//! `sent=… delivered=… failed=… consumed=… seconds=… msg_per_s=…`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use brokerbench_driver::set_precise_sleep;
use brokerbench_kafka::TopicHandle;
use futures_executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{BaseProducer, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;

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

struct Options {
    bootstrap: String,
    topics: Vec<String>,
    /// Topics to create for the run (and delete after it): how many, partitions each.
    create: Option<(usize, i32)>,
    /// None: as fast as the client takes messages.
    rate: Option<f64>,
    seconds: f64,
    size: usize,
    producers: usize,
    consumers: usize,
    random_keys: bool,
    min_sleep: Duration,
    /// Producer clients; producer thread i sends through client i mod this.
    clients: usize,
    producer_config: Vec<(String, String)>,
    consumer_config: Vec<(String, String)>,
}

fn usage(problem: &str) -> ! {
    eprintln!("floor: {problem}");
    eprintln!(
        "usage: floor BOOTSTRAP --topics T1,T2,... [--rate N|max] [--seconds S] [--size BYTES] \
         [--producers N] [--consumers N] [--keys none|random] [--min-sleep-us US] \
         [--clients C] [-P key=value]... [-C key=value]..."
    );
    std::process::exit(2);
}

fn parse() -> Options {
    let mut args = std::env::args().skip(1);
    let mut options = Options {
        bootstrap: args.next().unwrap_or_else(|| usage("BOOTSTRAP is missing")),
        topics: Vec::new(),
        create: None,
        rate: None,
        seconds: 10.0,
        size: 100,
        producers: 1,
        consumers: 0,
        random_keys: false,
        min_sleep: Duration::from_micros(100),
        clients: 1,
        producer_config: Vec::new(),
        consumer_config: Vec::new(),
    };
    while let Some(flag) = args.next() {
        let value = args
            .next()
            .unwrap_or_else(|| usage(&format!("{flag} needs a value")));
        let number = |what: &str| -> f64 {
            value
                .parse()
                .unwrap_or_else(|_| usage(&format!("{what} {value:?} is not a number")))
        };
        let pair = || -> (String, String) {
            let (k, v) = value
                .split_once('=')
                .unwrap_or_else(|| usage(&format!("{flag} {value:?} is not key=value")));
            (k.to_string(), v.to_string())
        };
        match flag.as_str() {
            "--topics" => options.topics = value.split(',').map(str::to_string).collect(),
            "--create" => {
                let (n, p) = value
                    .split_once(':')
                    .unwrap_or_else(|| usage("--create takes TOPICS:PARTITIONS"));
                let count = |v: &str| -> u32 {
                    v.parse()
                        .unwrap_or_else(|_| usage("--create takes TOPICS:PARTITIONS"))
                };
                options.create = Some((count(n) as usize, count(p) as i32));
                options.topics = (0..count(n) as usize)
                    .map(|i| format!("floor-{}-{i}", std::process::id()))
                    .collect();
            }
            "--rate" if value == "max" => options.rate = None,
            "--rate" => options.rate = Some(number("--rate")),
            "--seconds" => options.seconds = number("--seconds"),
            "--size" => options.size = number("--size") as usize,
            "--producers" => options.producers = (number("--producers") as usize).max(1),
            "--consumers" => options.consumers = number("--consumers") as usize,
            "--keys" => options.random_keys = value == "random",
            "--min-sleep-us" => {
                options.min_sleep = Duration::from_micros(number("--min-sleep-us") as u64)
            }
            "--clients" => options.clients = (number("--clients") as usize).max(1),
            "-P" => options.producer_config.push(pair()),
            "-C" => options.consumer_config.push(pair()),
            other => usage(&format!("unknown flag {other}")),
        }
    }
    if options.topics.is_empty() {
        usage("--topics is missing");
    }
    options
}

/// With `--create`: creates the run's topics and returns the admin client that made them.
fn create_topics(options: &Options) -> Option<AdminClient<DefaultClientContext>> {
    options.create.map(|(_, partitions)| {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", &options.bootstrap)
            .create()
            .expect("admin client");
        let topics: Vec<NewTopic> = options
            .topics
            .iter()
            .map(|t| NewTopic::new(t, partitions, TopicReplication::Fixed(1)))
            .collect();
        for result in
            block_on(admin.create_topics(&topics, &AdminOptions::new())).expect("create topics")
        {
            result.expect("create topic");
        }
        admin
    })
}

/// The producer clients: `--clients` of them, but no more than there are producer threads.
fn producer_clients(options: &Options) -> Vec<Arc<BaseProducer<Counter>>> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &options.bootstrap);
    for (k, v) in &options.producer_config {
        config.set(k, v);
    }
    (0..options.clients.min(options.producers))
        .map(|_| {
            Arc::new(
                config
                    .create_with_context(Counter::default())
                    .expect("producer"),
            )
        })
        .collect()
}

fn main() {
    let options = Arc::new(parse());
    let admin = create_topics(&options);
    let clients = producer_clients(&options);
    let done = Arc::new(AtomicBool::new(false));
    let consumed = Arc::new(AtomicU64::new(0));
    let consumers: Vec<_> = (0..options.consumers)
        .map(|_| {
            let (options, done, consumed) = (options.clone(), done.clone(), consumed.clone());
            std::thread::spawn(move || consume(&options, &done, &consumed))
        })
        .collect();
    let started = Instant::now();
    let senders: Vec<_> = (0..options.producers)
        .map(|index| {
            let (options, producer) = (options.clone(), clients[index % clients.len()].clone());
            std::thread::spawn(move || send(&options, &producer, index, started))
        })
        .collect();
    let sent: u64 = senders.into_iter().map(|s| s.join().expect("sender")).sum();
    for producer in &clients {
        producer.flush(Duration::from_secs(60)).expect("flush");
    }
    let seconds = started.elapsed().as_secs_f64();
    let count = |of: fn(&Counter) -> &AtomicU64| -> u64 {
        clients
            .iter()
            .map(|c| of(c.context()).load(Ordering::Relaxed))
            .sum()
    };
    let delivered = count(|c| &c.delivered);
    // Consumers read until they have what was delivered, or give up after 10 s.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !consumers.is_empty()
        && consumed.load(Ordering::Relaxed) < delivered
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    done.store(true, Ordering::Relaxed);
    for consumer in consumers {
        consumer.join().expect("consumer");
    }
    if let Some(admin) = admin {
        let names: Vec<&str> = options.topics.iter().map(String::as_str).collect();
        let _ = block_on(admin.delete_topics(&names, &AdminOptions::new()));
    }
    println!(
        "sent={sent} delivered={delivered} failed={} consumed={} seconds={seconds:.3} msg_per_s={:.0}",
        count(|c| &c.failed),
        consumed.load(Ordering::Relaxed),
        delivered as f64 / seconds
    );
}

/// One producer thread: its share of the rate over its share of the topics, for the run's
/// length. Returns how many messages it sent.
fn send(
    options: &Options,
    producer: &BaseProducer<Counter>,
    index: usize,
    started: Instant,
) -> u64 {
    set_precise_sleep();
    // With at least as many producers as topics, each topic has producers/topics of them
    // (brokerbench's producers_per_topic); with fewer, a producer takes every N-th topic.
    let (topics, producers) = (options.topics.len(), options.producers);
    let handles: Vec<TopicHandle> = options
        .topics
        .iter()
        .enumerate()
        .filter(|(t, _)| {
            if producers >= topics {
                *t == index % topics
            } else {
                t % producers == index
            }
        })
        .map(|(_, t)| TopicHandle::new(producer.client(), t).expect("topic handle"))
        .collect();
    let gap_ns = options
        .rate
        .map(|rate| options.producers as f64 * 1e9 / rate);
    // Producers are staggered evenly inside one gap, as brokerbench's are: together they
    // send at an even pace, not in bursts of one message each.
    let offset_ns = gap_ns.map_or(0.0, |gap| index as f64 / options.producers as f64 * gap);
    let end = Duration::from_secs_f64(options.seconds);
    let payload = vec![0x5au8; options.size];
    let mut key_state = 0x9e37_79b9_7f4a_7c15u64 ^ index as u64;
    let mut sent = 0u64;
    loop {
        let elapsed = started.elapsed();
        if elapsed >= end {
            break;
        }
        // Everything due by now goes out; then sleep until the next one is due.
        let due = match gap_ns {
            Some(gap) => {
                let since = (elapsed.as_nanos() as f64 - offset_ns).max(-gap);
                ((since / gap + 1.0) as u64).saturating_sub(sent)
            }
            None => 1024,
        };
        for _ in 0..due {
            key_state ^= key_state << 13;
            key_state ^= key_state >> 7;
            key_state ^= key_state << 17;
            let key_bytes = key_state.to_le_bytes();
            let key = options.random_keys.then_some(&key_bytes[..]);
            let handle = &handles[sent as usize % handles.len()];
            loop {
                match handle.produce(&payload, key, 0) {
                    Ok(()) => break,
                    Err(RDKafkaErrorCode::QueueFull) => producer.poll(Duration::from_millis(1)),
                    Err(e) => panic!("send: {e}"),
                }
            }
            sent += 1;
        }
        producer.poll(Duration::ZERO);
        if let Some(gap) = gap_ns {
            let next = Duration::from_nanos((sent as f64 * gap + offset_ns) as u64);
            let now = started.elapsed();
            if next > now {
                std::thread::sleep((next - now).max(options.min_sleep));
            }
        }
    }
    drop(handles);
    sent
}

/// One consumer: its own client in the run's group, counting what it reads.
fn consume(options: &Options, done: &AtomicBool, consumed: &AtomicU64) {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &options.bootstrap)
        .set("group.id", format!("floor-{}", std::process::id()))
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "false");
    for (k, v) in &options.consumer_config {
        config.set(k, v);
    }
    let consumer: BaseConsumer = config.create().expect("consumer");
    let topics: Vec<&str> = options.topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topics).expect("subscribe");
    while !done.load(Ordering::Relaxed) {
        if let Some(Ok(_)) = consumer.poll(Duration::from_millis(100)) {
            consumed.fetch_add(1, Ordering::Relaxed);
        }
    }
}
