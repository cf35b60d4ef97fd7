//! Broker metrics: which samples of a broker's Prometheus endpoint mean what, and how to turn
//! them into per-second figures on brokerbench's timeline. Counters become rates from the
//! difference between two scrapes; gauges are reported as read. Each key is the one name of a
//! figure everywhere: a `broker-metrics.csv` column, a `summary.json` key, a report chart and,
//! prefixed `brokerbench_broker_`, a live gauge; so keys follow Prometheus's conventions (base
//! units spelled out: `_per_second`, `_ratio` for 0–1, `_seconds`, `_bytes`). What each one
//! means is written in docs/src/broker-metrics.md.

mod nodes;

use crate::scrape::{ScrapeError, Scraper};
use crate::text::{parse, Sample};

/// How a metric is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// A monotonically increasing count: reported as a rate per second.
    Counter,
    /// A current value: reported as read.
    Gauge,
}

/// One figure brokerbench reports, and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricSpec {
    /// brokerbench's name for it, e.g. `messages_in_per_second` (a CSV column, summary key,
    /// report chart and live gauge).
    pub key: &'static str,
    /// Prometheus sample name, or a JSON sample's path; in a JSON path, one `*` stands for
    /// any run of characters (an object keyed by names, such as Jolokia's by MBean: every
    /// series it matches is its own).
    pub metric: &'static str,
    /// A label that must have this value, if any (e.g. `name="MessagesInPerSec"`).
    pub label: Option<(&'static str, &'static str)>,
    /// A label that must be absent (e.g. `topic`, to take the all-topics series only).
    pub without_label: Option<&'static str>,
    /// A label value whose series are left out (e.g. a controller's listener).
    pub excluded_label: Option<(&'static str, &'static str)>,
    pub kind: MetricKind,
    /// How the matching series combine: summed (a total over topics or collectors) or
    /// averaged (a ratio per thread, the same for one thread as for eight).
    pub combine: Combine,
    /// A sample (name, label) whose presence means that two sources feed this one series as
    /// if each were alone (two thread pools marking one meter, each pool's share already
    /// divided by its own size): the figure is halved to their mean.
    pub halved_when: Option<(&'static str, (&'static str, &'static str))>,
    /// The most the figure can be (1 for a ratio of time: a wait is counted when it ends,
    /// so an interval can be credited with part of a wait that began before it).
    pub ceiling: Option<f64>,
    /// Factor applied to the value (or rate), e.g. 100 for a fraction shown as percent.
    pub scale: f64,
    /// A counter whose samples are all absent counts as 0 rather than unknown (a sum over
    /// streams the run creates: none exist before it starts).
    pub absent_is_zero: bool,
    /// Read from a cluster, the figure is also given for each node alone, as that node's
    /// endpoint says (`<key>_node<id>`): replication health, where which node lags matters.
    pub per_node: bool,
}

/// How the series a spec matches make one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    Sum,
    /// The sum divided by the number of series (of the latest scrape).
    Mean,
    /// A replicated figure: the same series (name and labels) read from several nodes counts
    /// once, at its highest value (the leader's, or the most advanced replica's); different
    /// series are summed. A stream of three replicas is one stream, not three.
    MaxPerSeries,
}

/// How a broker serves its metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format at the URL; `marker` is a prefix its samples have (to tell
    /// an endpoint of another broker apart).
    Prometheus { marker: &'static str },
    /// JSON documents at the URL followed by each path (e.g. NATS `/varz`, `/jsz`). Each
    /// numeric leaf is a sample named by its path, `<document>.<key>.<key>...`, where the
    /// document is the path's first word (`varz`) and array elements share their array's
    /// name (so a spec sums them); an element with a string `name` labels what is under it
    /// with that name, the label's key its array's (`stream_detail="orders"`).
    Json { paths: &'static [&'static str] },
    /// Prometheus text that the family's own `read` makes from what the broker says in its
    /// own protocol (Redis's INFO), at a URL of one of `schemes` (`redis://host:port`);
    /// `marker` as for [`Format::Prometheus`].
    Text {
        marker: &'static str,
        schemes: &'static [&'static str],
        read: Reader,
    },
}

/// A family's reader of its broker's figures as Prometheus text ([`Format::Text`]), known by
/// its name (the name is what two readers are compared by).
#[derive(Debug, Clone, Copy)]
pub struct Reader {
    pub name: &'static str,
    pub read: fn(&crate::Endpoint) -> Result<String, String>,
}

impl PartialEq for Reader {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for Reader {}

impl Format {
    /// The URL schemes an endpoint of this format may have.
    pub fn schemes(&self) -> &'static [&'static str] {
        match self {
            Format::Text { schemes, .. } => schemes,
            _ => crate::scrape::HTTP_SCHEMES,
        }
    }
}

/// A broker family's metric definitions: where they come from and what they mean.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MetricSet {
    /// The family, as the summary's `broker_metrics.source` says it, e.g. `kafka`.
    pub source: &'static str,
    pub format: Format,
    pub specs: &'static [MetricSpec],
}

/// A counter read from `metric` (with `name="..."` when given, all-topics series only).
pub const fn counter(
    key: &'static str,
    metric: &'static str,
    name: Option<&'static str>,
) -> MetricSpec {
    MetricSpec {
        key,
        metric,
        label: match name {
            Some(n) => Some(("name", n)),
            None => None,
        },
        without_label: Some("topic"),
        excluded_label: None,
        kind: MetricKind::Counter,
        combine: Combine::Sum,
        halved_when: None,
        ceiling: None,
        scale: 1.0,
        absent_is_zero: false,
        per_node: false,
    }
}

/// The fraction of time a cumulative busy- or idle-time counter `metric` (in nanoseconds
/// of time per thread) advanced over each scrape interval: a ratio, 0 to 1 per series.
pub const fn time_ratio(
    key: &'static str,
    metric: &'static str,
    name: Option<&'static str>,
) -> MetricSpec {
    MetricSpec {
        scale: 1e-9,
        ceiling: Some(1.0),
        ..counter(key, metric, name)
    }
}

/// `spec` for samples that carry no labels to tell apart (a JSON document's figures): none is
/// required to be absent.
pub const fn unlabelled(spec: MetricSpec) -> MetricSpec {
    MetricSpec {
        without_label: None,
        ..spec
    }
}

/// A gauge read from `metric`, multiplied by `scale`.
pub const fn gauge(
    key: &'static str,
    metric: &'static str,
    name: Option<&'static str>,
    scale: f64,
) -> MetricSpec {
    MetricSpec {
        kind: MetricKind::Gauge,
        scale,
        ..counter(key, metric, name)
    }
}

/// The key of the broker's own count of messages written, compared with brokerbench's count.
pub const MESSAGES_IN: &str = "messages_in_per_second";

/// Whether a key follows the one naming scheme of broker figures: a Prometheus metric name
/// (lower case, digits, underscores) whose units are base units spelled out, never
/// abbreviated (`_per_s`, `_pct`, `_ms`) nor a percentage (ratios are 0–1, `_ratio`).
pub fn follows_naming(key: &str) -> bool {
    let charset = key
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && key.starts_with(|c: char| c.is_ascii_lowercase());
    let words: Vec<&str> = key.split('_').collect();
    let abbreviated = ["pct", "percent", "ms", "msgs"]
        .iter()
        .any(|w| words.contains(w))
        || key.ends_with("_per_s")
        || key.contains("_per_s_");
    charset && !abbreviated && !key.contains("__")
}

/// One scrape turned into figures, in the order of the specs.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// When the scrape was made, ns since the UNIX epoch.
    pub time_ns: u64,
    /// Per spec: the rate (counters; None on the first scrape) or value (gauges); None when
    /// the endpoint had no such sample. Read from a cluster, the per-node figures follow
    /// ([`BrokerMetrics::columns`] names them all).
    pub values: Vec<Option<f64>>,
    /// Per spec: the raw summed counter value (None for gauges and absent samples).
    pub totals: Vec<Option<f64>>,
}

/// Reads one broker's metrics repeatedly: one endpoint, or one per node of a cluster, whose
/// series are read together (summed or averaged as each spec says, as if one broker served
/// them all), and for a cluster each node's alone where a spec asks it ([`MetricSpec::per_node`]).
#[derive(Debug, Clone)]
pub struct BrokerMetrics {
    scraper: Scraper,
    /// The node the first endpoint is (1 unless node 1 was down when the run began).
    first: u32,
    /// The endpoints of the other nodes of a cluster, if any, with their node ids.
    others: Vec<(u32, Scraper)>,
    set: &'static MetricSet,
    previous: Option<Reading>,
    /// What each endpoint (node 1's first) answered last: a node that does not answer counts
    /// with it, so that its counters neither vanish from a sum nor come back at once.
    last: Vec<Option<Vec<Sample>>>,
    /// Each endpoint's own reading of the last scrape (None when it did not answer), for the
    /// per-node figures' rates.
    node_previous: Vec<Option<Reading>>,
}

impl BrokerMetrics {
    /// Reads the scraper's endpoint with the given metric set.
    pub fn new(scraper: Scraper, set: &'static MetricSet) -> Self {
        BrokerMetrics {
            scraper,
            first: 1,
            others: Vec::new(),
            set,
            previous: None,
            last: Vec::new(),
            node_previous: Vec::new(),
        }
    }

    /// The endpoint is node `first` of a cluster; these endpoints, the other nodes' (with
    /// their ids), are read with every scrape too.
    pub fn with_other_nodes(self, first: u32, others: Vec<(u32, Scraper)>) -> Self {
        BrokerMetrics {
            first,
            others,
            ..self
        }
    }

    /// How many endpoints each scrape reads.
    pub fn endpoints(&self) -> usize {
        1 + self.others.len()
    }

    /// Checks that `url` serves this set's metrics: Ok(false) when it answers with something
    /// else (another broker's endpoint).
    pub fn check(&self) -> Result<bool, ScrapeError> {
        let samples = self.samples_of(&self.scraper)?;
        Ok(match self.set.format {
            Format::Prometheus { marker } | Format::Text { marker, .. } => {
                samples.iter().any(|s| s.name.starts_with(marker))
            }
            Format::Json { .. } => !samples.is_empty(),
        })
    }

    /// The endpoint's URL without credentials.
    pub fn url(&self) -> &str {
        self.scraper.endpoint().url()
    }

    pub fn set(&self) -> &'static MetricSet {
        self.set
    }

    pub fn specs(&self) -> &'static [MetricSpec] {
        self.set.specs
    }

    /// Reads now (`now_ns`) and returns the figures, in the order of
    /// [`BrokerMetrics::columns`]; those of a [`Format::Text`] reader stamped when it answered
    /// (it may wait for the broker's next figures: MQTT's `$SYS` comes every 2 s). A node that
    /// does not answer (killed by a fault, restarting) counts with what it answered last; only
    /// when none answers is it an error (node 1's).
    pub fn read(&mut self, now_ns: u64) -> Result<Reading, ScrapeError> {
        let asked = std::time::Instant::now();
        let mut fresh = Vec::new();
        let mut first_error = None;
        for scraper in std::iter::once(&self.scraper).chain(self.others.iter().map(|(_, s)| s)) {
            match self.samples_of(scraper) {
                Ok(samples) => fresh.push(Some(samples)),
                Err(e) => {
                    first_error.get_or_insert(e);
                    fresh.push(None);
                }
            }
        }
        if let (true, Some(e)) = (fresh.iter().all(Option::is_none), first_error) {
            return Err(e);
        }
        let now_ns = match self.set.format {
            Format::Text { .. } => now_ns + asked.elapsed().as_nanos() as u64,
            _ => now_ns,
        };
        let per_node = self.per_node(&fresh, now_ns);
        let samples = self.with_last(fresh);
        let mut reading = self.take(&samples, now_ns);
        reading.values.extend(per_node);
        Ok(reading)
    }

    /// Turns samples read at `now_ns` into figures (rates against the samples taken before).
    pub fn take(&mut self, samples: &[Sample], now_ns: u64) -> Reading {
        let reading = self.interpret(samples, now_ns);
        self.previous = Some(reading.clone());
        reading
    }

    /// Every endpoint's samples, node 1's first: a fresh answer, else the node's last one.
    fn with_last(&mut self, fresh: Vec<Option<Vec<Sample>>>) -> Vec<Sample> {
        self.last.resize(fresh.len(), None);
        let mut samples = Vec::new();
        for (last, answer) in self.last.iter_mut().zip(fresh) {
            if answer.is_some() {
                *last = answer;
            }
            samples.extend(last.iter().flatten().cloned());
        }
        samples
    }

    fn samples_of(&self, scraper: &Scraper) -> Result<Vec<Sample>, ScrapeError> {
        match self.set.format {
            // `http://host:port` alone means the conventional path.
            Format::Prometheus { .. } if !scraper.endpoint().has_path() => Ok(parse(
                &self
                    .scraper
                    .fetch_url(&scraper.endpoint().join("/metrics"))?,
            )),
            Format::Prometheus { .. } => Ok(parse(&scraper.fetch()?)),
            Format::Text { read, .. } => {
                let text =
                    (read.read)(scraper.endpoint()).map_err(|message| ScrapeError::Request {
                        url: scraper.endpoint().url().to_string(),
                        message,
                    })?;
                Ok(parse(&text))
            }
            Format::Json { paths } => {
                let mut samples = Vec::new();
                for path in paths {
                    let url = scraper.endpoint().join(path);
                    let text = scraper.fetch_url(&url)?;
                    let document: serde_json::Value =
                        serde_json::from_str(&text).map_err(|e| ScrapeError::Format {
                            url: url.clone(),
                            message: format!("not JSON: {e}"),
                        })?;
                    let Some(document) = answered(document, &url)? else {
                        continue;
                    };
                    let name = path
                        .trim_start_matches('/')
                        .split(['?', '/'])
                        .next()
                        .unwrap_or_default();
                    flatten(name, &document, &mut samples);
                }
                Ok(samples)
            }
        }
    }

    fn interpret(&self, samples: &[Sample], now_ns: u64) -> Reading {
        interpret(self.set.specs, self.previous.as_ref(), samples, now_ns)
    }
}

/// `samples` read at `now_ns` as figures of `specs`: counters as rates against `previous`.
fn interpret(
    specs: &[MetricSpec],
    previous: Option<&Reading>,
    samples: &[Sample],
    now_ns: u64,
) -> Reading {
    let mut values = Vec::with_capacity(specs.len());
    let mut totals = Vec::with_capacity(specs.len());
    for (i, spec) in specs.iter().enumerate() {
        let matching: Vec<&Sample> = samples.iter().filter(|s| spec.matches(s)).collect();
        if matching.is_empty() && !spec.absent_is_zero {
            values.push(None);
            totals.push(None);
            continue;
        }
        let sum = spec.combine.total(&matching);
        let share = spec.share(samples, matching.len());
        match spec.kind {
            MetricKind::Gauge => {
                values.push(Some(sum * spec.scale * share));
                totals.push(None);
            }
            MetricKind::Counter => {
                let rate = previous.and_then(|p| {
                    let before = p.totals.get(i).copied().flatten()?;
                    let seconds = now_ns.checked_sub(p.time_ns)? as f64 / 1e9;
                    let rate = (sum - before).max(0.0) / seconds * spec.scale * share;
                    (seconds > 0.0).then(|| spec.ceiling.map_or(rate, |c| rate.min(c)))
                });
                values.push(rate);
                totals.push(Some(sum));
            }
        }
    }
    Reading {
        time_ns: now_ns,
        values,
        totals,
    }
}

impl Combine {
    /// The matching series' values made one: summed, the highest of each series summed.
    fn total(self, matching: &[&Sample]) -> f64 {
        if self != Combine::MaxPerSeries {
            return matching.iter().map(|s| s.value).sum::<f64>() + 0.0;
        }
        let mut highest: Vec<(&[(String, String)], f64)> = Vec::new();
        for sample in matching {
            match highest
                .iter_mut()
                .find(|(labels, _)| *labels == sample.labels.as_slice())
            {
                Some((_, value)) => *value = value.max(sample.value),
                None => highest.push((&sample.labels, sample.value)),
            }
        }
        // + 0.0: an empty sum is -0.0, which a CSV would show as `-0.000`.
        highest.iter().map(|(_, value)| value).sum::<f64>() + 0.0
    }
}

impl MetricSpec {
    fn matches(&self, s: &Sample) -> bool {
        name_matches(self.metric, &s.name)
            && self.label.is_none_or_match(s)
            && self.without_label.none_or(|l| s.label(l).is_none())
            && self.excluded_label.none_or(|(k, v)| s.label(k) != Some(v))
    }

    /// The factor that turns the sum of `series` matching series into the figure.
    fn share(&self, samples: &[Sample], series: usize) -> f64 {
        let mean = match self.combine {
            Combine::Mean if series > 0 => 1.0 / series as f64,
            _ => 1.0,
        };
        let halved = self.halved_when.is_some_and(|(metric, (k, v))| {
            samples
                .iter()
                .any(|s| s.name == metric && s.label(k) == Some(v))
        });
        if halved {
            mean / 2.0
        } else {
            mean
        }
    }
}

/// A JSON document as an answer: one whose top-level `status` is a number other than 200 is
/// an error answer (Jolokia's, sent with HTTP 200) — an error, or for 404 (no MBean matched
/// the pattern yet) no samples.
fn answered(
    document: serde_json::Value,
    url: &str,
) -> Result<Option<serde_json::Value>, ScrapeError> {
    match document.get("status").and_then(|s| s.as_u64()) {
        None | Some(200) => Ok(Some(document)),
        Some(404) => Ok(None),
        Some(status) => Err(ScrapeError::Format {
            url: url.to_string(),
            message: format!(
                "the answer says status {status}: {}",
                document
                    .get("error")
                    .and_then(|e| e.as_str())
                    .unwrap_or("no reason given")
            ),
        }),
    }
}

/// `name` is `metric`, where a `*` in `metric` matches any run of characters.
fn name_matches(metric: &str, name: &str) -> bool {
    match metric.split_once('*') {
        None => name == metric,
        Some((head, tail)) => {
            name.len() >= head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
        }
    }
}

/// The numeric leaves of a JSON document as samples named by their path.
fn flatten(name: &str, value: &serde_json::Value, out: &mut Vec<Sample>) {
    flatten_labelled(name, value, &[], out);
}

/// [`flatten`] under `labels`: an array element with a string `name` adds the label
/// (array's key, name) to what is under it.
fn flatten_labelled(
    name: &str,
    value: &serde_json::Value,
    labels: &[(String, String)],
    out: &mut Vec<Sample>,
) {
    match value {
        serde_json::Value::Number(n) => {
            if let Some(v) = n.as_f64() {
                out.push(Sample {
                    name: name.to_string(),
                    labels: labels.to_vec(),
                    value: v,
                });
            }
        }
        serde_json::Value::Object(fields) => {
            for (key, field) in fields {
                flatten_labelled(&format!("{name}.{key}"), field, labels, out);
            }
        }
        serde_json::Value::Array(items) => {
            let key = name.rsplit('.').next().unwrap_or(name);
            for item in items {
                let mut labels = labels.to_vec();
                if let Some(item_name) = item.get("name").and_then(|n| n.as_str()) {
                    labels.push((key.to_string(), item_name.to_string()));
                }
                flatten_labelled(name, item, &labels, out);
            }
        }
        _ => {}
    }
}

trait LabelMatch {
    fn is_none_or_match(&self, sample: &Sample) -> bool;
}

impl LabelMatch for Option<(&'static str, &'static str)> {
    fn is_none_or_match(&self, sample: &Sample) -> bool {
        match self {
            None => true,
            Some((k, v)) => sample.label(k) == Some(v),
        }
    }
}

/// `Option::is_none_or` for MSRV 1.80.
trait NoneOr<T> {
    fn none_or(self, f: impl FnOnce(T) -> bool) -> bool;
}

impl<T> NoneOr<T> for Option<T> {
    fn none_or(self, f: impl FnOnce(T) -> bool) -> bool {
        match self {
            None => true,
            Some(v) => f(v),
        }
    }
}

#[cfg(test)]
mod tests;
