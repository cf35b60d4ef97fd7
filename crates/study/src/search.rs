//! The maximum-sustainable-throughput search (`rate: find`).
//!
//! A step is a fresh open-loop run at one offered rate, with its own warm-up. It is
//! *sustainable* when, over its measurement window, (1) the acknowledged rate is at least 99%
//! of the offered rate (the received rate when publishing is unconfirmed), (2) the consumer
//! backlog is not growing (least-squares slope under 1% of the offered rate per second),
//! (3) the generator kept its schedule (not client-bound), (4) nothing was lost or failed,
//! and (5) every SLO given holds. The search ramps the rate up by a factor (2) from `start`
//! until a step fails (or down until one passes), then bisects between the last passing and
//! the first failing rate until they are within `precision` of each other. The found rate is
//! the last passing rate: a rate that was measured to hold, never an interpolation.

use std::path::Path;
use std::time::Duration;

use brokerbench_model::units::{parse_duration, parse_rate};
use brokerbench_model::yaml::Value;
use serde::Serialize;
use serde_json::Value as Json;

use crate::metrics;
use crate::text::{key_text, show};

/// Share of the offered rate that must be acknowledged.
pub const MIN_DELIVERED_SHARE: f64 = 0.99;
/// Largest backlog growth, per second, as a share of the offered rate.
pub const MAX_BACKLOG_SLOPE_SHARE: f64 = 0.01;

/// A latency objective: a summary latency that must not exceed a limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Slo {
    /// As written, e.g. `publish_p99`.
    pub name: String,
    /// Its summary.json path, e.g. `latency.publish.p99_ns`.
    pub path: String,
    pub limit_ns: u64,
}

/// The search's settings (`find:` in the study file).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindSpec {
    /// First offered rate, msg/s.
    pub start: f64,
    /// Stop when the bracket is narrower than this share of its lower end (0.05 = 5%).
    pub precision: f64,
    /// Measurement length of each step; None: the workload's `duration`.
    #[serde(serialize_with = "seconds")]
    pub step_duration: Option<Duration>,
    /// Factor of the ramp before the first failing step.
    pub growth: f64,
    /// Most steps one search may take.
    pub max_steps: u32,
    /// How many more times a failing step is measured when it nearly held its rate (at
    /// least [`RETRY_SHARE`] of it acknowledged, nothing lost): the rate fails only if every try fails, so
    /// one tail-latency spike near an SLO does not end the ramp. Clear overloads are not
    /// retried.
    pub retries: u32,
    pub slo: Vec<Slo>,
}

/// A failing step is retried only when at least this share of its offered rate was
/// acknowledged (and nothing was lost).
pub const RETRY_SHARE: f64 = 0.9;

fn seconds<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_f64(d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

impl Default for FindSpec {
    fn default() -> Self {
        FindSpec {
            start: 10_000.0,
            precision: 0.05,
            step_duration: None,
            growth: 2.0,
            max_steps: 20,
            retries: 1,
            slo: Vec::new(),
        }
    }
}

const FIND_FIELDS: &[&str] = &[
    "start",
    "precision",
    "step_duration",
    "growth",
    "max_steps",
    "retries",
    "slo",
];
const SLO_NAMES: &[&str] = &[
    "publish_p50",
    "publish_p90",
    "publish_p95",
    "publish_p99",
    "publish_p999",
    "publish_max",
    "end_to_end_p50",
    "end_to_end_p90",
    "end_to_end_p95",
    "end_to_end_p99",
    "end_to_end_p999",
    "end_to_end_max",
];

impl FindSpec {
    /// Parses `find:`; an error is (field under `find`, message with the fix).
    pub fn parse(value: &Value) -> Result<FindSpec, (String, String)> {
        let mut spec = FindSpec::default();
        let map = match value {
            Value::Object(m) => m,
            other => {
                return Err((
                    "(itself)".into(),
                    format!(
                        "{} is not a mapping; write e.g. find: {{start: 10000, precision: 5%, step_duration: 20s, slo: {{publish_p99: 20ms}}}}",
                        show(other)
                    ),
                ))
            }
        };
        for (k, v) in map {
            spec.set_field(k.clone(), v)?;
        }
        Ok(spec)
    }

    /// Sets the setting `key` from its value `v` under `find:`; an error is (field under
    /// `find`, message with the fix).
    fn set_field(&mut self, key: String, v: &Value) -> Result<(), (String, String)> {
        let text = key_text(v);
        match key.as_str() {
            "start" => self.start = start_rate(&text).map_err(|message| (key, message))?,
            "precision" => {
                self.precision = precision_share(&text).map_err(|message| (key, message))?
            }
            "step_duration" => {
                self.step_duration = Some(step_length(&text).map_err(|message| (key, message))?)
            }
            "growth" => self.growth = growth_factor(&text).map_err(|message| (key, message))?,
            "max_steps" => {
                self.max_steps = max_step_count(&text).map_err(|message| (key, message))?
            }
            "retries" => self.retries = retry_count(&text).map_err(|message| (key, message))?,
            "slo" => self.slo.extend(objectives(key, v)?),
            _ => {
                return Err((
                    key.clone(),
                    format!(
                        "unknown key; allowed: {}{}",
                        FIND_FIELDS.join(", "),
                        brokerbench_model::spec::did_you_mean(&key, FIND_FIELDS)
                    ),
                ))
            }
        }
        Ok(())
    }
}

/// The first offered rate (`start`), at least 1 message per second.
fn start_rate(text: &str) -> Result<f64, String> {
    match parse_rate(text) {
        Ok(Some(r)) if r >= 1.0 => Ok(r),
        _ => Err(format!(
            "'{text}' is not a rate; give messages per second, e.g. 10000 or 10k"
        )),
    }
}

/// The precision, a share between 0 and 1 written as a percentage or a fraction.
fn precision_share(text: &str) -> Result<f64, String> {
    let p = match text.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().map(|p| p / 100.0),
        None => text.parse::<f64>(),
    };
    match p {
        Ok(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err(format!(
            "'{text}' is not a precision; give a share such as 5% or 0.05"
        )),
    }
}

/// The measurement length of each step (`step_duration`), longer than 0s.
fn step_length(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d.is_zero() {
        return Err("must be longer than 0s, e.g. 20s".into());
    }
    Ok(d)
}

/// The factor of the ramp (`growth`), above 1.
fn growth_factor(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(g) if g > 1.0 => Ok(g),
        _ => Err(format!("'{text}' must be a factor above 1, e.g. 2")),
    }
}

/// The most steps one search may take (`max_steps`), at least 2.
fn max_step_count(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if n >= 2 => Ok(n),
        _ => Err(format!(
            "'{text}' must be a whole number of steps, at least 2"
        )),
    }
}

/// How many more times a failing step is measured (`retries`), from 0 to 5.
fn retry_count(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if n <= 5 => Ok(n),
        _ => Err(format!("'{text}' must be a whole number from 0 to 5")),
    }
}

/// The latency objectives under `slo:` (`key`), each a known summary latency with its limit;
/// an error is (field under `find`, message with the fix).
fn objectives(key: String, v: &Value) -> Result<Vec<Slo>, (String, String)> {
    let Value::Object(slos) = v else {
        return Err((
            key,
            "write the objectives as a mapping, e.g. slo: {publish_p99: 20ms}".into(),
        ));
    };
    let mut list = Vec::with_capacity(slos.len());
    for (name, limit) in slos {
        let name = name.clone();
        let field = format!("slo.{name}");
        let Some((group, quantile)) = name.rsplit_once('_') else {
            return Err((
                field,
                format!("unknown objective; allowed: {}", SLO_NAMES.join(", ")),
            ));
        };
        if !SLO_NAMES.contains(&name.as_str()) {
            return Err((
                field,
                format!(
                    "unknown objective; allowed: {}{}",
                    SLO_NAMES.join(", "),
                    brokerbench_model::spec::did_you_mean(&name, SLO_NAMES)
                ),
            ));
        }
        let limit_text = key_text(limit);
        let limit = parse_duration(&limit_text).map_err(|e| (field.clone(), e))?;
        let stat = if quantile == "max" {
            "max_ns".to_string()
        } else {
            format!("{quantile}_ns")
        };
        list.push(Slo {
            path: format!("latency.{group}.{stat}"),
            name,
            limit_ns: limit.as_nanos() as u64,
        });
    }
    Ok(list)
}

/// Whether one step held its offered rate, and if not, every reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub sustainable: bool,
    pub reasons: Vec<String>,
}

/// Least-squares slope of (second, backlog) points, messages per second.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}

/// The measurement window's (second, backlog) points from a run's timeseries.csv.
pub fn backlog_points(timeseries: &Path) -> std::io::Result<Vec<(f64, f64)>> {
    let mut reader = csv::Reader::from_path(timeseries)?;
    let headers = reader.headers()?.clone();
    let column = |name: &str| headers.iter().position(|h| h == name);
    let (Some(second), Some(phase), Some(backlog)) =
        (column("second"), column("phase"), column("backlog"))
    else {
        return Ok(Vec::new());
    };
    let mut points = Vec::new();
    for row in reader.records() {
        let row = row?;
        if row.get(phase) != Some("measurement") {
            continue;
        }
        if let (Some(s), Some(b)) = (
            row.get(second).and_then(|s| s.parse::<f64>().ok()),
            row.get(backlog).and_then(|b| b.parse::<f64>().ok()),
        ) {
            points.push((s, b));
        }
    }
    Ok(points)
}

fn count(summary: &Json, path: &str) -> u64 {
    metrics::value(summary, path).unwrap_or(0.0) as u64
}

/// Judges one step: its summary.json and its measurement window's backlog points.
pub fn judge(spec: &FindSpec, offered: f64, summary: &Json, backlog: &[(f64, f64)]) -> Verdict {
    let mut reasons = Vec::new();
    if summary.get("status").and_then(Json::as_str) != Some("complete") {
        reasons.push("the run did not complete".to_string());
    }
    let confirmed = count(summary, "total.acknowledged") > 0 || count(summary, "total.sent") == 0;
    let (delivered, what) = if confirmed {
        (
            metrics::value(summary, "throughput.acknowledged_per_s"),
            "acknowledged",
        )
    } else {
        (
            metrics::value(summary, "throughput.received_per_s"),
            "received (publishing unconfirmed)",
        )
    };
    let delivered = delivered.unwrap_or(0.0);
    if delivered < MIN_DELIVERED_SHARE * offered {
        reasons.push(format!(
            "{what} {delivered:.0} msg/s < 99% of the {offered:.0} offered"
        ));
    }
    if let Some(s) = slope(backlog) {
        if s > MAX_BACKLOG_SLOPE_SHARE * offered {
            reasons.push(format!(
                "consumer backlog grew {s:.0} msg/s (over 1% of the offered rate)"
            ));
        }
    }
    if summary.get("client_bound").and_then(Json::as_bool) == Some(true) {
        reasons.push("client-bound: the generator could not keep the schedule".to_string());
    }
    let lost = count(summary, "integrity.lost");
    if lost > 0 {
        reasons.push(format!("{lost} messages lost"));
    }
    let failed = count(summary, "window.failed");
    if failed > 0 {
        reasons.push(format!("{failed} sends failed"));
    }
    for slo in &spec.slo {
        match metrics::value(summary, &slo.path) {
            Some(v) if v > slo.limit_ns as f64 => reasons.push(format!(
                "{} {} > SLO {}",
                slo.name,
                brokerbench_model::units::format_nanos(v as u64),
                brokerbench_model::units::format_nanos(slo.limit_ns)
            )),
            Some(_) => {}
            None => reasons.push(format!("{} was not measured", slo.name)),
        }
    }
    Verdict {
        sustainable: reasons.is_empty(),
        reasons,
    }
}

/// One step as search.json reports it.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub offered: f64,
    /// Acknowledged msg/s (received when unconfirmed).
    pub achieved: Option<f64>,
    pub publish_p50_ns: Option<f64>,
    pub publish_p99_ns: Option<f64>,
    pub end_to_end_p50_ns: Option<f64>,
    pub end_to_end_p99_ns: Option<f64>,
    pub sustainable: bool,
    /// Why a failing step failed.
    pub reasons: Vec<String>,
    /// The step's results folder (of its last try).
    pub results: String,
    /// Why earlier tries of this step failed, when it was measured more than once.
    pub retried_because: Vec<String>,
    /// Messages lost in the step (a consumer far behind: a clear overload).
    #[serde(skip)]
    lost: f64,
}

impl Step {
    pub fn new(offered: f64, summary: &Json, verdict: Verdict, results: String) -> Step {
        let v = |p: &str| metrics::value(summary, p);
        let achieved = match v("total.acknowledged") {
            Some(a) if a > 0.0 => v("throughput.acknowledged_per_s"),
            _ => v("throughput.received_per_s"),
        };
        Step {
            offered,
            achieved,
            publish_p50_ns: v("latency.publish.p50_ns"),
            publish_p99_ns: v("latency.publish.p99_ns"),
            end_to_end_p50_ns: v("latency.end_to_end.p50_ns"),
            end_to_end_p99_ns: v("latency.end_to_end.p99_ns"),
            sustainable: verdict.sustainable,
            reasons: verdict.reasons,
            results,
            retried_because: Vec::new(),
            lost: v("integrity.lost").unwrap_or(0.0),
        }
    }

    /// Whether a failing try deserves another: it nearly held the offered rate (at least
    /// [`RETRY_SHARE`] acknowledged, nothing lost), so noise may have failed it.
    pub fn worth_retrying(&self) -> bool {
        !self.sustainable
            && self.lost == 0.0
            && self.achieved.unwrap_or(0.0) >= RETRY_SHARE * self.offered
    }
}

/// The search's state: the steps so far and what they bracket.
#[derive(Debug, Clone, Serialize)]
pub struct Search {
    pub steps: Vec<Step>,
    /// Highest offered rate that passed (below every failing one).
    pub last_pass: Option<f64>,
    /// Lowest offered rate that failed.
    pub first_fail: Option<f64>,
}

impl Search {
    pub fn new() -> Search {
        Search {
            steps: Vec::new(),
            last_pass: None,
            first_fail: None,
        }
    }

    /// The next rate to offer, or None when the search is over.
    pub fn next_rate(&self, spec: &FindSpec) -> Option<f64> {
        if self.steps.len() >= spec.max_steps as usize {
            return None;
        }
        let next = match (self.last_pass, self.first_fail) {
            (None, None) => spec.start,
            (Some(pass), None) => pass * spec.growth,
            (None, Some(fail)) => fail / spec.growth,
            (Some(pass), Some(fail)) => {
                if fail - pass <= spec.precision * pass {
                    return None;
                }
                (pass + fail) / 2.0
            }
        };
        let next = next.round();
        let tried = self.steps.iter().any(|s| s.offered == next);
        (next >= 1.0 && !tried).then_some(next)
    }

    pub fn record(&mut self, step: Step) {
        if step.sustainable {
            if self.first_fail.is_none_or(|f| step.offered < f) {
                self.last_pass = Some(self.last_pass.map_or(step.offered, |p| p.max(step.offered)));
            }
        } else {
            self.first_fail = Some(
                self.first_fail
                    .map_or(step.offered, |f| f.min(step.offered)),
            );
            if self.last_pass.is_some_and(|p| p >= step.offered) {
                // A pass above a failure: the noise is wider than the bracket; keep the
                // lower, measured-safe rate.
                self.last_pass = self
                    .steps
                    .iter()
                    .filter(|s| s.sustainable && s.offered < step.offered)
                    .map(|s| s.offered)
                    .reduce(f64::max);
            }
        }
        self.steps.push(step);
    }

    /// The highest offered rate that was sustained; None when no step passed.
    pub fn found_rate(&self) -> Option<f64> {
        self.last_pass
    }
}

impl FindSpec {
    /// Whether a try of a step is measured again: it failed but nearly held its rate, and
    /// retries are left.
    pub fn will_retry(&self, measured: &Step, attempt: u32) -> bool {
        measured.worth_retrying() && attempt <= self.retries
    }
}

/// Carries out a search: `measure(rate, step, attempt)` measures one try of a step (steps
/// and attempts count from 1) and returns it, or None to end the search early (a run failed
/// or was interrupted). Failing tries that nearly held their rate are measured again.
pub fn drive<E>(
    spec: &FindSpec,
    measure: impl FnMut(f64, u32, u32) -> Result<Option<Step>, E>,
) -> Result<Search, E> {
    drive_observed(spec, measure, |_| Ok(()))
}

/// [`drive`], with `judged(search)` called after each step is judged, with the search so far
/// (to show its steps as they come).
pub fn drive_observed<E>(
    spec: &FindSpec,
    mut measure: impl FnMut(f64, u32, u32) -> Result<Option<Step>, E>,
    mut judged: impl FnMut(&Search) -> Result<(), E>,
) -> Result<Search, E> {
    let mut search = Search::new();
    while let Some(rate) = search.next_rate(spec) {
        let step = search.steps.len() as u32 + 1;
        let mut retried_because = Vec::new();
        let mut attempt = 1;
        let last = loop {
            let Some(measured) = measure(rate, step, attempt)? else {
                return Ok(search);
            };
            if !spec.will_retry(&measured, attempt) {
                break measured;
            }
            retried_because.push(measured.reasons.join("; "));
            attempt += 1;
        };
        search.record(Step {
            retried_because,
            ..last
        });
        judged(&search)?;
    }
    Ok(search)
}

impl Default for Search {
    fn default() -> Self {
        Search::new()
    }
}

#[cfg(test)]
mod tests;
