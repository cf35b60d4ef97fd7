//! A batch that one thread fills and another takes whole: a client's callback or polling
//! thread hands acknowledgements or messages to the task they belong to. The filler wakes the
//! taker only when it waits (a wake-up is a system call), and may wait itself while the batch
//! is full.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// What a mailbox holds.
pub(crate) trait Batch: Default {
    fn is_empty(&self) -> bool;
}

impl<T> Batch for Vec<T> {
    fn is_empty(&self) -> bool {
        Vec::is_empty(self)
    }
}

#[derive(Default)]
pub(crate) struct Mailbox<B> {
    batch: Mutex<B>,
    arrived: Condvar,
    /// Whether the taker waits on `arrived`; read and written under the lock, so a batch
    /// filled after the taker's check always wakes it.
    waiting: AtomicBool,
    /// Signalled when the taker takes the batch, for a filler waiting on a full one.
    taken: Condvar,
}

impl<B: Batch> Mailbox<B> {
    fn lock(&self) -> MutexGuard<'_, B> {
        self.batch.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds to the batch with `fill`.
    pub(crate) fn put(&self, fill: impl FnOnce(&mut B)) {
        self.fill(self.lock(), fill);
    }

    /// Adds to the batch with `fill`, first waiting (in steps of `step`, while `stop` is not
    /// set) as long as `full` says the batch is full.
    pub(crate) fn put_bounded(
        &self,
        full: impl Fn(&B) -> bool,
        stop: &AtomicBool,
        step: Duration,
        fill: impl FnOnce(&mut B),
    ) {
        let mut batch = self.lock();
        while full(&batch) && !stop.load(Ordering::Relaxed) {
            batch = self
                .taken
                .wait_timeout(batch, step)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        self.fill(batch, fill);
    }

    fn fill(&self, mut batch: MutexGuard<'_, B>, fill: impl FnOnce(&mut B)) {
        let was_empty = batch.is_empty();
        fill(&mut batch);
        if was_empty && self.waiting.load(Ordering::Relaxed) {
            self.arrived.notify_one();
        }
    }

    /// Swaps the batch into `into` (which should be empty), waiting up to `timeout` for one
    /// when there is none.
    pub(crate) fn take(&self, timeout: Duration, into: &mut B) {
        let mut batch = self.lock();
        if batch.is_empty() && !timeout.is_zero() {
            self.waiting.store(true, Ordering::Relaxed);
            batch = self
                .arrived
                .wait_timeout(batch, timeout)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            self.waiting.store(false, Ordering::Relaxed);
        }
        if !batch.is_empty() {
            std::mem::swap(&mut *batch, into);
            self.taken.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_waiting_taker_is_woken_and_a_full_batch_holds_the_filler() {
        let mailbox: Arc<Mailbox<Vec<u32>>> = Arc::default();
        let filler = {
            let mailbox = mailbox.clone();
            std::thread::spawn(move || {
                let stop = AtomicBool::new(false);
                for i in 0..10 {
                    mailbox.put_bounded(
                        |b| b.len() >= 3,
                        &stop,
                        Duration::from_secs(5),
                        |b| b.push(i),
                    );
                }
            })
        };
        let started = Instant::now();
        let mut taken = Vec::new();
        let mut all = Vec::new();
        while all.len() < 10 && started.elapsed() < Duration::from_secs(5) {
            mailbox.take(Duration::from_secs(1), &mut taken);
            assert!(taken.len() <= 3, "the filler waited for a full batch");
            all.append(&mut taken);
        }
        filler.join().unwrap();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "no wake-up was lost"
        );
        let stop = AtomicBool::new(false);
        // Nothing there and no time to wait: returns at once with nothing.
        mailbox.take(Duration::ZERO, &mut taken);
        assert!(taken.is_empty());
        // A full batch holds the filler only until stop is set.
        mailbox.put(|b| b.extend([1, 2, 3]));
        stop.store(true, Ordering::Relaxed);
        mailbox.put_bounded(
            |b| b.len() >= 3,
            &stop,
            Duration::from_secs(60),
            |b| b.push(4),
        );
        mailbox.take(Duration::ZERO, &mut taken);
        assert_eq!(taken, [1, 2, 3, 4]);
    }
}
