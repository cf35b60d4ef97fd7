//! What each fault cost, from the run's own records: the producers' spans without
//! acknowledgements (unavailability, to the millisecond), the per-second rows (when the rate
//! and the schedule came back; latency before and during), and the notes that tie the run's
//! outages and stalls to the fault that made them.

use hdrhistogram::Histogram;

use brokerbench_model::faults::{FaultLatency, FaultReport, IntegrityBySecond};
use brokerbench_model::units::group_thousands;
use brokerbench_model::{IntervalRow, Phase, Summary};

use crate::Injected;

const SECOND_NS: u64 = 1_000_000_000;
/// Seconds before a fault that give its "before" latency and its baseline.
const BEFORE_S: u64 = 5;
/// Consecutive good seconds that count as recovered.
const RECOVERED_S: usize = 5;
/// How far a recovered second's schedule lag p99 may be above its level before the fault,
/// at least: a busy host's scheduling noise (a producer thread waiting for a core behind three
/// broker nodes catching up lags tens of ms in a good second), far below the seconds a
/// producer held back by an outage lags.
const LAG_NOISE_NS: u64 = 50_000_000;

/// The run as the faults are measured against it; times in ns since the UNIX epoch.
#[derive(Debug, Default)]
pub struct RunRecord {
    pub started_ns: u64,
    pub window_start_ns: u64,
    /// 0 while the window lasts.
    pub window_end_ns: u64,
    rows: Vec<Row>,
}

/// What one second's row says, kept for the faults.
#[derive(Debug)]
struct Row {
    /// Of the run, from 0 at the start of warm-up.
    second: u64,
    start_ns: u64,
    measured: bool,
    acknowledged: u64,
    /// Sends that failed in the second.
    failed: u64,
    publish: Histogram<u64>,
    end_to_end: Histogram<u64>,
    lag_p99_ns: u64,
}

impl RunRecord {
    pub(crate) fn keep(&mut self, row: &IntervalRow) {
        self.rows.push(Row {
            second: row.second,
            start_ns: row.start_ns,
            measured: row.phase == Phase::Measurement,
            acknowledged: row.acknowledged,
            failed: row.failed,
            publish: row.publish.clone(),
            end_to_end: row.end_to_end.clone(),
            lag_p99_ns: row.schedule_lag.value_at_quantile(0.99),
        });
    }

    fn seconds_since_start(&self, ns: u64) -> f64 {
        ns.saturating_sub(self.started_ns) as f64 / 1e9
    }

    fn window_end(&self) -> u64 {
        match self.window_end_ns {
            0 => self
                .rows
                .last()
                .map_or(self.window_start_ns, |r| r.start_ns + SECOND_NS),
            end => end,
        }
    }
}

/// What a run recorded that its faults are measured against, beside its rows.
pub struct Findings<'a> {
    /// The producers' spans without acknowledgements (sorted).
    pub gaps: &'a [(u64, u64)],
    /// The run's, None at max rate (the rate before a fault is its target then).
    pub target_rate: Option<f64>,
    /// The ledger's findings by the second each message was due.
    pub integrity: &'a IntegrityBySecond,
}

/// Every fault's report.
pub fn measure(
    injected: &[Injected],
    record: &RunRecord,
    findings: &Findings<'_>,
) -> Vec<FaultReport> {
    let starts: Vec<Option<u64>> = injected.iter().map(|i| i.injected_ns).collect();
    injected
        .iter()
        .map(|one| {
            let next = starts
                .iter()
                .flatten()
                .copied()
                .filter(|&s| one.injected_ns.is_some_and(|mine| s > mine))
                .min();
            report(one, record, findings, next)
        })
        .collect()
}

fn report(
    one: &Injected,
    record: &RunRecord,
    findings: &Findings<'_>,
    next_ns: Option<u64>,
) -> FaultReport {
    let fault = one.fault.as_ref();
    let mut report = FaultReport {
        index: one.index as u32 + 1,
        action: fault.map_or("?", |f| f.action.name()).to_string(),
        node: one.node,
        chosen: one.chosen.clone(),
        pid: one.pid,
        leader_before: one.leader_before,
        leader_after: one.leader_after,
        at_s: fault.map_or(0.0, |f| f.at.as_secs_f64()),
        restarted_pid: one.restarted_pid,
        output: one.output.clone(),
        problems: one.problems.clone(),
        ..FaultReport::default()
    };
    let Some(injected) = one.injected_ns else {
        return report;
    };
    report.injected_at_s = record.seconds_since_start(injected);
    report.ended_at_s = one.ended_ns.map(|e| record.seconds_since_start(e));
    let limit = next_ns.unwrap_or(u64::MAX).min(record.window_end());
    report.unavailable_s = unavailable(findings.gaps, injected, limit);
    report.recovered_after_s = recovered(record, injected, findings.target_rate);
    // The fault's effect lasts until the run recovered from it (or the window ended), and
    // at least until it was undone.
    let recovered_ns = report
        .recovered_after_s
        .map_or_else(|| record.window_end(), |s| injected + (s * 1e9) as u64);
    let end = recovered_ns.max(one.ended_ns.unwrap_or(0)).max(injected);
    let before_from = injected.saturating_sub(BEFORE_S * SECOND_NS);
    let seconds = (record, findings.integrity);
    report.before = latency(seconds, before_from, injected, |r| {
        r.start_ns + SECOND_NS > before_from && r.start_ns + SECOND_NS <= injected
    });
    report.during = latency(seconds, injected, end, |r| {
        r.start_ns < end && r.start_ns + SECOND_NS > injected
    });
    report
}

/// The longest span from `injected` on, and before `limit` (the next fault, or the end of
/// the window), in which a producer had a message due and no acknowledgement came, seconds.
fn unavailable(gaps: &[(u64, u64)], injected: u64, limit: u64) -> f64 {
    gaps.iter()
        .filter(|(from, to)| *to > injected && *from < limit)
        .map(|(from, to)| (*to).min(limit) - (*from).max(injected))
        .max()
        .map_or(0.0, |ns| ns as f64 / 1e9)
}

/// Seconds from the injection to the start of the first [`RECOVERED_S`] measured seconds in a
/// row whose mean acknowledged rate is within 5% of the target (acknowledgements come in
/// bursts, so one second may be off, but none below half of it) and each with the schedule
/// lag of before (twice it, or [`LAG_NOISE_NS`] more).
fn recovered(record: &RunRecord, injected: u64, target_rate: Option<f64>) -> Option<f64> {
    let before: Vec<&Row> = record
        .rows
        .iter()
        .filter(|r| {
            r.start_ns + SECOND_NS <= injected && r.start_ns + (BEFORE_S + 1) * SECOND_NS > injected
        })
        .collect();
    let rate = target_rate.or_else(|| {
        (!before.is_empty()).then(|| {
            before.iter().map(|r| r.acknowledged as f64).sum::<f64>() / before.len() as f64
        })
    })?;
    let lag_before = before.iter().map(|r| r.lag_p99_ns).max().unwrap_or(0);
    let lag_limit = (2 * lag_before).max(lag_before + LAG_NOISE_NS);
    let back = |run: &[&Row]| {
        let mean = run.iter().map(|r| r.acknowledged as f64).sum::<f64>() / run.len() as f64;
        (mean - rate).abs() <= 0.05 * rate
            && run
                .iter()
                .all(|r| r.lag_p99_ns <= lag_limit && r.acknowledged as f64 >= rate / 2.0)
    };
    let after: Vec<&Row> = record
        .rows
        .iter()
        .filter(|r| r.measured && r.start_ns >= injected)
        .collect();
    after
        .windows(RECOVERED_S)
        .find(|run| back(run))
        .map(|run| (run[0].start_ns - injected) as f64 / 1e9)
}

/// Latency, failed sends and the ledger's findings over the rows that `within` picks, which
/// run from `from_ns` to `to_ns`.
fn latency(
    (record, integrity): (&RunRecord, &IntegrityBySecond),
    from_ns: u64,
    to_ns: u64,
    within: impl Fn(&Row) -> bool,
) -> FaultLatency {
    let mut publish: Option<Histogram<u64>> = None;
    let mut end_to_end: Option<Histogram<u64>> = None;
    let mut failed = 0;
    let mut seconds = std::collections::BTreeSet::new();
    for row in record.rows.iter().filter(|r| within(r)) {
        add(&mut publish, &row.publish);
        add(&mut end_to_end, &row.end_to_end);
        failed += row.failed;
        seconds.insert(row.second);
    }
    let found = integrity.over(|second| seconds.contains(&second));
    let ms = |h: &Option<Histogram<u64>>, q: f64| {
        h.as_ref()
            .filter(|h| !h.is_empty())
            .map(|h| h.value_at_quantile(q) as f64 / 1e6)
    };
    FaultLatency {
        seconds: to_ns.saturating_sub(from_ns) as f64 / 1e9,
        publish_p99_ms: ms(&publish, 0.99),
        publish_max_ms: ms(&publish, 1.0),
        end_to_end_p99_ms: ms(&end_to_end, 0.99),
        end_to_end_max_ms: ms(&end_to_end, 1.0),
        failed,
        lost: found.map(|f| f.lost),
        duplicated: found.map(|f| f.duplicated),
        out_of_order: found.map(|f| f.out_of_order),
    }
}

fn add(into: &mut Option<Histogram<u64>>, row: &Histogram<u64>) {
    match into {
        Some(h) => {
            let _ = h.add(row);
        }
        None => *into = Some(row.clone()),
    }
}

/// When the run's outages, stalls and slow seconds began, seconds since the start of warm-up.
#[derive(Debug, Default)]
struct Events {
    outages: Vec<f64>,
    stalls: Vec<f64>,
    slowdowns: Vec<f64>,
}

/// A note for each fault that made outages, stalls or slow seconds (those that began while it
/// lasted, or within a second of its start; slow seconds also until the rate was back or a
/// second after its end: the broker's doing, not the client's), lost acknowledged messages
/// due in its seconds, or that went wrong.
pub fn notes(reports: &[FaultReport], summary: &Summary) -> Vec<String> {
    let events = Events {
        outages: summary.outages.iter().map(|o| o.start_s).collect(),
        stalls: summary.stalls.iter().map(|s| s.start_s).collect(),
        slowdowns: summary.slowdowns.iter().map(|s| s.start_s).collect(),
    };
    reports.iter().filter_map(|r| note(r, &events)).collect()
}

fn note(r: &FaultReport, events: &Events) -> Option<String> {
    let mut parts = Vec::new();
    if r.pid.is_some() || r.output.is_some() {
        let made = made_by(r, events);
        if !made.is_empty() {
            parts.push(format!(
                "made {}: the fault's doing, not the broker's own or the client's",
                made.join(" and ")
            ));
        }
    }
    if let Some(lost) = r.during.lost.filter(|&n| n > 0) {
        parts.push(format!(
            "{} of the acknowledged messages due from its injection until it ended or the run recovered, whichever came later, were never received",
            group_thousands(lost)
        ));
    }
    parts.extend(r.problems.iter().cloned());
    (!parts.is_empty())
        .then(|| format!("FAULT {} ({}): {}", r.index, r.describe(), parts.join("; ")))
}

/// The events fault `r` made, as the note names them.
fn made_by(r: &FaultReport, events: &Events) -> Vec<String> {
    let until = r
        .ended_at_s
        .unwrap_or(f64::INFINITY)
        .max(r.injected_at_s + r.unavailable_s);
    let near = |start: &f64| *start >= r.injected_at_s - 1.0 && *start <= until;
    // Slow seconds also follow a fault's end until the rate is back (a healed partition's
    // catch-up, a restarted node rejoining).
    let recovered = r.injected_at_s + r.recovered_after_s.unwrap_or(0.0);
    let after = |start: &f64| *start >= r.injected_at_s && *start <= (until + 1.0).max(recovered);
    let named = |starts: &[f64], near: &dyn Fn(&f64) -> bool, what: &str, digits: usize| {
        starts
            .iter()
            .filter(|s| near(s))
            .map(|s| format!("the {what} at {s:.digits$} s"))
            .collect::<Vec<_>>()
    };
    let mut made = named(&events.outages, &near, "OUTAGE", 1);
    made.extend(named(&events.stalls, &near, "STALL", 1));
    made.extend(named(
        &events.slowdowns,
        &|s| near(s) || after(s),
        "SLOW seconds",
        0,
    ));
    made
}

#[cfg(test)]
mod tests;
