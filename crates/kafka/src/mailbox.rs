//! A batch that one thread fills and another takes whole: librdkafka's threads hand
//! acknowledgements to the producer task they belong to. The filler wakes the taker only when
//! it waits, and only once the batch holds what the taker asked to wait for (a wake-up is a
//! system call on the filler's thread — librdkafka's broker thread, the client's busiest).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

pub(crate) struct Mailbox<T> {
    batch: Mutex<Vec<T>>,
    arrived: Condvar,
    /// Whether the taker waits on `arrived`; read and written under the lock, so a batch
    /// filled after the taker's check always wakes it.
    waiting: AtomicBool,
    /// How many items the waiting taker wants before it is woken.
    wanted: AtomicUsize,
}

impl<T> Default for Mailbox<T> {
    fn default() -> Self {
        Mailbox {
            batch: Mutex::new(Vec::new()),
            arrived: Condvar::new(),
            waiting: AtomicBool::new(false),
            wanted: AtomicUsize::new(1),
        }
    }
}

impl<T> Mailbox<T> {
    fn lock(&self) -> MutexGuard<'_, Vec<T>> {
        self.batch.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `item` to the batch.
    pub(crate) fn put(&self, item: T) {
        let mut batch = self.lock();
        batch.push(item);
        if batch.len() == self.wanted.load(Ordering::Relaxed)
            && self.waiting.load(Ordering::Relaxed)
        {
            self.arrived.notify_one();
        }
    }

    /// Swaps the batch into `into` (which should be empty). When it holds fewer than `want`
    /// items, first waits up to `timeout` for that many.
    pub(crate) fn take(&self, timeout: Duration, want: usize, into: &mut Vec<T>) {
        let mut batch = self.lock();
        let want = want.max(1);
        if batch.len() < want && !timeout.is_zero() {
            self.wanted.store(want, Ordering::Relaxed);
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_waiting_taker_is_woken_and_gets_everything_in_order() {
        let mailbox: Arc<Mailbox<u32>> = Arc::default();
        let filler = {
            let mailbox = mailbox.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    mailbox.put(i);
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        };
        let started = Instant::now();
        let mut taken = Vec::new();
        let mut all = Vec::new();
        while all.len() < 10 && started.elapsed() < Duration::from_secs(5) {
            // A lost wake-up would cost the whole 60 s wait.
            mailbox.take(Duration::from_secs(60), 1, &mut taken);
            all.append(&mut taken);
        }
        filler.join().unwrap();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "no wake-up was lost"
        );
        // Nothing there and no time to wait: returns at once with nothing.
        let waited = Instant::now();
        mailbox.take(Duration::ZERO, 1, &mut taken);
        assert!(taken.is_empty() && waited.elapsed() < Duration::from_millis(100));
    }

    #[test]
    fn a_taker_that_wants_several_is_woken_once_they_are_there() {
        let mailbox: Arc<Mailbox<u32>> = Arc::default();
        let filler = {
            let mailbox = mailbox.clone();
            std::thread::spawn(move || {
                for i in 0..5 {
                    std::thread::sleep(Duration::from_millis(30));
                    mailbox.put(i);
                }
            })
        };
        let started = Instant::now();
        let mut taken = Vec::new();
        mailbox.take(Duration::from_secs(60), 5, &mut taken);
        let waited = started.elapsed();
        filler.join().unwrap();
        assert_eq!(taken, [0, 1, 2, 3, 4], "not woken by the first ones");
        assert!(
            waited >= Duration::from_millis(140) && waited < Duration::from_secs(5),
            "{waited:?}"
        );
        // Fewer than wanted by the timeout: the taker gets what is there.
        taken.clear();
        mailbox.put(9);
        mailbox.put(10);
        mailbox.take(Duration::from_millis(50), 3, &mut taken);
        assert_eq!(taken, [9, 10]);
    }
}
