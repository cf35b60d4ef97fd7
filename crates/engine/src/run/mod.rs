//! One run: set up the driver, wait for consumers, start producers on their schedules,
//! collect one-second intervals while the phases pass, drain, reconcile the ledger and
//! summarize. Each task has its file: [`producer`], [`consumer`], [`collect`], [`summary`].

mod anomalies;
mod backlog;
mod collect;
mod complete;
mod consumer;
mod cpu_window;
mod driver_policy;
mod producer;
mod producer_group;
mod summary;
mod summary_notes;
mod tally;
mod tasks;
mod window_measures;

use anomalies::*;
use backlog::*;
use collect::*;
use consumer::*;
use cpu_window::*;
use driver_policy::*;
use producer::*;
use producer_group::*;
use summary::*;
use summary_notes::*;
use tally::*;
use tasks::*;
use window_measures::*;

pub use complete::{complete, Measured};

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use brokerbench_driver::{
    ConsumerSlot, Driver, DriverError, Envelope, OutgoingMessage, Producer, ProducerSlot,
    SendError, Topology,
};
use brokerbench_model::{
    BacklogReport, Block, ClientCost, ConsumerShare, Counts, IntervalRow, Latencies, Outage, Phase,
    Rate, RunObserver, RunStatus, Stall, Summary, Throughput, WindowHistograms, Workload,
};

use crate::ledger::{reconcile_by_second, SubscriptionLedger, UnreadPlaces};
use crate::meter::OneMinuteRate;
use crate::payload::{BodySource, Keys, PayloadError, SharedPayload};
use crate::recorder::{
    ConsumerRecorder, ConsumerResult, Interval, ProducerRecorder, ProducerResult, Report, Times,
};
use crate::schedule::Schedule;
use crate::shard::{Assignments, Gate, LedgerFile, Shard};
use brokerbench_driver::Clock;

const SECOND_NS: u64 = 1_000_000_000;
/// The end of a window not known yet (backlog mode): far enough to never come, small enough
/// that adding a grace period cannot overflow.
const OPEN_END_NS: u64 = u64::MAX / 4;
/// How long consumers may take to get their partitions or queues before the run gives up.
const CONSUMER_READY_TIMEOUT: Duration = Duration::from_secs(30);
/// A row is written once every task has reported it, or this long after it ended.
const ROW_GRACE_NS: u64 = 1_500_000_000;
/// A producer still this far behind its schedule at the end of the window stops sending, and
/// counts what it did not send; less lateness (a last sleep that ends just past the window)
/// is finished normally.
const BEHIND_SCHEDULE_GRACE_NS: u64 = 100_000_000;
/// How long a consumer's close may hold up the end of a run.
const CONSUMER_CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Share of the window a producer must have waited for room in its client's buffer, on
/// average, for growing schedule lag to be put down to slow acknowledgements.
const BROKER_BOUND_SHARE: f64 = 0.2;
/// How far behind this process's clock another shard's may be before its messages would
/// count as older than the run (foreign).
const SHARD_CLOCK_GRACE_NS: u64 = 60 * SECOND_NS;
/// After Ctrl-C the drain lasts at most this long.
const INTERRUPTED_DRAIN: Duration = Duration::from_secs(2);

/// Why a run could not be carried out.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Driver(#[from] DriverError),
    #[error(transparent)]
    Payload(#[from] PayloadError),
    #[error("consumers did not get their partitions within {0:?}; is the broker healthy? (group coordination may be failing)")]
    ConsumersNotReady(Duration),
    #[error("interrupted before the load started")]
    Interrupted,
    #[error("a {0} task panicked: {1}")]
    TaskPanicked(&'static str, String),
    /// The shards of a run did not meet (one never arrived, or they disagree).
    #[error("{0}")]
    Shards(String),
}

/// Inputs that control a run from outside.
#[derive(Debug, Clone)]
pub struct RunControl {
    /// Short id of the run, used in topic and group names.
    pub run_id: String,
    /// Set (e.g. by Ctrl-C) to stop producers; the run drains briefly and ends `interrupted`.
    pub stop: Arc<AtomicBool>,
}

/// The result of a run.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub summary: Summary,
    /// The measurement window's latency histograms behind the summary's percentiles.
    pub histograms: WindowHistograms,
    /// Start of warm-up, ns since the UNIX epoch.
    pub started_ns: u64,
    /// When the last task finished, ns since the UNIX epoch.
    pub ended_ns: u64,
    /// What each producer had acknowledged and each consumer received, for a merge.
    pub ledger: LedgerFile,
    /// Every producer's spans longer than 100 ms in which a message was due and no
    /// acknowledgement came, (from, to) in ns since the UNIX epoch, sorted.
    pub ack_gaps: Vec<(u64, u64)>,
    /// The ledger's findings by the second of the run each message was due, adding up to the
    /// summary's lost, duplicated and out-of-order counts (empty for a shard: a sharded run has
    /// no faults, and its merge counts over the whole run only).
    pub integrity_by_second: brokerbench_model::faults::IntegrityBySecond,
}

/// A shard's part of a run: which shard, and the gate it passes with the others.
pub struct Sharding<'a> {
    pub shard: Shard,
    pub gate: &'a mut dyn Gate,
}

/// State shared between the collector and the tasks; all of it off the per-message path.
struct Shared {
    clock: Clock,
    times: OnceLock<Times>,
    /// Ctrl-C.
    stop: Arc<AtomicBool>,
    /// Tells consumers the drain is over.
    consumers_stop: AtomicBool,
    /// Set when the drain ended because the consumers had received every acknowledged
    /// message: they need not ask the broker what it still holds.
    consumers_caught_up: AtomicBool,
    /// Backlog mode: consumers hold off while set.
    consumers_paused: AtomicBool,
    /// End of the measurement window, ns since the UNIX epoch: `Times::measure_end_ns`, or
    /// [`OPEN_END_NS`] in backlog mode until the backlog is drained.
    measure_end_ns: AtomicU64,
    /// Partitions or queues assigned, per consumer task.
    assigned: Vec<AtomicUsize>,
    /// Distinct messages received, per consumer task.
    unique: Vec<AtomicU64>,
    /// Earliest intended send time a message of this run can have.
    run_floor_ns: u64,
    drain_timeout: Duration,
}

impl Shared {
    #[inline]
    fn measure_end(&self) -> u64 {
        self.measure_end_ns.load(Ordering::Relaxed)
    }

    fn drain_deadline(&self, from_ns: u64) -> u64 {
        let drain = if self.stop.load(Ordering::Relaxed) {
            self.drain_timeout.min(INTERRUPTED_DRAIN)
        } else {
            self.drain_timeout
        };
        from_ns + drain.as_nanos() as u64
    }
}

/// Runs the workload against the driver, reporting intervals to `observer` as they complete.
pub fn run(
    workload: &Workload,
    driver: &mut dyn Driver,
    observer: &mut dyn RunObserver,
    control: &RunControl,
) -> Result<RunOutcome, EngineError> {
    run_shard(workload, driver, observer, control, None)
}

/// Runs shard `sharding.shard` of the workload: its share of the producers and consumers,
/// starting with the other shards through the gate. Without sharding, the whole workload.
pub fn run_shard(
    workload: &Workload,
    driver: &mut dyn Driver,
    observer: &mut dyn RunObserver,
    control: &RunControl,
    mut sharding: Option<Sharding<'_>>,
) -> Result<RunOutcome, EngineError> {
    let clock = Clock::process();
    // Another shard's messages carry its clock's send times, which may be behind this one's
    // (hosts' clocks differ): a minute's grace before they would count as foreign.
    let run_floor_ns = clock.now_ns()
        - if sharding.is_some() {
            SHARD_CLOCK_GRACE_NS
        } else {
            0
        };
    let topology = Topology {
        run_id: control.run_id.clone(),
        workload: workload.name.clone(),
        topics: workload.topics,
        partitions_per_topic: workload.partitions_per_topic,
        consumers_per_topic: workload.consumers_per_topic,
        subscriptions_per_topic: workload.subscriptions_per_topic,
        shard: sharding.as_ref().map(|s| (s.shard.index, s.shard.count)),
    };
    let payload = SharedPayload::prepare(&workload.payload, workload.message_size, workload.seed)?;
    driver.prepare(&topology)?;
    let outcome = run_prepared(
        workload,
        driver,
        observer,
        control,
        (clock, run_floor_ns),
        &payload,
        sharding.as_mut(),
    );
    if let (Ok(_), Some(sharding)) = (&outcome, sharding.as_mut()) {
        // The shard that removes what the run created waits for the others to finish.
        sharding.gate.finish();
    }
    observer.drained(clock.now_ns());
    let cleanup = driver.cleanup();
    let mut outcome = outcome?;
    if let Err(e) = cleanup {
        outcome.summary.notes.push(format!("cleanup failed: {e}"));
    }
    Ok(outcome)
}

fn run_prepared(
    workload: &Workload,
    driver: &mut dyn Driver,
    observer: &mut dyn RunObserver,
    control: &RunControl,
    (clock, run_floor_ns): (Clock, u64),
    payload: &SharedPayload,
    mut sharding: Option<&mut Sharding<'_>>,
) -> Result<RunOutcome, EngineError> {
    // Producer ids and consumer slots are the whole workload's; a shard runs those it takes.
    let producer_count = workload.producer_count();
    let shard = sharding.as_ref().map(|s| s.shard);
    let takes = move |n: usize| shard.is_none_or(|s| s.takes(n));
    let producer_ids: Vec<u32> = (0..producer_count)
        .filter(|&id| takes(id as usize))
        .collect();
    let local_producers = producer_ids.len() as u32;
    let (slots, subscriptions) = local_slots(workload, driver, &takes);
    let consumers = consumer_tasks(driver, &slots, local_producers)?;
    let shared = new_shared(workload, control, (clock, run_floor_ns), slots.len());
    let (reports, collector) = mpsc::channel::<Report>();
    let producers = (local_producers, producer_count);
    let mut handles = spawn_consumers(consumers, producers, &shared, &reports);
    if sharding.is_none() {
        // With shards, the gate waits for every shard's consumers together.
        if let Err(e) = wait_for_consumers(driver, workload, &slots, &shared) {
            stop_consumers(&shared, reports, handles);
            return Err(e);
        }
    }
    let (producers, confirms) = open_producers(workload, driver, payload, &takes)?;
    let release = Arc::new(Release::default());
    handles.extend(spawn_producers(
        workload, producers, &release, &shared, &reports,
    ));
    let start = start_time(sharding.as_deref_mut(), driver, &slots, &shared);
    let start_ns = match start {
        Ok(start) => start,
        Err(e) => {
            release.give(None);
            stop_consumers(&shared, reports, handles);
            return Err(EngineError::Shards(e));
        }
    };
    let times = set_times(&shared, workload, start_ns);
    release.give(Some(times));
    drop(reports);

    let collected = collect(
        workload,
        &shared,
        times,
        (local_producers as usize, &slots, subscriptions),
        collector,
        observer,
        sharding.as_mut().map(|s| &mut *s.gate),
    );
    join_tasks(handles)?;
    let ended_ns = clock.now_ns();
    let policy = driver_policy(driver, confirms);
    Ok(outcome(
        workload,
        &policy,
        control,
        (times, ended_ns),
        collected,
        (&producer_ids, shard),
    ))
}

/// When the load starts: shortly from now on the run's clock, or, with shards, the start the
/// gate agrees with the others once every shard's consumers are ready (or Ctrl-C).
fn start_time(
    sharding: Option<&mut Sharding<'_>>,
    driver: &dyn Driver,
    slots: &[ConsumerSlot],
    shared: &Shared,
) -> Result<u64, String> {
    match sharding {
        None => Ok(shared.clock.now_ns() + 50_000_000),
        Some(sharding) => {
            let mut local = || assignments(slots, shared);
            let ready = |topic: u32, assigned: &[usize]| driver.subscription_ready(topic, assigned);
            sharding.gate.start(&mut local, &ready, &shared.stop)
        }
    }
}

/// The phases' times from `start_ns`, set where the tasks and the collector read them.
fn set_times(shared: &Shared, workload: &Workload, start_ns: u64) -> Times {
    let times = phase_times(workload, start_ns);
    shared
        .measure_end_ns
        .store(times.measure_end_ns, Ordering::Relaxed);
    shared.times.set(times).expect("times are set once");
    times
}

/// What the summary must know about the driver, asked once the tasks are done.
fn driver_policy(driver: &dyn Driver, confirms: bool) -> DriverPolicy {
    DriverPolicy {
        name: driver.name(),
        drops: driver.broker_drop_policy(),
        dropped: driver.broker_dropped(),
        confirms,
        events: driver.client_events(),
        failure_settings: driver.failure_settings(),
    }
}

/// The run's outcome: the summary of what was collected, its histograms and ledger, and
/// every producer's spans without acknowledgements; `ended_ns` is when the last task ended.
fn outcome(
    workload: &Workload,
    policy: &DriverPolicy,
    control: &RunControl,
    (times, ended_ns): (Times, u64),
    collected: Collected,
    (producer_ids, shard): (&[u32], Option<Shard>),
) -> RunOutcome {
    let ack_gaps = collected.ack_gaps();
    let (summary, histograms, ledger, integrity_by_second) = summarize(
        workload,
        policy,
        control,
        times,
        collected,
        (producer_ids, shard),
    );
    RunOutcome {
        summary,
        histograms,
        started_ns: times.start_ns,
        ended_ns,
        ledger,
        ack_gaps,
        integrity_by_second,
    }
}

/// Partitions or queues assigned to each consumer now, by (topic, subscription).
fn assignments(slots: &[ConsumerSlot], shared: &Shared) -> Assignments {
    let mut assigned: Assignments = BTreeMap::new();
    for (i, slot) in slots.iter().enumerate() {
        assigned
            .entry((slot.topic, slot.subscription))
            .or_default()
            .push(shared.assigned[i].load(Ordering::Relaxed));
    }
    assigned
}

/// Ends the consumer tasks of a run that cannot start.
fn stop_consumers(
    shared: &Shared,
    reports: mpsc::Sender<Report>,
    handles: Vec<(&'static str, JoinHandle<()>)>,
) {
    shared.consumers_stop.store(true, Ordering::SeqCst);
    drop(reports);
    for (_, h) in handles {
        let _ = h.join();
    }
}

fn wait_for_consumers(
    driver: &dyn Driver,
    workload: &Workload,
    slots: &[ConsumerSlot],
    shared: &Shared,
) -> Result<(), EngineError> {
    if slots.is_empty() {
        return Ok(());
    }
    let deadline = std::time::Instant::now() + CONSUMER_READY_TIMEOUT;
    loop {
        if assignments(slots, shared)
            .iter()
            .all(|(&(topic, _), assigned)| driver.subscription_ready(topic, assigned))
        {
            return Ok(());
        }
        if shared.stop.load(Ordering::Relaxed) {
            return Err(EngineError::Interrupted);
        }
        if std::time::Instant::now() > deadline {
            let _ = workload;
            return Err(EngineError::ConsumersNotReady(CONSUMER_READY_TIMEOUT));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
