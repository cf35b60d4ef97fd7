//! One run: set up the driver, wait for consumers, start producers on their schedules,
//! collect one-second intervals while the phases pass, drain, reconcile the ledger and
//! summarize.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use brokerbench_driver::{
    ConsumerSlot, Driver, DriverError, Envelope, OutgoingMessage, Producer, SendError, Topology,
};
use brokerbench_model::{
    ClientCost, ConsumerShare, Counts, IntervalRow, Latencies, LatencySummary, Phase, Rate,
    RunObserver, RunStatus, Summary, Throughput, WindowHistograms, Workload,
};

use crate::ledger::{reconcile, SubscriptionLedger};
use crate::meter::OneMinuteRate;
use crate::payload::{BodySource, Keys, PayloadError, SharedPayload};
use crate::recorder::{
    ConsumerRecorder, ConsumerResult, Interval, ProducerRecorder, ProducerResult, Report, Times,
};
use crate::schedule::Schedule;
use brokerbench_driver::Clock;

const SECOND_NS: u64 = 1_000_000_000;
/// Shortest sleep of a producer waiting for its next intended send time (see `wait_until`).
const MIN_SLEEP_NS: u64 = 100_000;
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
}

/// State shared between the collector and the tasks; all of it off the per-message path.
struct Shared {
    clock: Clock,
    times: OnceLock<Times>,
    /// Ctrl-C.
    stop: Arc<AtomicBool>,
    /// Tells consumers the drain is over.
    consumers_stop: AtomicBool,
    /// Partitions or queues assigned, per consumer task.
    assigned: Vec<AtomicUsize>,
    /// Distinct messages received, per consumer task.
    unique: Vec<AtomicU64>,
    /// Earliest intended send time a message of this run can have.
    run_floor_ns: u64,
    drain_timeout: Duration,
}

impl Shared {
    fn drain_deadline(&self, from_ns: u64) -> u64 {
        let drain = if self.stop.load(Ordering::Relaxed) {
            self.drain_timeout.min(INTERRUPTED_DRAIN)
        } else {
            self.drain_timeout
        };
        from_ns + drain.as_nanos() as u64
    }
}

struct ConsumerTask {
    task: usize,
    slot: ConsumerSlot,
    consumer: Box<dyn brokerbench_driver::Consumer>,
}

/// Runs the workload against the driver, reporting intervals to `observer` as they complete.
pub fn run(
    workload: &Workload,
    driver: &mut dyn Driver,
    observer: &mut dyn RunObserver,
    control: &RunControl,
) -> Result<RunOutcome, EngineError> {
    let clock = Clock::process();
    let run_floor_ns = clock.now_ns();
    let topology = Topology {
        run_id: control.run_id.clone(),
        workload: workload.name.clone(),
        topics: workload.topics,
        partitions_per_topic: workload.partitions_per_topic,
        consumers_per_topic: workload.consumers_per_topic,
    };
    let payload = SharedPayload::prepare(&workload.payload, workload.message_size, workload.seed)?;
    driver.prepare(&topology)?;
    let outcome = run_prepared(
        workload,
        driver,
        observer,
        control,
        clock,
        run_floor_ns,
        &payload,
    );
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
    clock: Clock,
    run_floor_ns: u64,
    payload: &SharedPayload,
) -> Result<RunOutcome, EngineError> {
    let producer_count = workload.producer_count();
    let subscriptions = if workload.consumers_per_topic == 0 {
        0
    } else {
        driver.subscriptions_per_topic()
    };
    let mut consumer_tasks = Vec::new();
    for topic in 0..workload.topics {
        for subscription in 0..subscriptions {
            for member in 0..workload.consumers_per_topic {
                let slot = ConsumerSlot {
                    topic,
                    subscription,
                    member,
                };
                let task = producer_count as usize + consumer_tasks.len();
                consumer_tasks.push(ConsumerTask {
                    task,
                    slot,
                    consumer: driver.consumer(slot)?,
                });
            }
        }
    }
    let consumer_count = consumer_tasks.len();
    let shared = Arc::new(Shared {
        clock,
        times: OnceLock::new(),
        stop: control.stop.clone(),
        consumers_stop: AtomicBool::new(false),
        assigned: (0..consumer_count).map(|_| AtomicUsize::new(0)).collect(),
        unique: (0..consumer_count).map(|_| AtomicU64::new(0)).collect(),
        run_floor_ns,
        drain_timeout: workload.drain_timeout,
    });
    let (reports, collector) = mpsc::channel::<Report>();
    let slots: Vec<ConsumerSlot> = consumer_tasks.iter().map(|c| c.slot).collect();
    let mut handles: Vec<(&'static str, JoinHandle<()>)> = Vec::new();
    for task in consumer_tasks {
        let shared = shared.clone();
        let reports = reports.clone();
        let producers = producer_count;
        handles.push((
            "consumer",
            std::thread::Builder::new()
                .name(format!("consumer-{}", task.task))
                .spawn(move || consumer_loop(task, producers, shared, reports))
                .expect("spawn consumer thread"),
        ));
    }
    if let Err(e) = wait_for_consumers(driver, workload, &slots, &shared) {
        shared.consumers_stop.store(true, Ordering::SeqCst);
        drop(reports);
        for (_, h) in handles {
            let _ = h.join();
        }
        return Err(e);
    }

    let mut producers: Vec<(u32, u32, Box<dyn Producer>, BodySource)> = Vec::new();
    let mut confirms = true;
    for topic in 0..workload.topics {
        for n in 0..workload.producers_per_topic {
            let id = topic * workload.producers_per_topic + n;
            let body = payload.source(id, workload.seed)?;
            let producer = driver.producer(topic, id)?;
            confirms &= producer.confirms();
            producers.push((id, topic, producer, body));
        }
    }

    let start_ns = clock.now_ns() + 50_000_000;
    let times = Times {
        start_ns,
        warmup_end_ns: start_ns + workload.warmup.as_nanos() as u64,
        measure_end_ns: start_ns + (workload.warmup + workload.duration).as_nanos() as u64,
    };
    shared.times.set(times).expect("times are set once");
    let rate_per_producer = workload.rate_per_producer();
    for (id, topic, producer, body) in producers {
        let schedule = rate_per_producer.map(|rate| {
            // Stagger producers evenly inside one gap so that they do not send in bursts together.
            let offset = (id as f64 / producer_count as f64 * 1e9 / rate) as u64;
            Schedule::new(
                workload.arrival,
                rate,
                start_ns + offset,
                workload.seed ^ (id as u64 + 1),
            )
        });
        let recorder = ProducerRecorder::new(
            id as usize,
            topic,
            producer.confirms(),
            times,
            reports.clone(),
        );
        let keys = Keys::new(workload.keys, workload.seed.wrapping_add(id as u64));
        let task = ProducerTask {
            id,
            producer,
            body,
            keys,
            schedule,
            max_in_flight: workload.max_in_flight as usize,
            recorder,
            shared: shared.clone(),
        };
        handles.push((
            "producer",
            std::thread::Builder::new()
                .name(format!("producer-{id}"))
                .spawn(move || task.run())
                .expect("spawn producer thread"),
        ));
    }
    drop(reports);

    let collected = collect(
        workload,
        &shared,
        times,
        &slots,
        subscriptions,
        collector,
        observer,
    );
    let mut panicked = None;
    for (kind, handle) in handles {
        if let Err(panic) = handle.join() {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panicked.get_or_insert(EngineError::TaskPanicked(kind, message));
        }
    }
    if let Some(e) = panicked {
        return Err(e);
    }
    let ended_ns = clock.now_ns();
    let policy = DriverPolicy {
        name: driver.name(),
        drops: driver.broker_drop_policy(),
        confirms,
    };
    let (summary, histograms) = summarize(workload, &policy, control, times, collected);
    Ok(RunOutcome {
        summary,
        histograms,
        started_ns: start_ns,
        ended_ns,
    })
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
        let mut groups: BTreeMap<(u32, u32), Vec<usize>> = BTreeMap::new();
        for (i, slot) in slots.iter().enumerate() {
            groups
                .entry((slot.topic, slot.subscription))
                .or_default()
                .push(shared.assigned[i].load(Ordering::Relaxed));
        }
        if groups
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

fn consumer_loop(
    mut task: ConsumerTask,
    producers: u32,
    shared: Arc<Shared>,
    reports: mpsc::Sender<Report>,
) {
    let placeholder = Times {
        start_ns: u64::MAX,
        warmup_end_ns: u64::MAX,
        measure_end_ns: u64::MAX,
    };
    let mut recorder = ConsumerRecorder::new(task.task, task.slot, producers, placeholder, reports);
    let index = task.task - producers as usize;
    let mut started = false;
    let clock = shared.clock;
    let floor = shared.run_floor_ns;
    while !shared.consumers_stop.load(Ordering::Relaxed) {
        if !started {
            if let Some(times) = shared.times.get() {
                recorder.set_times(*times);
                started = true;
            }
        }
        let result = task
            .consumer
            .poll(Duration::from_millis(100), &mut |delivery| {
                recorder.received(&delivery, clock.now_ns(), floor);
            });
        if let Err(kind) = result {
            recorder.error(&kind);
        }
        shared.assigned[index].store(task.consumer.assigned(), Ordering::Relaxed);
        shared.unique[index].store(recorder.unique(), Ordering::Relaxed);
        if started {
            recorder.roll(clock.now_ns());
        }
    }
    recorder.finish();
    close_within(task.consumer, CONSUMER_CLOSE_TIMEOUT);
}

/// Closes a consumer, waiting at most `timeout`: a client whose broker has gone may block in
/// its close (librdkafka waits up to the group session timeout), and the run's results must
/// not wait for that. A close still under way goes on in the background.
fn close_within(consumer: Box<dyn brokerbench_driver::Consumer>, timeout: Duration) {
    let (closed, wait) = mpsc::channel();
    let closing = std::thread::Builder::new()
        .name("consumer-close".into())
        .spawn(move || {
            drop(consumer);
            let _ = closed.send(());
        });
    if closing.is_ok() {
        let _ = wait.recv_timeout(timeout);
    }
}

struct ProducerTask {
    id: u32,
    producer: Box<dyn Producer>,
    body: BodySource,
    keys: Keys,
    /// None in max-rate mode.
    schedule: Option<Schedule>,
    max_in_flight: usize,
    recorder: ProducerRecorder,
    shared: Arc<Shared>,
}

impl ProducerTask {
    fn run(mut self) {
        set_precise_sleep();
        let clock = self.shared.clock;
        let stop = &self.shared.stop;
        let times = *self
            .shared
            .times
            .get()
            .expect("times set before producers start");
        let producer = self.producer.as_mut();
        let recorder = &mut self.recorder;
        let mut message = Vec::with_capacity(1024);
        let mut sequence = 0u64;
        let mut since_poll = 0u32;
        'send: loop {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let (intended, now) = match self.schedule.as_mut() {
                Some(schedule) => {
                    let intended = schedule.next_ns();
                    if intended >= times.measure_end_ns {
                        break;
                    }
                    let now = wait_until(producer, recorder, clock, intended, stop);
                    if now >= times.measure_end_ns + BEHIND_SCHEDULE_GRACE_NS {
                        // Far behind schedule at the end of the window: what was due and not
                        // sent is counted, not sent late into the drain.
                        let mut not_sent = 1;
                        while schedule.next_ns() < times.measure_end_ns {
                            not_sent += 1;
                        }
                        recorder.not_sent(not_sent);
                        break;
                    }
                    (intended, now)
                }
                None => {
                    if sequence == 0 {
                        wait_until(producer, recorder, clock, times.start_ns, stop);
                    }
                    while producer.in_flight() >= self.max_in_flight
                        && !stop.load(Ordering::Relaxed)
                    {
                        poll_acks(producer, recorder, clock, Duration::from_millis(1));
                    }
                    let now = clock.now_ns();
                    if now >= times.measure_end_ns {
                        break;
                    }
                    // Closed loop: the intended send time is the actual one.
                    (now, now)
                }
            };
            if self.body.fill(&mut message).is_err() {
                // A data file that cannot be read any more ends this producer, counted as an error.
                recorder.send_failed("payload_read", clock.now_ns());
                break;
            }
            Envelope {
                producer: self.id,
                sequence,
                intended_ns: intended,
            }
            .write(&mut message);
            sequence += 1;
            let key = self.keys.next_key();
            // The first attempt goes out at the time the wait ended (nothing blocks in
            // between); a retry after backpressure reads the clock again.
            let mut sent_ns = now;
            loop {
                let outgoing = OutgoingMessage {
                    key,
                    payload: &message,
                    sent_ns,
                };
                match producer.send(outgoing) {
                    Ok(()) => {
                        recorder.sent(sequence - 1, intended, sent_ns, message.len());
                        break;
                    }
                    Err(SendError::Backpressure) => {
                        // The client's buffer is full: the schedule slips, and the lag shows it.
                        poll_acks(producer, recorder, clock, Duration::from_millis(1));
                        if stop.load(Ordering::Relaxed) {
                            break 'send;
                        }
                        sent_ns = clock.now_ns();
                    }
                    Err(SendError::Failed(kind)) => {
                        recorder.send_failed(&kind, clock.now_ns());
                        break;
                    }
                }
            }
            since_poll += 1;
            if since_poll >= 64 {
                since_poll = 0;
                poll_acks(producer, recorder, clock, Duration::ZERO);
            }
        }
        // Drain: wait for outstanding acknowledgements.
        let deadline = self.shared.drain_deadline(clock.now_ns());
        while producer.in_flight() > 0 && clock.now_ns() < deadline {
            poll_acks(producer, recorder, clock, Duration::from_millis(10));
            recorder.roll(clock.now_ns());
        }
        let unacknowledged = producer.in_flight() as u64;
        let note = producer.ack_note();
        producer.abandon();
        recorder.roll(clock.now_ns());
        drop(self.producer);
        self.recorder.finish(unacknowledged, note);
    }
}

/// Hands the acknowledgements that have arrived to the recorder, at the time the driver saw
/// each arrive, or else the time the first of them was handed over (one broker response
/// acknowledges a whole batch).
#[inline]
fn poll_acks(
    producer: &mut dyn Producer,
    recorder: &mut ProducerRecorder,
    clock: Clock,
    timeout: Duration,
) {
    let mut now = 0;
    producer.poll(timeout, &mut |ack| {
        let arrived = ack.acknowledged_ns.unwrap_or_else(|| {
            if now == 0 {
                now = clock.now_ns();
            }
            now
        });
        recorder.acknowledged(&ack, arrived)
    });
}

/// Waits until `intended_ns`, serving acknowledgements meanwhile, and returns the time it
/// stopped waiting. Never spins.
fn wait_until(
    producer: &mut dyn Producer,
    recorder: &mut ProducerRecorder,
    clock: Clock,
    intended_ns: u64,
    stop: &AtomicBool,
) -> u64 {
    loop {
        let now = clock.now_ns();
        if now >= intended_ns || stop.load(Ordering::Relaxed) {
            return now;
        }
        let remaining = intended_ns - now;
        poll_acks(producer, recorder, clock, Duration::ZERO);
        recorder.roll(now);
        if remaining > 3_000_000 {
            let wait = (remaining - 2_000_000).min(100_000_000);
            poll_acks(producer, recorder, clock, Duration::from_nanos(wait));
        } else {
            // Spinning would take a core from the broker on a small machine, and a timer per
            // message costs more CPU than the send itself. So a producer sleeps at least
            // MIN_SLEEP and then sends everything that has come due; each message's lateness
            // is recorded as schedule lag and is part of its publish latency.
            std::thread::sleep(Duration::from_nanos(remaining.max(MIN_SLEEP_NS)));
        }
    }
}

/// Makes `nanosleep` wake up on time (the default timer slack is 50 µs).
fn set_precise_sleep() {
    // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// Everything the collector gathered.
struct Collected {
    producers: Vec<ProducerResult>,
    consumers: Vec<ConsumerResult>,
    /// Max schedule lag per measurement second, ns.
    lag_per_second: Vec<u64>,
    cpu: Option<(Rusage, Rusage)>,
    /// When the measurement window actually ended (earlier than planned after Ctrl-C).
    measurement_end_ns: u64,
    /// Set when the drain ended at its timeout before consumers had received every
    /// acknowledged message: how many they received in the drain's last one to two seconds
    /// (more than 0: still receiving, so some of what is missing may only be late).
    drain_cut_off: Option<u64>,
}

/// Messages received (unique, all consumers) at one-second marks during the drain, to tell
/// at its timeout whether consumers were still receiving.
#[derive(Debug, Default)]
struct DrainProgress {
    /// (time, received) of the mark before the last, and of the last.
    marks: [(u64, u64); 2],
}

impl DrainProgress {
    fn observe(&mut self, now: u64, received: u64) {
        if self.marks[1].0 == 0 {
            self.marks = [(now, received); 2];
        } else if now >= self.marks[1].0 + SECOND_NS {
            self.marks = [self.marks[1], (now, received)];
        }
    }

    /// Received since the older mark (one to two seconds ago).
    fn recent(&self, received: u64) -> u64 {
        received.saturating_sub(self.marks[0].1)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Rusage {
    user_s: f64,
    system_s: f64,
    max_rss_bytes: u64,
}

fn rusage() -> Rusage {
    // SAFETY: getrusage fills the zeroed struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Rusage {
        user_s: seconds(usage.ru_utime),
        system_s: seconds(usage.ru_stime),
        max_rss_bytes: usage.ru_maxrss as u64 * 1024,
    }
}

/// Builds and emits one-second rows as tasks report, moves through the phases and ends the drain.
fn collect(
    workload: &Workload,
    shared: &Shared,
    times: Times,
    slots: &[ConsumerSlot],
    subscriptions: u32,
    reports: mpsc::Receiver<Report>,
    observer: &mut dyn RunObserver,
) -> Collected {
    let clock = shared.clock;
    let producer_count = workload.producer_count() as usize;
    let tasks = producer_count + slots.len();
    let mut progress = vec![0u64; tasks];
    let mut pending: BTreeMap<u64, Interval> = BTreeMap::new();
    let mut next_row = 0u64;
    let mut producers: Vec<Option<ProducerResult>> = (0..producer_count).map(|_| None).collect();
    let mut consumers = Vec::new();
    let mut acknowledged_per_topic = vec![0u64; workload.topics as usize];
    let mut phase = Phase::Warmup;
    let mut drain_started_ns = None;
    let mut cpu_start = None;
    let mut cpu = None;
    let mut meter = OneMinuteRate::default();
    let mut acknowledged_so_far = 0u64;
    let mut received_so_far = 0u64;
    let mut lag_per_second = Vec::new();
    let mut measurement_end_ns = times.measure_end_ns;
    let mut drain_progress = DrainProgress::default();
    let mut drain_cut_off = None;
    observer.phase_started(Phase::Warmup, times.start_ns);
    loop {
        let all_done = progress.iter().all(|&p| p == u64::MAX);
        if !all_done {
            match reports.recv_timeout(Duration::from_millis(20)) {
                Ok(Report::Interval { task, interval }) => {
                    progress[task] = progress[task].max(interval.index + 1);
                    let index = interval.index.max(next_row);
                    match pending.get_mut(&index) {
                        Some(row) => row.merge(&interval),
                        None => {
                            let mut row = *interval;
                            row.index = index;
                            pending.insert(index, row);
                        }
                    }
                }
                Ok(Report::ProducerDone { task, result }) => {
                    progress[task] = u64::MAX;
                    acknowledged_per_topic[result.ledger.topic as usize] +=
                        result.ledger.acknowledged.len();
                    producers[task] = Some(*result);
                }
                Ok(Report::ConsumerDone { task, result }) => {
                    progress[task] = u64::MAX;
                    consumers.push(*result);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    progress.iter_mut().for_each(|p| *p = u64::MAX);
                }
            }
        }
        let now = clock.now_ns();
        if phase == Phase::Warmup && now >= times.warmup_end_ns {
            phase = Phase::Measurement;
            cpu_start = Some(rusage());
            observer.phase_started(phase, times.warmup_end_ns);
        }
        let producers_done = producers.iter().all(Option::is_some);
        if phase != Phase::Drain && (now >= times.measure_end_ns || producers_done) {
            if phase == Phase::Measurement {
                cpu = cpu_start.map(|start| (start, rusage()));
            }
            measurement_end_ns = now.min(times.measure_end_ns).max(times.warmup_end_ns);
            phase = Phase::Drain;
            drain_started_ns = Some(now);
            observer.phase_started(phase, now);
        }
        if phase == Phase::Drain && !shared.consumers_stop.load(Ordering::Relaxed) {
            drain_progress.observe(now, received_unique(shared));
        }
        if producers_done && !shared.consumers_stop.load(Ordering::Relaxed) {
            let caught_up = (0..workload.topics).all(|topic| {
                let received: u64 = slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.topic == topic)
                    .map(|(i, _)| shared.unique[i].load(Ordering::Relaxed))
                    .sum();
                received >= acknowledged_per_topic[topic as usize] * subscriptions as u64
            });
            let deadline = shared.drain_deadline(drain_started_ns.unwrap_or(now));
            if caught_up || now >= deadline {
                if !caught_up && !slots.is_empty() {
                    drain_cut_off = Some(drain_progress.recent(received_unique(shared)));
                }
                shared.consumers_stop.store(true, Ordering::Relaxed);
            }
        }
        let all_done = progress.iter().all(|&p| p == u64::MAX);
        loop {
            let row_end = times.start_ns + (next_row + 1) * SECOND_NS;
            let reported = progress.iter().all(|&p| p > next_row);
            let ready = if all_done {
                pending
                    .keys()
                    .next_back()
                    .is_some_and(|&last| next_row <= last)
            } else {
                (reported && now >= row_end) || now >= row_end + ROW_GRACE_NS
            };
            if !ready {
                break;
            }
            let interval = pending
                .remove(&next_row)
                .unwrap_or_else(|| Interval::new(next_row));
            let row_start = times.start_ns + next_row * SECOND_NS;
            let row_phase = if row_start < times.warmup_end_ns {
                Phase::Warmup
            } else if row_start
                < drain_started_ns
                    .unwrap_or(u64::MAX)
                    .min(times.measure_end_ns)
            {
                Phase::Measurement
            } else {
                Phase::Drain
            };
            if row_phase == Phase::Measurement {
                lag_per_second.push(interval.schedule_lag_max_ns);
            }
            acknowledged_so_far += interval.acknowledged;
            received_so_far += interval.received;
            meter.add_second(interval.acknowledged);
            let row = IntervalRow {
                second: next_row,
                phase: row_phase,
                start_ns: row_start,
                sent: interval.sent,
                acknowledged: interval.acknowledged,
                failed: interval.failed,
                received: interval.received,
                bytes_acknowledged: interval.bytes_acknowledged,
                bytes_received: interval.bytes_received,
                backlog: (subscriptions > 0).then(|| {
                    (acknowledged_so_far * subscriptions as u64) as i64 - received_so_far as i64
                }),
                acknowledged_rate_1m: meter.rate(),
                publish: interval.publish,
                end_to_end: interval.end_to_end,
                schedule_lag_max_ns: interval.schedule_lag_max_ns,
            };
            observer.interval(&row);
            next_row += 1;
        }
        if all_done && pending.is_empty() {
            break;
        }
    }
    if cpu.is_none() {
        cpu = cpu_start.map(|start| (start, rusage()));
    }
    Collected {
        producers: producers.into_iter().flatten().collect(),
        consumers,
        lag_per_second,
        cpu,
        measurement_end_ns,
        drain_cut_off,
    }
}

/// Distinct messages received so far by all consumers.
fn received_unique(shared: &Shared) -> u64 {
    shared
        .unique
        .iter()
        .map(|u| u.load(Ordering::Relaxed))
        .sum()
}

/// Client-bound when the schedule lag at the end of the window is large and has grown.
fn client_bound(lag_per_second: &[u64]) -> bool {
    if lag_per_second.len() < 2 {
        return lag_per_second.first().is_some_and(|&l| l >= 1_000_000_000);
    }
    let quarter = (lag_per_second.len() / 4).max(1);
    let first = lag_per_second[..quarter].iter().copied().max().unwrap_or(0);
    let last = lag_per_second[lag_per_second.len() - quarter..]
        .iter()
        .copied()
        .max()
        .unwrap_or(0);
    last >= 100_000_000 && last > first.saturating_mul(2)
}

/// What the summary must know about the driver.
struct DriverPolicy {
    name: &'static str,
    /// Why the broker may discard messages by design, if it may.
    drops: Option<String>,
    /// Whether every producer had its messages confirmed.
    confirms: bool,
}

fn summarize(
    workload: &Workload,
    driver: &DriverPolicy,
    control: &RunControl,
    times: Times,
    collected: Collected,
) -> (Summary, WindowHistograms) {
    let mut publish = brokerbench_model::new_histogram();
    let mut service_time = brokerbench_model::new_histogram();
    let mut schedule_lag = brokerbench_model::new_histogram();
    let mut end_to_end = brokerbench_model::new_histogram();
    let mut window = Counts::default();
    let mut total = Counts::default();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut notes = Vec::new();
    let mut add_errors = |from: &HashMap<String, u64>| {
        for (kind, n) in from {
            *errors.entry(kind.clone()).or_default() += n;
        }
    };
    for p in &collected.producers {
        publish.add(&p.publish).expect("same bounds");
        service_time.add(&p.service_time).expect("same bounds");
        schedule_lag.add(&p.schedule_lag).expect("same bounds");
        window.add(&p.window);
        total.add(&p.total);
        add_errors(&p.errors);
    }
    if let Some(note) = collected.producers.iter().find_map(|p| p.ack_note.clone()) {
        notes.push(note);
    }
    let mut subscriptions: BTreeMap<(u32, u32), SubscriptionLedger> = BTreeMap::new();
    let mut foreign = 0;
    let mut consumers: Vec<ConsumerShare> = collected
        .consumers
        .iter()
        .map(|c| ConsumerShare {
            topic: c.topic,
            subscription: c.subscription,
            member: c.member,
            received: c.total.received,
        })
        .collect();
    consumers.sort_by_key(|c| (c.topic, c.subscription, c.member));
    for c in collected.consumers {
        end_to_end.add(&c.end_to_end).expect("same bounds");
        window.add(&c.window);
        total.add(&c.total);
        add_errors(&c.errors);
        foreign += c.foreign;
        subscriptions
            .entry((c.topic, c.subscription))
            .or_insert_with(|| SubscriptionLedger {
                topic: c.topic,
                members: Vec::new(),
            })
            .members
            .push(c.ledger);
    }
    let ledgers: Vec<_> = collected
        .producers
        .iter()
        .map(|p| p.ledger.clone())
        .collect();
    let subscriptions: Vec<_> = subscriptions.into_values().collect();
    let mut integrity = reconcile(&ledgers, &subscriptions, foreign);
    if let (Some(recent), true) = (collected.drain_cut_off, integrity.lost > 0) {
        let drain = format!(
            "the drain ended at its timeout (drain_timeout: {:?})",
            workload.drain_timeout
        );
        notes.push(if recent > 0 {
            format!(
                "{drain} while consumers were still receiving ({recent} messages in its last seconds): some of the {} acknowledged messages not received may only have been late; a longer drain_timeout tells them apart",
                integrity.lost
            )
        } else {
            format!(
                "{drain}; consumers had received nothing in its last seconds, so the {} acknowledged messages not received had stopped arriving",
                integrity.lost
            )
        });
    }
    if let Some(reason) = &driver.drops {
        if integrity.lost > 0 {
            notes.push(format!(
                "{} messages acknowledged and never received were dropped by the broker by policy ({reason}), not lost by brokerbench",
                integrity.lost
            ));
        }
        integrity.dropped_by_broker = integrity.lost;
        integrity.lost = 0;
    }
    if !driver.confirms {
        notes.push(
            "delivery was not confirmed (publisher confirms off): only sent messages are counted, publish latency is not measured, and the ledger expects every sent message".into(),
        );
    }
    let measurement_s = collected
        .measurement_end_ns
        .saturating_sub(times.warmup_end_ns) as f64
        / 1e9;
    let per_s = |n: u64| {
        if measurement_s > 0.0 {
            n as f64 / measurement_s
        } else {
            0.0
        }
    };
    let throughput = Throughput {
        acknowledged_per_s: per_s(window.acknowledged),
        sent_per_s: per_s(window.sent),
        received_per_s: per_s(window.received),
        acknowledged_mb_per_s: per_s(window.bytes_acknowledged) / 1e6,
        received_mb_per_s: per_s(window.bytes_received) / 1e6,
    };
    // Without confirms nothing is acknowledged: the cost is per message sent.
    let messages = if driver.confirms {
        window.acknowledged
    } else {
        window.sent
    };
    let client = match collected.cpu {
        Some((start, end)) => {
            let cpu = (end.user_s - start.user_s) + (end.system_s - start.system_s);
            ClientCost {
                cpu_user_s: end.user_s - start.user_s,
                cpu_system_s: end.system_s - start.system_s,
                cpu_s_per_million_messages: if messages > 0 {
                    cpu / (messages as f64 / 1e6)
                } else {
                    0.0
                },
                peak_rss_bytes: end.max_rss_bytes,
                allocations_per_message: None,
            }
        }
        None => ClientCost {
            peak_rss_bytes: rusage().max_rss_bytes,
            ..ClientCost::default()
        },
    };
    let is_client_bound = workload.rate != Rate::Max && client_bound(&collected.lag_per_second);
    let (mode, target_rate) = match workload.rate {
        Rate::Max => {
            notes.push(format!(
                "max-rate mode: closed loop with at most {} messages in flight per producer; intended send time = actual send time, so latency here is not open-loop latency",
                workload.max_in_flight
            ));
            ("max-rate", None)
        }
        Rate::PerSecond(rate) => ("open-loop", Some(rate)),
    };
    if is_client_bound {
        notes.push(
            "client-bound: schedule lag kept growing, so the load generator or the client's buffer, not the broker, limited the send rate; the offered load was below the target".into(),
        );
    }
    if let Some(target) = target_rate {
        let (achieved, what) = if driver.confirms {
            (throughput.acknowledged_per_s, "acknowledged")
        } else {
            (throughput.sent_per_s, "sent")
        };
        if measurement_s > 0.0 && achieved < 0.95 * target {
            notes.push(format!(
                "{what} {achieved:.0} msg/s, below the target of {target:.0} msg/s"
            ));
        }
    }
    if !integrity.checked {
        notes.push("no consumers: loss, duplicates and order were not checked".into());
    }
    if integrity.foreign > 0 {
        notes.push(format!(
            "{} messages read that this run did not send (older data in a reused topic) were ignored",
            integrity.foreign
        ));
    }
    let interrupted = control.stop.load(Ordering::Relaxed);
    if interrupted {
        notes.push("interrupted: the run was stopped before its planned end".into());
    }
    let summary = Summary {
        status: if interrupted {
            RunStatus::Interrupted
        } else {
            RunStatus::Complete
        },
        workload: workload.name.clone(),
        driver: driver.name.to_string(),
        mode: mode.to_string(),
        target_rate,
        measurement_s,
        window,
        total,
        throughput,
        latency: Latencies {
            publish: LatencySummary::from_histogram(&publish),
            end_to_end: LatencySummary::from_histogram(&end_to_end),
            service_time: LatencySummary::from_histogram(&service_time),
            schedule_lag: LatencySummary::from_histogram(&schedule_lag),
        },
        integrity,
        consumers,
        errors,
        client,
        resources: None,
        broker_metrics: None,
        client_bound: is_client_bound,
        notes,
    };
    let histograms = WindowHistograms {
        publish,
        end_to_end,
        service_time,
        schedule_lag,
    };
    (summary, histograms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_bound_needs_large_and_growing_lag() {
        let ms = 1_000_000;
        assert!(!client_bound(&[0, 0, 0, 0, 0, 0, 0, 0]));
        assert!(!client_bound(&[500 * ms; 8]), "large but steady");
        assert!(client_bound(&[
            ms,
            50 * ms,
            100 * ms,
            200 * ms,
            300 * ms,
            400 * ms,
            500 * ms,
            600 * ms
        ]));
        assert!(
            !client_bound(&[0, 0, 0, 1000 * ms, 0, 0, 0, 0]),
            "one stall that recovered"
        );
    }
}
