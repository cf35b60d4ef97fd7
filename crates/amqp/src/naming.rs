//! Broker-side names and routing of a run: which exchange a topic is, which queues are its
//! subscriptions, how each queue is bound and how a message is published. Pure functions, so
//! the mapping is tested without a broker.

use crate::config::{ExchangeKind, Overflow, QueueConfig, QueueKind, RabbitMqDriverConfig};

/// AMQP short strings (exchange, queue and routing-key names) hold at most 255 bytes.
pub const MAX_NAME_LEN: usize = 255;
/// The message header a headers exchange routes on.
pub const TOPIC_HEADER: &str = "topic";

/// The broker objects of one workload topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicNames {
    /// `<exchange.name>-<workload>-<run id>-<topic>`, new for every run.
    pub exchange: String,
    /// `<exchange>-q<j>`, one per subscription.
    pub queues: Vec<String>,
    /// How messages of this topic reach its queues.
    pub routing: Routing,
}

impl TopicNames {
    /// Names for topic `topic` of a run.
    pub fn new(config: &RabbitMqDriverConfig, workload: &str, run_id: &str, topic: u32) -> Self {
        let exchange = format!("{}-{workload}-{run_id}-{topic}", config.exchange.name);
        let queues = (0..config.queues_per_topic)
            .map(|j| format!("{exchange}-q{j}"))
            .collect();
        let routing = Routing::new(config.exchange.kind, &exchange);
        TopicNames {
            exchange,
            queues,
            routing,
        }
    }

    /// The longest name, for the 255-byte check before anything is declared.
    pub fn longest(&self) -> usize {
        self.queues
            .iter()
            .map(String::len)
            .chain([self.exchange.len()])
            .max()
            .unwrap_or(0)
    }
}

/// How a topic's messages are routed, by exchange type. The topic's name is its exchange's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routing {
    /// direct and topic exchanges: queues bound with, and messages published under, the
    /// topic's name as routing key.
    Key { kind: ExchangeKind, key: String },
    /// fanout: every bound queue gets every message; routing keys are empty and ignored.
    Fanout,
    /// headers: queues bound with `x-match: any, topic: <name>`, messages carry the header.
    Header { topic: String },
}

impl Routing {
    fn new(kind: ExchangeKind, topic: &str) -> Self {
        match kind {
            ExchangeKind::Direct | ExchangeKind::Topic => Routing::Key {
                kind,
                key: topic.to_string(),
            },
            ExchangeKind::Fanout => Routing::Fanout,
            ExchangeKind::Headers => Routing::Header {
                topic: topic.to_string(),
            },
        }
    }

    /// Routing key of basic.publish.
    pub fn publish_key(&self) -> &str {
        match self {
            Routing::Key { key, .. } => key,
            Routing::Fanout | Routing::Header { .. } => "",
        }
    }

    /// Routing (binding) key of queue.bind.
    pub fn binding_key(&self) -> &str {
        self.publish_key()
    }

    /// Arguments of queue.bind.
    pub fn binding_arguments(&self) -> Vec<(&'static str, Argument)> {
        match self {
            Routing::Header { topic } => vec![
                ("x-match", Argument::Text("any".into())),
                (TOPIC_HEADER, Argument::Text(topic.clone())),
            ],
            _ => Vec::new(),
        }
    }

    /// Headers every published message carries.
    pub fn publish_headers(&self) -> Vec<(&'static str, Argument)> {
        match self {
            Routing::Header { topic } => vec![(TOPIC_HEADER, Argument::Text(topic.clone()))],
            _ => Vec::new(),
        }
    }
}

/// A value in an AMQP argument table, as far as this driver needs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Argument {
    Text(String),
    Integer(i64),
}

/// Arguments of queue.declare: queue type, lazy mode, length limits, quorum members and
/// overflow.
pub fn queue_arguments(queue: &QueueConfig) -> Vec<(&'static str, Argument)> {
    let mut arguments = vec![("x-queue-type", Argument::Text(queue.kind.as_str().into()))];
    if queue.lazy {
        arguments.push(("x-queue-mode", Argument::Text("lazy".into())));
    }
    let clamp = |n: u64| Argument::Integer(n.min(i64::MAX as u64) as i64);
    if let Some(n) = queue.max_length {
        arguments.push(("x-max-length", clamp(n)));
    }
    if let Some(n) = queue.max_length_bytes {
        arguments.push(("x-max-length-bytes", clamp(n)));
    }
    if let Some(n) = queue.initial_group_size {
        arguments.push(("x-quorum-initial-group-size", clamp(n.into())));
    }
    // Streams take no overflow argument; for the others drop-head is the broker's default
    // and is stated anyway, so that the queue says what the run assumed.
    let limited = queue.max_length.is_some() || queue.max_length_bytes.is_some();
    if queue.kind != QueueKind::Stream && (limited || queue.overflow != Overflow::DropHead) {
        arguments.push(("x-overflow", Argument::Text(queue.overflow.as_str().into())));
    }
    arguments
}

/// Arguments of basic.consume: a stream is read from its first message (the queue is new, so
/// that is the first message of this run); other queues need none.
pub fn consume_arguments(queue: &QueueConfig) -> Vec<(&'static str, Argument)> {
    match queue.kind {
        QueueKind::Stream => vec![("x-stream-offset", Argument::Text("first".into()))],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> RabbitMqDriverConfig {
        let c: RabbitMqDriverConfig = brokerbench_model::yaml::from_str(yaml).unwrap();
        c.validate().unwrap();
        c
    }

    #[test]
    fn topics_map_to_unique_exchanges_and_numbered_queues() {
        let c = config("queues_per_topic: 3");
        let t = TopicNames::new(&c, "quickstart", "r1a2", 4);
        assert_eq!(t.exchange, "brokerbench-quickstart-r1a2-4");
        assert_eq!(
            t.queues,
            [
                "brokerbench-quickstart-r1a2-4-q0",
                "brokerbench-quickstart-r1a2-4-q1",
                "brokerbench-quickstart-r1a2-4-q2"
            ]
        );
        assert_eq!(t.longest(), "brokerbench-quickstart-r1a2-4-q0".len());
        assert_ne!(
            t,
            TopicNames::new(&c, "quickstart", "r1a3", 4),
            "unique per run"
        );
    }

    #[test]
    fn routing_follows_the_exchange_type() {
        let direct = TopicNames::new(&config("{}"), "w", "r", 0).routing;
        assert_eq!(direct.publish_key(), "brokerbench-w-r-0");
        assert_eq!(direct.binding_key(), "brokerbench-w-r-0");
        assert!(direct.binding_arguments().is_empty() && direct.publish_headers().is_empty());

        let topic = TopicNames::new(&config("exchange: {type: topic}"), "w", "r", 0).routing;
        assert_eq!(topic.binding_key(), "brokerbench-w-r-0");

        let fanout = TopicNames::new(&config("exchange: {type: fanout}"), "w", "r", 0).routing;
        assert_eq!((fanout.publish_key(), fanout.binding_key()), ("", ""));

        let headers =
            TopicNames::new(&config("exchange: {name: bb, type: headers}"), "w", "r", 1).routing;
        assert_eq!(headers.publish_key(), "");
        assert_eq!(
            headers.binding_arguments(),
            vec![
                ("x-match", Argument::Text("any".into())),
                ("topic", Argument::Text("bb-w-r-1".into()))
            ]
        );
        assert_eq!(
            headers.publish_headers(),
            vec![("topic", Argument::Text("bb-w-r-1".into()))]
        );
    }

    #[test]
    fn queue_arguments_carry_type_mode_limits_and_overflow() {
        let text = |s: &str| Argument::Text(s.into());
        assert_eq!(
            queue_arguments(&config("{}").queue),
            vec![("x-queue-type", text("classic"))]
        );
        assert_eq!(
            queue_arguments(&config("queue: {lazy: true, max_length: 10}").queue),
            vec![
                ("x-queue-type", text("classic")),
                ("x-queue-mode", text("lazy")),
                ("x-max-length", Argument::Integer(10)),
                ("x-overflow", text("drop-head")),
            ]
        );
        assert_eq!(
            queue_arguments(
                &config("queue: {type: quorum, max_length_bytes: 1KiB, overflow: reject-publish}")
                    .queue
            ),
            vec![
                ("x-queue-type", text("quorum")),
                ("x-max-length-bytes", Argument::Integer(1024)),
                ("x-overflow", text("reject-publish")),
            ]
        );
        let stream = config("queue: {type: stream, max_length_bytes: 1000}").queue;
        assert_eq!(
            queue_arguments(&stream),
            vec![
                ("x-queue-type", text("stream")),
                ("x-max-length-bytes", Argument::Integer(1000)),
            ]
        );
        assert_eq!(
            consume_arguments(&stream),
            vec![("x-stream-offset", text("first"))]
        );
        assert!(consume_arguments(&config("{}").queue).is_empty());
        let quorum = config("queue: {type: quorum, initial_group_size: 5}").queue;
        assert_eq!(
            queue_arguments(&quorum),
            vec![
                ("x-queue-type", text("quorum")),
                ("x-quorum-initial-group-size", Argument::Integer(5)),
            ]
        );
    }
}
