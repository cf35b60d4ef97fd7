//! The run's tasks: which consumer slots and producers this process runs, their threads, the
//! run's phase times, and joining them at the end. [`super::run_prepared`] calls these in
//! order.

use std::sync::{Condvar, Mutex};

use super::*;

/// A producer this process runs: its id, topic, client and message bodies.
pub(super) type OpenProducer = (u32, u32, Box<dyn Producer>, BodySource);
/// A spawned task's thread and what it is (`producer`, `consumer`), for a panic's message.
pub(super) type Handles = Vec<(&'static str, JoinHandle<()>)>;

/// The consumer slots this process serves, in the workload's order, and how many
/// subscriptions each topic has (0 without consumers).
pub(super) fn local_slots(
    workload: &Workload,
    driver: &dyn Driver,
    takes: &dyn Fn(usize) -> bool,
) -> (Vec<ConsumerSlot>, u32) {
    let subscriptions = if workload.consumers_per_topic == 0 {
        0
    } else {
        driver.subscriptions_per_topic()
    };
    let mut slots = Vec::new();
    for topic in 0..workload.topics {
        for subscription in 0..subscriptions {
            for member in 0..workload.consumers_per_topic {
                slots.push(ConsumerSlot {
                    topic,
                    subscription,
                    member,
                });
            }
        }
    }
    let slots = slots
        .into_iter()
        .enumerate()
        .filter(|&(n, _)| takes(n))
        .map(|(_, slot)| slot)
        .collect();
    (slots, subscriptions)
}

/// The driver's consumers for `slots`. A slot's task number follows the producers' and does
/// not depend on how the driver groups the slots.
pub(super) fn consumer_tasks(
    driver: &mut dyn Driver,
    slots: &[ConsumerSlot],
    local_producers: u32,
) -> Result<Vec<ConsumerTask>, EngineError> {
    if slots.is_empty() {
        return Ok(Vec::new());
    }
    Ok(driver
        .consumers(slots)?
        .into_iter()
        .map(|group| ConsumerTask {
            slots: group
                .slots
                .iter()
                .map(|&i| (local_producers as usize + i, slots[i]))
                .collect(),
            consumer: group.consumer,
        })
        .collect())
}

/// The state the tasks and the collector share, before the phase times are known.
pub(super) fn new_shared(
    workload: &Workload,
    control: &RunControl,
    (clock, run_floor_ns): (Clock, u64),
    consumer_count: usize,
) -> Arc<Shared> {
    Arc::new(Shared {
        clock,
        times: OnceLock::new(),
        stop: control.stop.clone(),
        consumers_stop: AtomicBool::new(false),
        consumers_caught_up: AtomicBool::new(false),
        consumers_paused: AtomicBool::new(false),
        measure_end_ns: AtomicU64::new(OPEN_END_NS),
        assigned: (0..consumer_count).map(|_| AtomicUsize::new(0)).collect(),
        unique: (0..consumer_count).map(|_| AtomicU64::new(0)).collect(),
        run_floor_ns,
        drain_timeout: workload.drain_timeout,
    })
}

/// One thread per consumer task; `producers` is (this process's producers, the workload's).
pub(super) fn spawn_consumers(
    tasks: Vec<ConsumerTask>,
    producers: (u32, u32),
    shared: &Arc<Shared>,
    reports: &mpsc::Sender<Report>,
) -> Handles {
    tasks
        .into_iter()
        .map(|task| {
            let shared = shared.clone();
            let reports = reports.clone();
            let name = format!("consumer-{}", task.slots.first().map_or(0, |s| s.0));
            let thread = std::thread::Builder::new()
                .name(name)
                .spawn(move || consumer_loop(task, producers, shared, reports))
                .expect("spawn consumer thread");
            ("consumer", thread)
        })
        .collect()
}

/// The driver's producers this process runs, and whether every one of them confirms. Task n
/// runs on producer thread n mod `producer_threads` when tasks share threads (see
/// [`spawn_producers`]); the driver may give each such thread's tasks one client.
pub(super) fn open_producers(
    workload: &Workload,
    driver: &dyn Driver,
    payload: &SharedPayload,
    takes: &dyn Fn(usize) -> bool,
) -> Result<(Vec<OpenProducer>, bool), EngineError> {
    let mut producers: Vec<OpenProducer> = Vec::new();
    let mut confirms = true;
    let threads = workload.producer_threads.max(1);
    for topic in 0..workload.topics {
        for n in 0..workload.producers_per_topic {
            let id = topic * workload.producers_per_topic + n;
            if !takes(id as usize) {
                continue;
            }
            let body = payload.source(id, workload.seed)?;
            let thread = producers.len() as u32 % threads;
            let slot = ProducerSlot {
                topic,
                producer: id,
                thread,
            };
            let producer = driver.producer(slot)?;
            confirms &= producer.confirms();
            producers.push((id, topic, producer, body));
        }
    }
    Ok((producers, confirms))
}

/// The phases' times from the start: warm-up, then the measurement window (open-ended in
/// backlog mode until the backlog is drained).
pub(super) fn phase_times(workload: &Workload, start_ns: u64) -> Times {
    Times {
        start_ns,
        warmup_end_ns: start_ns + workload.warmup.as_nanos() as u64,
        measure_end_ns: if workload.backlog.is_some() {
            OPEN_END_NS
        } else {
            start_ns + (workload.warmup + workload.duration).as_nanos() as u64
        },
    }
}

/// When the producer threads may start: the run's times once they are set, or nothing when
/// the run ends before its start (a shard's gate failed). Threads are spawned before the
/// start and wait here, asleep, so that starting thousands of them takes none of the run's
/// time: a thread spawned while thousands of others already send waits its turn for a core,
/// and 5,000 MQTT publishers took 22 s to spawn that way, longer than the window.
#[derive(Default)]
pub(super) struct Release {
    times: Mutex<Option<Option<Times>>>,
    given: Condvar,
}

impl Release {
    /// Lets every waiting thread go: with the run's times, or with None to end.
    pub(super) fn give(&self, times: Option<Times>) {
        *self.times.lock().expect("release") = Some(times);
        self.given.notify_all();
    }

    fn wait(&self) -> Option<Times> {
        let given = self.times.lock().expect("release");
        let given = self.given.wait_while(given, |t| t.is_none());
        given.expect("release").flatten()
    }
}

/// Producer tasks on their threads, each waiting for `release`. Open-loop tasks whose client
/// stamps acknowledgements and sends without being polled share at most `producer_threads`
/// threads; otherwise each task has its own.
pub(super) fn spawn_producers(
    workload: &Workload,
    producers: Vec<OpenProducer>,
    release: &Arc<Release>,
    shared: &Arc<Shared>,
    reports: &mpsc::Sender<Report>,
) -> Handles {
    let threads = workload.producer_threads.max(1) as usize;
    let grouped = workload.rate_per_producer().is_some()
        && producers.len() > threads
        && producers
            .iter()
            .all(|p| p.2.stamps_acknowledgements() && p.2.sends_in_background());
    let workload = Arc::new(workload.clone());
    let start = || -> Start {
        (
            workload.clone(),
            release.clone(),
            shared.clone(),
            reports.clone(),
        )
    };
    let mut groups: Vec<Vec<(usize, OpenProducer)>> = (0..threads).map(|_| Vec::new()).collect();
    let mut handles = Handles::new();
    for (task_number, producer) in producers.into_iter().enumerate() {
        if grouped {
            groups[task_number % threads].push((task_number, producer));
            continue;
        }
        let name = format!("producer-{}", producer.0);
        let start = start();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || {
                if let Some(mut tasks) = released(vec![(task_number, producer)], start) {
                    tasks.pop().expect("one task").run();
                }
            })
            .expect("spawn producer thread");
        handles.push(("producer", thread));
    }
    for (n, group) in groups.into_iter().enumerate() {
        if group.is_empty() {
            continue;
        }
        let start = start();
        let thread = std::thread::Builder::new()
            .name(format!("producers-{n}"))
            .spawn(move || {
                if let Some(tasks) = released(group, start) {
                    ProducerGroup { tasks }.run();
                }
            })
            .expect("spawn producer thread");
        handles.push(("producer", thread));
    }
    handles
}

/// What a producer thread needs to build its tasks once released.
type Start = (
    Arc<Workload>,
    Arc<Release>,
    Arc<Shared>,
    mpsc::Sender<Report>,
);

/// Waits for the release; the thread's tasks on the run's times, or None when the run ended
/// before its start.
fn released(producers: Vec<(usize, OpenProducer)>, start: Start) -> Option<Vec<ProducerTask>> {
    let (workload, release, shared, reports) = start;
    let times = release.wait()?;
    Some(
        producers
            .into_iter()
            .map(|(n, producer)| producer_task(&workload, n, producer, times, &shared, &reports))
            .collect(),
    )
}

/// One producer's task: its schedule (staggered evenly inside one gap so that producers do
/// not send in bursts together), keys and recorder.
fn producer_task(
    workload: &Workload,
    task_number: usize,
    (id, topic, producer, body): OpenProducer,
    times: Times,
    shared: &Arc<Shared>,
    reports: &mpsc::Sender<Report>,
) -> ProducerTask {
    let producer_count = workload.producer_count();
    let schedule = workload.rate_per_producer().map(|rate| {
        let offset = (id as f64 / producer_count as f64 * 1e9 / rate) as u64;
        Schedule::new(
            workload.arrival,
            rate,
            times.start_ns + offset,
            workload.seed ^ (id as u64 + 1),
        )
    });
    let recorder = ProducerRecorder::new(
        task_number,
        topic,
        producer.confirms(),
        times,
        reports.clone(),
    );
    ProducerTask {
        id,
        producer,
        body,
        keys: Keys::new(workload.keys, workload.seed.wrapping_add(id as u64)),
        schedule,
        max_in_flight: workload.max_in_flight as usize,
        resolution: workload.schedule_resolution,
        recorder,
        shared: shared.clone(),
    }
}

/// Waits for every task's thread; the first panic, as an error naming the task's kind.
pub(super) fn join_tasks(handles: Handles) -> Result<(), EngineError> {
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
    panicked.map_or(Ok(()), Err)
}
