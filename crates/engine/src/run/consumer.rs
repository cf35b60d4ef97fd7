//! A consumer task: polls its consumer, records what arrives, closes within a bound.

use super::*;

pub(super) struct ConsumerTask {
    /// The task number and slot of each slot this consumer serves, in the order of its
    /// deliveries' slot indices.
    pub(super) slots: Vec<(usize, ConsumerSlot)>,
    pub(super) consumer: Box<dyn brokerbench_driver::Consumer>,
}

pub(super) fn consumer_loop(
    mut task: ConsumerTask,
    (producers, producer_ids): (u32, u32),
    shared: Arc<Shared>,
    reports: mpsc::Sender<Report>,
) {
    // One recorder per slot: a consumer serving many slots keeps each one's latencies and
    // ledger apart.
    let mut recorders = slot_recorders(&task.slots, producer_ids, reports);
    let indices: Vec<usize> = task
        .slots
        .iter()
        .map(|&(number, _)| number - producers as usize)
        .collect();
    let mut started = false;
    let clock = shared.clock;
    let floor = shared.run_floor_ns;
    // Backlog mode: whether this consumer is paused, and whether it is polled meanwhile.
    let mut paused = false;
    let mut polled_while_paused = false;
    while !shared.consumers_stop.load(Ordering::Relaxed) {
        follow_times(&shared, &mut recorders, &mut started);
        let pause = shared.consumers_paused.load(Ordering::Relaxed);
        if pause != paused {
            polled_while_paused = task.consumer.pause(pause);
            paused = pause;
        }
        if paused && !polled_while_paused {
            // Not polled: what the client has prefetched waits in it; seconds still roll so
            // that rows are not held up.
            std::thread::sleep(Duration::from_millis(20));
            roll_all(&mut recorders, clock.now_ns());
            continue;
        }
        let result = task
            .consumer
            .poll(Duration::from_millis(100), &mut |delivery| {
                let arrived = delivery.received_ns.unwrap_or_else(|| clock.now_ns());
                if let Some(recorder) = recorders.get_mut(delivery.slot) {
                    recorder.received(&delivery, arrived, floor);
                }
            });
        if let Err(kind) = result {
            // An error of the client is counted once, by its first slot.
            recorders[0].error(&kind);
        }
        publish_progress(&shared, &indices, task.consumer.as_ref(), &recorders);
        if started {
            roll_all(&mut recorders, clock.now_ns());
        }
    }
    let caught_up = shared.consumers_caught_up.load(Ordering::SeqCst);
    finish_slots(task.consumer.as_mut(), recorders, caught_up);
    close_within(task.consumer, CONSUMER_CLOSE_TIMEOUT);
}

/// A recorder for each of the consumer's slots, on placeholder times until the run's are
/// set; `producer_ids` is how many producers the workload has.
fn slot_recorders(
    slots: &[(usize, ConsumerSlot)],
    producer_ids: u32,
    reports: mpsc::Sender<Report>,
) -> Vec<ConsumerRecorder> {
    let placeholder = Times {
        start_ns: u64::MAX,
        warmup_end_ns: u64::MAX,
        measure_end_ns: u64::MAX,
    };
    slots
        .iter()
        .map(|&(number, slot)| {
            ConsumerRecorder::new(number, slot, producer_ids, placeholder, reports.clone())
        })
        .collect()
}

/// Gives the recorders the run's times once they are set (`started` then), and from then on
/// the end of the window as it moves (backlog mode).
#[inline]
fn follow_times(shared: &Shared, recorders: &mut [ConsumerRecorder], started: &mut bool) {
    if !*started {
        if let Some(times) = shared.times.get() {
            for recorder in recorders.iter_mut() {
                recorder.set_times(*times);
            }
            *started = true;
        }
    }
    if *started {
        let end = shared.measure_end();
        for recorder in recorders.iter_mut() {
            recorder.follow_end(end);
        }
    }
}

/// Rolls every slot's second to `now`.
#[inline]
fn roll_all(recorders: &mut [ConsumerRecorder], now: u64) {
    for recorder in recorders {
        recorder.roll(now);
    }
}

/// Publishes, per slot, the partitions or queues assigned and the distinct messages received,
/// for the collector and the start.
#[inline]
fn publish_progress(
    shared: &Shared,
    indices: &[usize],
    consumer: &dyn brokerbench_driver::Consumer,
    recorders: &[ConsumerRecorder],
) {
    for (i, (&index, recorder)) in indices.iter().zip(recorders).enumerate() {
        shared.assigned[index].store(consumer.assigned(i), Ordering::Relaxed);
        shared.unique[index].store(recorder.unique(), Ordering::Relaxed);
    }
}

/// Ends every slot's recording: what the broker still holds beyond the consumer's positions
/// (nothing to ask once the consumers had `caught_up`: a broker may take seconds to say),
/// then the slot's result to the collector.
fn finish_slots(
    consumer: &mut dyn brokerbench_driver::Consumer,
    recorders: Vec<ConsumerRecorder>,
    caught_up: bool,
) {
    let unread = if caught_up {
        vec![Some(UnreadPlaces::default()); recorders.len()]
    } else {
        unread_by_slot(consumer, recorders.len())
    };
    for (mut recorder, unread) in recorders.into_iter().zip(unread) {
        recorder.unread(unread);
        recorder.finish();
    }
}

/// What the broker holds beyond the consumer's positions now that the drain is over, per
/// slot; every slot None when the client cannot tell.
fn unread_by_slot(
    consumer: &mut dyn brokerbench_driver::Consumer,
    slots: usize,
) -> Vec<Option<UnreadPlaces>> {
    let Some(places) = consumer.unread() else {
        return vec![None; slots];
    };
    let mut by_slot: Vec<Option<UnreadPlaces>> = vec![None; slots];
    for place in places {
        if let Some(slot) = by_slot.get_mut(place.slot) {
            let unread = slot.get_or_insert_with(|| UnreadPlaces {
                evidence: place.evidence.to_string(),
                places: Default::default(),
            });
            unread.places.insert(place.place, place.messages);
        }
    }
    // A slot the client said nothing of holds nothing beyond its positions.
    by_slot
        .into_iter()
        .map(|unread| {
            unread.or_else(|| {
                Some(UnreadPlaces {
                    evidence: String::new(),
                    places: Default::default(),
                })
            })
        })
        .collect()
}

/// Closes a consumer, waiting at most `timeout`: a client whose broker has gone may block in
/// its close (librdkafka waits up to the group session timeout), and the run's results must
/// not wait for that. A close still under way goes on in the background.
pub(super) fn close_within(consumer: Box<dyn brokerbench_driver::Consumer>, timeout: Duration) {
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
