//! One JetStream publisher and one durable pull consumer with explicit acks on the official
//! Rust client (async-nats, tokio), the case `bench/nats_bench.py` runs with brokerbench and
//! `nats bench`: MSGS messages of SIZE bytes, at most WINDOW publishes awaiting their PubAck,
//! pulls of BATCH. Prints one JSON line: messages, seconds, publish and receive rates, and
//! this process's CPU seconds (getrusage), so the client's cost per message can be compared.
//!
//! Usage: async-nats-bench URL MSGS [SIZE=100] [WINDOW=100] [BATCH=100]

use std::collections::VecDeque;
use std::time::Instant;

use async_nats::jetstream::{self, consumer::pull, stream};
use futures::StreamExt;

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(usage.ru_utime) + s(usage.ru_stime)
}

#[tokio::main]
async fn main() -> Result<(), async_nats::Error> {
    let args: Vec<String> = std::env::args().collect();
    let url = args.get(1).cloned().unwrap_or_else(|| "nats://127.0.0.1:4322".into());
    let msgs: u64 = args.get(2).map_or(200_000, |a| a.parse().unwrap());
    let size: usize = args.get(3).map_or(100, |a| a.parse().unwrap());
    let window: usize = args.get(4).map_or(100, |a| a.parse().unwrap());
    let batch: usize = args.get(5).map_or(100, |a| a.parse().unwrap());

    let client = async_nats::connect(&url).await?;
    let js = jetstream::new(client);
    let name = format!("asyncnatsbench{}", std::process::id());
    let stream = js
        .create_stream(stream::Config {
            name: name.clone(),
            subjects: vec![format!("{name}.*")],
            ..Default::default()
        })
        .await?;
    let consumer: jetstream::consumer::PullConsumer = stream
        .create_consumer(pull::Config {
            durable_name: Some("c".into()),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            max_ack_pending: 10_000,
            ..Default::default()
        })
        .await?;

    let started = Instant::now();
    let receiver = tokio::spawn(async move {
        let mut messages = consumer
            .stream()
            .max_messages_per_batch(batch)
            .messages()
            .await
            .expect("pull consumer");
        let mut received = 0u64;
        while received < msgs {
            let message = messages.next().await.expect("stream ends").expect("message");
            message.ack().await.expect("ack");
            received += 1;
        }
        started.elapsed().as_secs_f64()
    });

    let payload = bytes_of(size);
    let subject = format!("{name}.0");
    let mut pending = VecDeque::with_capacity(window);
    for _ in 0..msgs {
        if pending.len() >= window {
            let ack: jetstream::context::PublishAckFuture = pending.pop_front().unwrap();
            ack.await?;
        }
        pending.push_back(js.publish(subject.clone(), payload.clone()).await?);
    }
    for ack in pending {
        ack.await?;
    }
    let published_s = started.elapsed().as_secs_f64();
    let received_s = receiver.await?;
    let cpu = cpu_seconds();
    js.delete_stream(&name).await?;
    println!(
        "{{\"msgs\": {msgs}, \"pub_per_s\": {:.0}, \"sub_per_s\": {:.0}, \"cpu_s\": {cpu:.3}}}",
        msgs as f64 / published_s,
        msgs as f64 / received_s
    );
    Ok(())
}

fn bytes_of(size: usize) -> bytes::Bytes {
    bytes::Bytes::from(vec![b'x'; size])
}
