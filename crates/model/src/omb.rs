//! OpenMessaging Benchmark (OMB) workload files, read unchanged: recognised by their keys,
//! checked field by field (a misspelt key is an error with the nearest name, where OMB would
//! silently ignore it), and translated into brokerbench's own workload fields.
//!
//! | OMB | brokerbench |
//! | --- | --- |
//! | `name` | `name`, made safe for topic and folder names |
//! | `topics`, `partitionsPerTopic`, `producersPerTopic` | the same in snake case |
//! | `subscriptionsPerTopic` × `consumerPerSubscription` | `subscriptions_per_topic` × `consumers_per_topic` |
//! | `keyDistributor` `NO_KEY` / `KEY_ROUND_ROBIN` / `RANDOM_NANO` | `keys` none / round-robin / random |
//! | `messageSize` | `message_size` (bytes) |
//! | `useRandomizedPayloads`, `randomBytesRatio`, `randomizedPayloadPoolSize` | `payload: {kind: random, pool, random_ratio}` |
//! | `payloadFile` | `payload: {kind: binary, path}` |
//! | `producerRate` | `rate` (all producers together); 10,000,000 or more: `rate: max` |
//! | `testDurationMinutes`, `warmupDurationMinutes` (default 1) | `duration`, `warmup` |

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::named::{deserialize_named, did_you_mean, SpecError};
use crate::yaml::{Mapping, Value};
use crate::WORKLOAD_FIELDS;

/// Every field of OMB's `Workload` class.
pub const OMB_FIELDS: &[&str] = &[
    "name",
    "topics",
    "partitionsPerTopic",
    "keyDistributor",
    "messageSize",
    "useRandomizedPayloads",
    "randomBytesRatio",
    "randomizedPayloadPoolSize",
    "payloadFile",
    "subscriptionsPerTopic",
    "producersPerTopic",
    "consumerPerSubscription",
    "producerRate",
    "consumerBacklogSizeGB",
    "backlogDrainRatio",
    "testDurationMinutes",
    "warmupDurationMinutes",
];

/// The `producerRate` from which an OMB file means "as fast as the client goes": OMB's
/// `max-rate-*` files ask for 10,000,000 msg/s, which its worker cannot reach, so each send
/// waits for the client's buffer, a closed loop. brokerbench runs such a file at `rate: max`.
pub const OMB_AS_FAST_AS_IT_GOES: f64 = 10_000_000.0;

/// Whether a workload mapping is written in OMB's format: it has a key only OMB uses.
pub fn is_omb_workload(value: &Value) -> bool {
    value.as_object().is_some_and(|map| {
        map.keys()
            .any(|k| OMB_FIELDS.contains(&k.as_str()) && !WORKLOAD_FIELDS.contains(&k.as_str()))
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OmbWorkload {
    name: Option<String>,
    topics: Option<i64>,
    #[serde(rename = "partitionsPerTopic")]
    partitions_per_topic: Option<i64>,
    #[serde(rename = "keyDistributor")]
    key_distributor: Option<KeyDistributor>,
    #[serde(rename = "messageSize")]
    message_size: Option<i64>,
    #[serde(rename = "useRandomizedPayloads", default)]
    use_randomized_payloads: bool,
    #[serde(rename = "randomBytesRatio")]
    random_bytes_ratio: Option<f64>,
    #[serde(rename = "randomizedPayloadPoolSize")]
    randomized_payload_pool_size: Option<i64>,
    #[serde(rename = "payloadFile")]
    payload_file: Option<String>,
    #[serde(rename = "subscriptionsPerTopic")]
    subscriptions_per_topic: Option<i64>,
    #[serde(rename = "producersPerTopic")]
    producers_per_topic: Option<i64>,
    #[serde(rename = "consumerPerSubscription")]
    consumer_per_subscription: Option<i64>,
    #[serde(rename = "producerRate")]
    producer_rate: Option<f64>,
    #[serde(rename = "consumerBacklogSizeGB")]
    consumer_backlog_size_gb: Option<i64>,
    #[serde(rename = "backlogDrainRatio")]
    backlog_drain_ratio: Option<f64>,
    #[serde(rename = "testDurationMinutes")]
    test_duration_minutes: Option<f64>,
    #[serde(rename = "warmupDurationMinutes")]
    warmup_duration_minutes: Option<f64>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[allow(clippy::enum_variant_names)]
enum KeyDistributor {
    #[serde(rename = "NO_KEY")]
    NoKey,
    #[serde(rename = "KEY_ROUND_ROBIN")]
    KeyRoundRobin,
    #[serde(rename = "RANDOM_NANO")]
    RandomNano,
}

/// An OMB workload translated: brokerbench's fields, and what the translation chose.
pub struct Translated {
    pub workload: Value,
    pub notes: Vec<String>,
}

/// Translates the OMB workload `value` of file `file` (its folder: `base`). `native_sets` are
/// the brokerbench workload fields the command line sets on top (say `rate`): a field they
/// set need not be translatable.
pub fn translate(
    file: &str,
    base: Option<&Path>,
    value: &Value,
    native_sets: &[&str],
) -> Result<Translated, SpecError> {
    let map = value.as_object().cloned().unwrap_or_default();
    check_omb_keys(file, &map)?;
    let omb: OmbWorkload = deserialize_named(file, Value::Object(map))?;
    let mut translation = Translation {
        file,
        native_sets,
        out: Mapping::new(),
        notes: vec![format!(
            "{file} is an OpenMessaging Benchmark workload: read with OMB's fields and defaults"
        )],
    };
    translation.name(&omb);
    let consumers = translation.clients(&omb)?;
    translation.keys(&omb);
    let size = translation.message_size(&omb)?;
    if !translation.sets("payload") {
        let chosen = payload(&omb, size, file, base, &mut translation.notes)?;
        translation.out.insert("payload".into(), chosen);
    }
    translation.rate(&omb)?;
    translation.backlog(&omb, consumers)?;
    translation.durations(&omb)?;
    Ok(Translated {
        workload: Value::Object(translation.out),
        notes: translation.notes,
    })
}

/// Checks every key of an OMB workload mapping is one of OMB's fields, naming the first that
/// is not: a brokerbench field (to be set with `--set`), or an unknown one.
fn check_omb_keys(file: &str, map: &Mapping) -> Result<(), SpecError> {
    for key in map.keys() {
        if OMB_FIELDS.contains(&key.as_str()) {
            continue;
        }
        let message = if WORKLOAD_FIELDS.contains(&key.as_str()) {
            format!(
                "is a brokerbench field, and this file is an OpenMessaging Benchmark workload (it has OMB's fields); write OMB's field{}, or set it with --set {key}=…",
                did_you_mean(key, OMB_FIELDS)
            )
        } else {
            format!(
                "unknown field of an OpenMessaging Benchmark workload{} (OMB would ignore it; brokerbench stops)",
                did_you_mean(key, OMB_FIELDS)
            )
        };
        return Err(SpecError::field(file, key, message));
    }
    Ok(())
}

/// An OMB workload under translation: the file it came from, the brokerbench fields the
/// command line sets on top, and the fields and notes written so far.
struct Translation<'a> {
    file: &'a str,
    native_sets: &'a [&'a str],
    out: Mapping,
    notes: Vec<String>,
}

impl Translation<'_> {
    /// What is wrong with OMB field `name` of the file.
    fn field(&self, name: &str, message: String) -> SpecError {
        SpecError::field(self.file, name, message)
    }

    /// Whether the command line sets brokerbench field `name` on top of the file.
    fn sets(&self, name: &str) -> bool {
        self.native_sets.contains(&name)
    }

    /// OMB's count in field `name`: present and at least `min`.
    fn at_least(&self, name: &str, value: Option<i64>, min: i64) -> Result<i64, SpecError> {
        match value {
            Some(v) if v >= min => Ok(v),
            Some(v) => {
                Err(self.field(name, format!("{v} is too small; it must be at least {min}")))
            }
            None => Err(self.field(name, format!("missing; OMB needs it (at least {min})"))),
        }
    }

    /// The name, made safe for topic and folder names (the file's name when OMB's is
    /// missing).
    fn name(&mut self, omb: &OmbWorkload) {
        let name = match &omb.name {
            Some(name) => name.clone(),
            None => base_name(self.file),
        };
        let safe = safe_name(&name);
        if safe != name {
            self.notes.push(format!(
                "name '{name}' is used as '{safe}' in topic and folder names"
            ));
        }
        self.out.insert("name".into(), Value::from(safe));
    }

    /// Topics, partitions, producers and consumers per topic; returns the consumers per
    /// topic (0 when there is no subscription).
    fn clients(&mut self, omb: &OmbWorkload) -> Result<i64, SpecError> {
        let topics = self.at_least("topics", omb.topics, 1)?;
        self.out.insert("topics".into(), topics.into());
        let partitions = self.at_least("partitionsPerTopic", omb.partitions_per_topic, 1)?;
        self.out
            .insert("partitions_per_topic".into(), partitions.into());
        let producers = self.at_least("producersPerTopic", omb.producers_per_topic, 1)?;
        self.out
            .insert("producers_per_topic".into(), producers.into());
        let subscriptions = omb.subscriptions_per_topic.unwrap_or(0);
        let per_subscription = omb.consumer_per_subscription.unwrap_or(0);
        if subscriptions < 0 || per_subscription < 0 {
            return Err(self.field(
                if subscriptions < 0 {
                    "subscriptionsPerTopic"
                } else {
                    "consumerPerSubscription"
                },
                "must not be negative".into(),
            ));
        }
        if subscriptions > 1 && per_subscription > 0 {
            self.out
                .insert("subscriptions_per_topic".into(), subscriptions.into());
        }
        let consumers = if subscriptions == 0 {
            0
        } else {
            per_subscription
        };
        if consumers == 0 {
            self.notes.push(
                "no consumers (subscriptionsPerTopic or consumerPerSubscription is 0): produce only"
                    .into(),
            );
        }
        self.out
            .insert("consumers_per_topic".into(), consumers.into());
        Ok(consumers)
    }

    /// How messages are keyed, from OMB's key distributor (no key when it is missing).
    fn keys(&mut self, omb: &OmbWorkload) {
        let keys = match omb.key_distributor.unwrap_or(KeyDistributor::NoKey) {
            KeyDistributor::NoKey => "none",
            KeyDistributor::KeyRoundRobin => "round-robin",
            KeyDistributor::RandomNano => "random",
        };
        self.out.insert("keys".into(), Value::from(keys));
    }

    /// The message size in bytes, at least brokerbench's envelope header; returns it.
    fn message_size(&mut self, omb: &OmbWorkload) -> Result<i64, SpecError> {
        let size = self.at_least("messageSize", omb.message_size, 1)?;
        if size < crate::ENVELOPE_HEADER_LEN as i64 {
            return Err(self.field(
                "messageSize",
                format!(
                    "{size} B is smaller than the {}-byte envelope header every brokerbench message carries; use at least {}",
                    crate::ENVELOPE_HEADER_LEN,
                    crate::ENVELOPE_HEADER_LEN
                ),
            ));
        }
        self.out
            .insert("message_size".into(), Value::from(format!("{size}B")));
        Ok(size)
    }

    /// The rate of all producers together; OMB's search for the maximum sustainable rate
    /// (no rate) is an error unless the command line sets the rate. A rate of
    /// [`OMB_AS_FAST_AS_IT_GOES`] or more is max-rate mode, as OMB's worker runs it.
    fn rate(&mut self, omb: &OmbWorkload) -> Result<(), SpecError> {
        match omb.producer_rate {
            Some(rate) if rate >= OMB_AS_FAST_AS_IT_GOES && !self.sets("rate") => {
                self.out.insert("rate".into(), Value::from("max"));
                self.notes.push(format!(
                    "producerRate {rate} is OMB's \"as fast as the client goes\" (its max-rate-* files ask for 10,000,000 msg/s, and OMB's worker then sends whenever the client takes a message, timing each from its send): run at rate: max, a closed loop bounded by max_in_flight messages per producer, with latency from each send; --set rate={rate} runs the open loop at that rate instead"
                ));
                Ok(())
            }
            Some(rate) if rate > 0.0 => {
                self.out.insert("rate".into(), Value::from(rate));
                Ok(())
            }
            _ if self.sets("rate") => Ok(()),
            rate => {
                let file = self.file;
                Err(self.field(
                    "producerRate",
                    format!(
                        "{} asks OMB to search for the maximum sustainable rate; brokerbench searches in a study: a study file with `workload: {file}` and `set: {{rate: find}}` (see studies/max-sustainable-kafka.yaml), run with `brokerbench study FILE`; or give a rate: --set producerRate=50000",
                        rate.map_or("missing (0)".to_string(), |r| r.to_string())
                    ),
                ))
            }
        }
    }

    /// The backlog mode: a backlog of `consumerBacklogSizeGB` drained to `backlogDrainRatio`,
    /// which needs consumers (`consumers` per topic).
    fn backlog(&mut self, omb: &OmbWorkload, consumers: i64) -> Result<(), SpecError> {
        if let Some(ratio) = omb.backlog_drain_ratio {
            if !(0.0..=1.0).contains(&ratio) {
                return Err(self.field(
                    "backlogDrainRatio",
                    format!("{ratio} must be between 0.0 and 1.0"),
                ));
            }
        }
        match omb.consumer_backlog_size_gb.unwrap_or(0) {
            gb if gb < 0 => Err(self.field(
                "consumerBacklogSizeGB",
                format!("{gb} must not be negative; 0 runs without a backlog"),
            )),
            0 => Ok(()),
            _ if consumers == 0 => Err(self.field(
                "consumerBacklogSizeGB",
                "a backlog needs consumers to drain it, but this workload has none; set subscriptionsPerTopic and consumerPerSubscription to 1 or more, or consumerBacklogSizeGB: 0".into(),
            )),
            gb if !self.sets("backlog") => {
                let ratio = omb.backlog_drain_ratio.unwrap_or(1.0);
                let mut backlog = Mapping::new();
                backlog.insert("size".into(), Value::from(format!("{gb}GiB")));
                backlog.insert("drain_ratio".into(), Value::from(ratio));
                self.out.insert("backlog".into(), Value::Object(backlog));
                self.notes.push(format!(
                    "backlog mode: consumers pause after the warm-up until {gb} GiB wait, then resume while producers go on at the same rate (as OMB); the window lasts until {}% of it is drained, and testDurationMinutes more",
                    ratio * 100.0
                ));
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The measured window and the warm-up, from OMB's minutes (warm-up 1 minute by default);
    /// a window without end is an error unless the command line sets the duration.
    fn durations(&mut self, omb: &OmbWorkload) -> Result<(), SpecError> {
        match omb.test_duration_minutes {
            Some(m) if m > 0.0 => {
                self.out.insert("duration".into(), Value::from(minutes(m)));
            }
            _ if self.sets("duration") => {}
            m => {
                return Err(self.field(
                    "testDurationMinutes",
                    format!(
                        "{} would run without end in OMB; give a length, e.g. testDurationMinutes: 5 (or --set duration=60s)",
                        m.map_or("missing (0)".to_string(), |m| m.to_string())
                    ),
                ))
            }
        }
        let warmup = omb.warmup_duration_minutes.unwrap_or(1.0);
        if warmup < 0.0 {
            return Err(self.field(
                "warmupDurationMinutes",
                format!("{warmup} must not be negative"),
            ));
        }
        if omb.warmup_duration_minutes.is_none() && !self.sets("warmup") {
            self.notes
                .push("warm-up 1 minute (OMB's default warmupDurationMinutes)".into());
        }
        self.out
            .insert("warmup".into(), Value::from(minutes(warmup)));
        Ok(())
    }
}

/// The payload: a pool of part-random messages, or the bytes of `payloadFile`.
fn payload(
    omb: &OmbWorkload,
    size: i64,
    file: &str,
    base: Option<&Path>,
    notes: &mut Vec<String>,
) -> Result<Value, SpecError> {
    let field = |field: &str, message: String| SpecError::field(file, field, message);
    if omb.use_randomized_payloads {
        let ratio = omb.random_bytes_ratio.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&ratio) {
            return Err(field(
                "randomBytesRatio",
                format!("{ratio} must be between 0.0 and 1.0"),
            ));
        }
        let pool = omb.randomized_payload_pool_size.unwrap_or(0);
        if pool < 1 {
            return Err(field(
                "randomizedPayloadPoolSize",
                format!("{pool}: with useRandomizedPayloads: true the pool needs at least 1 payload, e.g. 1000"),
            ));
        }
        let mut payload = Mapping::new();
        payload.insert("kind".into(), Value::from("random"));
        payload.insert("pool".into(), Value::from(pool));
        payload.insert("random_ratio".into(), Value::from(ratio));
        return Ok(Value::Object(payload));
    }
    let Some(name) = &omb.payload_file else {
        return Err(field(
            "payloadFile",
            "missing; OMB needs a payloadFile, or useRandomizedPayloads: true with randomBytesRatio and randomizedPayloadPoolSize".into(),
        ));
    };
    let path = resolve_payload(name, base).map_err(|tried| {
        field(
            "payloadFile",
            format!(
                "'{name}' not found; OMB reads it relative to the directory it runs in, and brokerbench also looks beside the workload file and in the folder above it (an OMB checkout); tried: {}",
                tried.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ),
        )
    })?;
    let length = std::fs::metadata(&path)
        .map_err(|e| {
            field(
                "payloadFile",
                format!("cannot read '{}': {e}", path.display()),
            )
        })?
        .len();
    if length != size as u64 {
        return Err(field(
            "payloadFile",
            format!(
                "'{}' is {length} bytes and messageSize is {size}; OMB requires them to be equal (set messageSize: {length}, or choose the payload file of {size} bytes)",
                path.display()
            ),
        ));
    }
    notes.push(format!(
        "payloadFile '{name}' read from {} (its first {} bytes carry brokerbench's envelope header)",
        path.display(),
        crate::ENVELOPE_HEADER_LEN
    ));
    let mut payload = Mapping::new();
    payload.insert("kind".into(), Value::from("binary"));
    payload.insert(
        "path".into(),
        Value::from(path.to_string_lossy().into_owned()),
    );
    Ok(Value::Object(payload))
}

/// Where a payload file is: as OMB finds it (relative to the working directory), else
/// beside the workload file, else in the folder above it. Err: the paths tried.
fn resolve_payload(name: &str, base: Option<&Path>) -> Result<PathBuf, Vec<PathBuf>> {
    let given = Path::new(name);
    let mut tried = vec![std::env::current_dir()
        .map(|d| d.join(given))
        .unwrap_or_else(|_| given.to_path_buf())];
    if given.is_relative() {
        if let Some(base) = base {
            tried.push(base.join(given));
            if let Some(parent) = base.parent() {
                tried.push(parent.join(given));
            }
        }
    }
    tried.iter().find(|p| p.is_file()).cloned().ok_or(tried)
}

/// OMB's minutes as a brokerbench duration.
fn minutes(m: f64) -> String {
    if m.fract() == 0.0 {
        format!("{}m", m as u64)
    } else {
        format!("{}s", (m * 60.0).round() as u64)
    }
}

fn base_name(file: &str) -> String {
    Path::new(file)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "omb".into())
}

/// `1 topic / 1 partition / 1Kb` → `1-topic-1-partition-1kb`.
fn safe_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches('-').to_string();
    if out.is_empty() {
        "omb".into()
    } else {
        out
    }
}

/// The `key=value` pairs of a Java properties text (OMB's Kafka driver files hold their
/// client settings so): `=`, `:` or white space between key and value, `#` and `!` comment
/// lines, a trailing `\` joining the next line; later keys win.
pub fn java_properties(text: &str) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = Vec::new();
    let mut logical = String::new();
    for line in text.lines() {
        let line = line.trim_start();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        if let Some(joined) = line.strip_suffix('\\') {
            logical.push_str(joined);
            continue;
        }
        logical.push_str(line);
        let entry = std::mem::take(&mut logical);
        let entry = entry.trim();
        let split = entry
            .find(|c: char| c == '=' || c == ':' || c.is_whitespace())
            .unwrap_or(entry.len());
        let key = entry[..split].trim().to_string();
        let rest = entry[split..].trim_start();
        let value = rest
            .strip_prefix(['=', ':'])
            .unwrap_or(rest)
            .trim()
            .to_string();
        pairs.retain(|(k, _)| *k != key);
        pairs.push((key, value));
    }
    pairs
}

/// Checks the top-level keys of an OMB driver file against its class's `fields`, naming the
/// first unknown one with the nearest known name.
pub fn check_driver_keys(file: &str, value: &Value, fields: &[&str]) -> Result<(), SpecError> {
    let map = value.as_object().cloned().unwrap_or_default();
    match map.keys().find(|k| !fields.contains(&k.as_str())) {
        None => Ok(()),
        Some(key) => Err(SpecError::field(
            file,
            key,
            format!(
                "unknown field of this OpenMessaging Benchmark driver file{} (OMB would ignore it; brokerbench stops)",
                did_you_mean(key, fields)
            ),
        )),
    }
}

#[cfg(test)]
mod tests;
