//! Accepting connections so that clients that connect and send nothing,
//! or trickle their headers, cannot make the server unreachable:
//!
//! - a client has [`HEADER_TIMEOUT`] to send a request's headers, and as
//!   long to send the next one on a kept-alive connection (hyper's header
//!   read timeout covers both); headers are at most [`MAX_HEADER_BYTES`];
//! - at most `limit` connections are open (below the descriptor limit,
//!   raised to its maximum at start); when a new one arrives at the limit,
//!   the connection that has waited longest without a request in progress
//!   is closed to make room, so a flood of idle or slow clients pushes out
//!   its own oldest members, not a client that sends a request at once;
//!   when every connection is busy with a request, the new one gets 503;
//! - a connection that closes drops its request's future (hyper notices
//!   the end of the stream while the request runs), which takes a waiting
//!   view out of the queue and tells running work ([`crate::view_limit`]).
//!
//! Owns the accept loop and the table of open connections; the routes are
//! an axum router called per request.

use axum::Router;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::task::AbortHandle;
use tower_service::Service;

/// Time to send a request's headers, or to start the next request.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head (request line and headers) read.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Connections kept open at most (fewer if descriptors are scarce).
pub const MAX_CONNECTIONS: usize = 1024;
/// Descriptors kept for the files a request opens (dumps, symbol files).
const RESERVED_DESCRIPTORS: u64 = 128;

/// The answer to a connection that finds every place serving a request.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 31\r\nConnection: close\r\n\r\nbusy: too many requests at once\n";

/// One open connection.
struct Slot {
    abort: AbortHandle,
    /// Since when it has had no request in progress (None: serving one).
    waiting_since: Option<Instant>,
}

/// The open connections, and those without a request in progress by age.
#[derive(Default)]
struct Table {
    next_id: u64,
    open: HashMap<u64, Slot>,
    waiting: BTreeSet<(Instant, u64)>,
}

impl Table {
    /// Make room for one more connection below `limit`: false if every
    /// open connection is serving a request.
    fn make_room(&mut self, limit: usize) -> bool {
        while self.open.len() >= limit {
            let Some((since, id)) = self.waiting.pop_first() else {
                return false;
            };
            if let Some(slot) = self.open.remove(&id) {
                debug_assert_eq!(slot.waiting_since, Some(since));
                slot.abort.abort();
            }
        }
        true
    }

    fn set_waiting(&mut self, id: u64, now: Option<Instant>) {
        let Some(slot) = self.open.get_mut(&id) else {
            return;
        };
        if let Some(since) = slot.waiting_since.take() {
            self.waiting.remove(&(since, id));
        }
        if let Some(now) = now {
            slot.waiting_since = Some(now);
            self.waiting.insert((now, id));
        }
    }

    fn remove(&mut self, id: u64) {
        self.set_waiting(id, None);
        self.open.remove(&id);
    }
}

type SharedTable = Arc<Mutex<Table>>;

fn lock(table: &SharedTable) -> std::sync::MutexGuard<'_, Table> {
    table.lock().unwrap_or_else(|e| e.into_inner())
}

/// Marks a connection busy while one of its requests runs, and waiting
/// again when the request is done or dropped.
struct Busy {
    table: SharedTable,
    id: u64,
}

impl Busy {
    fn start(table: &SharedTable, id: u64) -> Busy {
        lock(table).set_waiting(id, None);
        Busy {
            table: table.clone(),
            id,
        }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        lock(&self.table).set_waiting(self.id, Some(Instant::now()));
    }
}

/// Takes a connection out of the table when its task ends.
struct Closed {
    table: SharedTable,
    id: u64,
}

impl Drop for Closed {
    fn drop(&mut self) {
        lock(&self.table).remove(self.id);
    }
}

/// How many connections may be open: [`MAX_CONNECTIONS`], or fewer when
/// the descriptor limit (raised to its hard maximum first) is low.
pub fn connection_limit() -> usize {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return MAX_CONNECTIONS;
    };
    let available = if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        hard
    } else {
        soft
    };
    let spare = available.saturating_sub(RESERVED_DESCRIPTORS).max(16);
    usize::try_from(spare).map_or(MAX_CONNECTIONS, |spare| spare.min(MAX_CONNECTIONS))
}

/// Serve `router` on `listener` until the process ends, at most `limit`
/// connections at a time (see the module docs).
pub async fn serve(listener: TcpListener, router: Router, limit: usize) {
    let table = SharedTable::default();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEADER_BYTES);
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of descriptors or memory for a moment, or a connection
            // that failed before it was accepted: try again shortly.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let mut guard = lock(&table);
        if !guard.make_room(limit) {
            // Best effort: a client that reads gets a reason.
            let _ = stream.try_write(BUSY);
            continue;
        }
        let id = guard.next_id;
        guard.next_id += 1;
        let (http, router, task_table) = (http.clone(), router.clone(), table.clone());
        let task = tokio::spawn(async move {
            let _closed = Closed {
                table: task_table.clone(),
                id,
            };
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let busy = Busy::start(&task_table, id);
                let response = router.clone().call(request);
                async move {
                    let response = response.await;
                    drop(busy);
                    response
                }
            });
            let _ = http.serve_connection(TokioIo::new(stream), service).await;
        });
        let now = Instant::now();
        guard.open.insert(
            id,
            Slot {
                abort: task.abort_handle(),
                waiting_since: Some(now),
            },
        );
        guard.waiting.insert((now, id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn room_is_made_by_closing_the_longest_waiting_connection() {
        let mut table = Table::default();
        let start = Instant::now();
        let mut tasks = Vec::new();
        for id in 0..3u64 {
            let task = tokio::spawn(std::future::pending::<()>());
            let since = start + Duration::from_millis(id);
            table.open.insert(
                id,
                Slot {
                    abort: task.abort_handle(),
                    waiting_since: Some(since),
                },
            );
            table.waiting.insert((since, id));
            tasks.push(task);
        }
        table.set_waiting(0, None); // connection 0 serves a request
        assert!(table.make_room(3));
        assert_eq!(table.open.len(), 2);
        assert!(!table.open.contains_key(&1), "the oldest waiting one goes");
        assert!(tasks.remove(1).await.unwrap_err().is_cancelled());
        table.set_waiting(2, None);
        assert!(!table.make_room(2), "all busy: no room");
        table.remove(0);
        assert!(table.make_room(2));
    }
}
