//! At most so many views built at a time: each holds its dumps and a
//! rendered page in memory, and symbolization is CPU-bound, so further
//! requests wait their turn instead of piling up.

use tokio::sync::Semaphore;

/// Why a view's work did not run to its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unfinished {
    /// The server is shutting down.
    Closed,
    /// The work panicked.
    Failed,
}

/// A limit on the views built at the same time.
pub struct ViewLimit {
    permits: Semaphore,
}

impl ViewLimit {
    pub fn new(at_once: usize) -> ViewLimit {
        ViewLimit {
            permits: Semaphore::new(at_once),
        }
    }

    /// Run `work` on a blocking thread once fewer views than the limit are
    /// being built, holding one place until it returns.
    pub async fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Unfinished> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| Unfinished::Closed)?;
        tokio::task::spawn_blocking(work)
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
                        .run(move || {
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
        let failed = limit.run(|| panic!("a broken view")).await;
        assert_eq!(failed, Err::<(), _>(Unfinished::Failed));
        assert_eq!(limit.run(|| 7).await, Ok(7));
    }
}
