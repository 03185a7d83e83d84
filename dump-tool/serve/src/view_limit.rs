//! At most so many views built at a time: each holds its dumps and a
//! rendered page in memory, and symbolization is CPU-bound, so further
//! requests wait their turn instead of piling up. A request whose client
//! left (hyper drops its future when the connection closes) leaves the
//! queue without running, and work already running is told
//! ([`Presence`]) so it can stop between its stages.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Semaphore;

/// Why a view's work did not run to its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unfinished {
    /// The server is shutting down.
    Closed,
    /// The work panicked.
    Failed,
}

/// Whether the client a view is built for is still waiting for it.
#[derive(Clone, Debug, Default)]
pub struct Presence(Arc<AtomicBool>);

impl Presence {
    /// True once the request was dropped (its client left).
    pub fn left(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Marks the presence left when the request's future is dropped.
struct Departure(Presence);

impl Drop for Departure {
    fn drop(&mut self) {
        (self.0).0.store(true, Ordering::Relaxed);
    }
}

/// A limit on the views built at the same time.
pub struct ViewLimit {
    permits: Arc<Semaphore>,
}

impl ViewLimit {
    pub fn new(at_once: usize) -> ViewLimit {
        ViewLimit {
            permits: Arc::new(Semaphore::new(at_once)),
        }
    }

    /// Run `work` on a blocking thread once fewer views than the limit are
    /// being built; its place is held until it returns, even when the
    /// request is dropped meanwhile (the work is then told it left).
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Presence) -> T + Send + 'static,
    ) -> Result<T, Unfinished> {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| Unfinished::Closed)?;
        let presence = Presence::default();
        let _departure = Departure(presence.clone());
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            work(&presence)
        })
        .await
        .map_err(|_| Unfinished::Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn no_more_than_the_limit_run_at_once() {
        let limit = Arc::new(ViewLimit::new(2));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..6)
            .map(|i| {
                let (limit, running, most) = (limit.clone(), running.clone(), most.clone());
                tokio::spawn(async move {
                    limit
                        .run(move |_| {
                            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                            most.fetch_max(now, Ordering::SeqCst);
                            std::thread::sleep(Duration::from_millis(50));
                            running.fetch_sub(1, Ordering::SeqCst);
                            i
                        })
                        .await
                })
            })
            .collect();
        let mut done = Vec::new();
        for task in tasks {
            done.push(task.await.unwrap().unwrap());
        }
        assert_eq!(done, [0, 1, 2, 3, 4, 5], "every view is built");
        assert_eq!(most.load(Ordering::SeqCst), 2, "two at a time, not more");
    }

    #[tokio::test]
    async fn a_panicking_view_is_a_failure_and_frees_its_place() {
        let limit = ViewLimit::new(1);
        let failed = limit.run(|_| panic!("a broken view")).await;
        assert_eq!(failed, Err::<(), _>(Unfinished::Failed));
        assert_eq!(limit.run(|_| 7).await, Ok(7));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_request_dropped_while_waiting_never_runs_and_running_work_is_told() {
        let limit = Arc::new(ViewLimit::new(1));
        let ran = Arc::new(AtomicUsize::new(0));
        let (told, running) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let first = {
            let (limit, told, running) = (limit.clone(), told.clone(), running.clone());
            tokio::spawn(async move {
                limit
                    .run(move |presence| {
                        running.store(1, Ordering::SeqCst);
                        for _ in 0..200 {
                            if presence.left() {
                                told.store(1, Ordering::SeqCst);
                                return;
                            }
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    })
                    .await
            })
        };
        while running.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let queued = {
            let (limit, ran) = (limit.clone(), ran.clone());
            tokio::spawn(async move {
                limit
                    .run(move |_| {
                        ran.fetch_add(1, Ordering::SeqCst);
                    })
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        queued.abort();
        first.abort();
        // The running work hears that its client left and frees its place.
        assert_eq!(limit.run(|_| 7).await, Ok(7));
        assert_eq!(told.load(Ordering::SeqCst), 1, "the running work was told");
        assert_eq!(
            ran.load(Ordering::SeqCst),
            0,
            "the dropped request never ran"
        );
    }
}
