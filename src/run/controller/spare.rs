//! Threads kept for the next run: a run's thread, once its run is over, waits for the next
//! one instead of ending (at most [`SPARE`] of them wait), so that the dispatcher starts a
//! run by waking a thread rather than creating one: off the path from a mention to the
//! start of its program. Dropping the [`Spares`] ends the threads that wait.

use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

/// How many threads wait for a run at most: a server's threads still grow with the runs
/// under way, not with its agents.
pub const SPARE: usize = 2;

type Job = Box<dyn FnOnce() + Send>;

/// The threads waiting for a run, each by the sender that hands it one.
#[derive(Default)]
pub struct Spares(Mutex<Vec<SyncSender<Job>>>);

impl Spares {
    fn waiting(&self) -> std::sync::MutexGuard<'_, Vec<SyncSender<Job>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `job` on a waiting thread, or on a new one when none waits.
    pub fn run(self: &Arc<Self>, mut job: Job) {
        while let Some(spare) = self.waiting().pop() {
            match spare.send(job) {
                Ok(()) => return,
                // It ended meanwhile: the next one.
                Err(e) => job = e.0,
            }
        }
        let spares = Arc::downgrade(self);
        std::thread::spawn(move || {
            job();
            // Waits for the next run while the dispatcher lives and few others wait.
            while let Some(next) = spares.upgrade().and_then(|s| s.wait()) {
                next();
            }
        });
    }

    /// Take the calling thread in among those that wait, when fewer than [`SPARE`] do:
    /// where its next run comes from.
    fn wait(self: Arc<Self>) -> Option<Job> {
        let rx = {
            let mut waiting = self.waiting();
            if waiting.len() >= SPARE {
                return None;
            }
            let (tx, rx) = sync_channel(1);
            waiting.push(tx);
            rx
        };
        // Not holding the spares while waiting: they end when the dispatcher drops them.
        drop(self);
        rx.recv().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{Sender, channel};
    use std::time::{Duration, Instant};

    fn thread_id(spares: &Arc<Spares>) -> std::thread::ThreadId {
        let (tx, rx) = channel();
        spares.run(Box::new(move || {
            tx.send(std::thread::current().id()).unwrap()
        }));
        rx.recv().unwrap()
    }

    /// Wait until `n` threads wait.
    fn until_waiting(spares: &Spares, n: usize) {
        let end = Instant::now() + Duration::from_secs(10);
        while spares.waiting().len() != n {
            let now = spares.waiting().len();
            assert!(Instant::now() < end, "{now} threads wait, not {n}");
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_thread_whose_run_ended_takes_the_next_and_no_more_than_spare_wait() {
        let spares = Arc::new(Spares::default());
        let first = thread_id(&spares);
        until_waiting(&spares, 1);
        assert_eq!(
            thread_id(&spares),
            first,
            "the next run is on the thread that waited"
        );
        // Four runs at once: four threads, of which SPARE wait once the runs are over.
        let all = Arc::new(std::sync::Barrier::new(5));
        for _ in 0..4 {
            let all = all.clone();
            spares.run(Box::new(move || {
                all.wait();
            }));
        }
        all.wait();
        until_waiting(&spares, SPARE);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(spares.waiting().len(), SPARE);
    }

    /// Tells when the thread that holds it ends.
    struct OnExit(Sender<()>);

    impl Drop for OnExit {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }

    thread_local! {
        static EXIT: std::cell::RefCell<Option<OnExit>> = const { std::cell::RefCell::new(None) };
    }

    #[test]
    fn the_threads_that_wait_end_with_the_spares() {
        let spares = Arc::new(Spares::default());
        let (tx, ended) = channel();
        spares.run(Box::new(move || {
            EXIT.with(|e| *e.borrow_mut() = Some(OnExit(tx)))
        }));
        until_waiting(&spares, 1);
        assert!(
            ended.recv_timeout(Duration::from_millis(100)).is_err(),
            "it waits"
        );
        drop(spares);
        ended
            .recv_timeout(Duration::from_secs(10))
            .expect("the waiting thread ended with the spares");
    }
}
