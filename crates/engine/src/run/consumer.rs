//! A consumer task: polls its consumer, records what arrives, closes within a bound.

use super::*;

pub(super) struct ConsumerTask {
    pub(super) task: usize,
    pub(super) slot: ConsumerSlot,
    pub(super) consumer: Box<dyn brokerbench_driver::Consumer>,
}

pub(super) fn consumer_loop(
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
                let arrived = delivery.received_ns.unwrap_or_else(|| clock.now_ns());
                recorder.received(&delivery, arrived, floor);
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
