//! The health probe server: a minimal HTTP/1.x responder for Kubernetes
//! probes and pre-stop hooks, served over a caller-bound `TcpListener`.
//!
//! | Path | Methods | Success | Otherwise |
//! | --- | --- | --- | --- |
//! | `/readyz` | `GET`, `POST` | `200` `ready` ([`ServiceLifecycle::is_ready`]) | `503` `not_ready` |
//! | `/livez` | `GET`, `POST` | `200` `live` ([`ServiceLifecycle::is_live`]) | `503` `not_live` |
//! | `/startupz` | `GET`, `POST` | `200` `started` (state is not `Starting`) | `503` `starting` |
//! | `/drainz` | [`DrainRequestMethods`](super::DrainRequestMethods) (`POST` by default) | `200` `draining` after `request_shutdown(PreStop)` | `405` `method_not_allowed` with `Allow: <allow_header()>`; `403` `forbidden` for a browser-originated request (an `Origin` header, a cross-site or same-site `Sec-Fetch-Site`); `401` `unauthorized` with `WWW-Authenticate: Bearer` without the token of [`ServiceLifecycle::with_drain_token`] |
//! | `/metrics` | `GET` | `200` OpenMetrics text ([`ServiceLifecycle::with_metrics`]) | `404` `not_found` when metrics are off; `405` with `Allow: GET` |
//! | any other path | any | — | `404` `not_found` |
//!
//! Other methods on `/readyz`, `/livez` and `/startupz` are answered `405`
//! with `Allow: GET, POST`. Methods are matched case-sensitively (HTTP
//! methods are case-sensitive); a query string (`?…`) is ignored.
//!
//! Protocol errors:
//!
//! | Condition | Status |
//! | --- | --- |
//! | malformed head, or end of stream before a complete head | `400` `bad_request` |
//! | a head of [`MAX_REQUEST_HEAD_BYTES`] or more | `431` `request_header_fields_too_large`, then close at once (no lingering: the slot goes to the next probe) |
//! | more than 64 header fields | `431` `request_header_fields_too_large` |
//! | a head not read completely within [`PROBE_IO_TIMEOUT`] of the accept (however the client paces it) | `408` `request_timeout` (best effort), then close |
//!
//! Every response is `{"status":"<label>","state":"<lifecycle state>"}` with
//! `Content-Type: application/json`, `Content-Length`, `Connection: close` and
//! `Cache-Control: no-store`; one request per connection.
//!
//! Invariants:
//!
//! 1. Routes only call lifecycle APIs ([`ServiceLifecycle::is_ready`],
//!    `request_shutdown`, ...), never its state.
//! 2. At most [`MAX_PROBE_CONNECTIONS`] connections hold a slot at a time
//!    (fewer under a low `RLIMIT_NOFILE`: a quarter of it, at least 4),
//!    each in a [`TaskKind::Worker`] task of the server's group. When every
//!    slot is taken, a new connection waits for one in its own task (the
//!    waiting room: a quarter as many, at least 1), so the accept loop goes
//!    on answering probes (invariant 5); only when the waiting room is full
//!    too does the accept loop hold the connection and wait. A waiting
//!    connection makes room by closing the connection without a complete
//!    request head that has been silent longest (no byte since its accept
//!    or its last read; among those polled at least once: a head that
//!    arrived with the connection is read before it can be evicted), at
//!    most one per 10 ms of waiting. A connection silent for less than
//!    [`EVICTION_MIN_SILENCE`] is never evicted: a probe sends its head at
//!    once, so it is silent only between its connect and its write, while
//!    a client dripping a byte every half second or holding an idle
//!    connection is silent far longer and goes first. (Evicting in accept
//!    order, or whichever connection was polled first, closed probes whose
//!    head was a few milliseconds behind their connect while a flood kept
//!    the accept loop ahead of the connection tasks.) While no connection
//!    qualifies, the waiters wait and the clients behind them wait in the
//!    listen backlog; at worst a slot frees when a head's
//!    [`PROBE_IO_TIMEOUT`] expires. So hundreds of clients that hold idle
//!    or half-sent connections delay a probe by at most
//!    [`EVICTION_MIN_SILENCE`]. The listen backlog is [`LISTEN_BACKLOG`]
//!    (the kernel caps it at its `somaxconn`): Tokio's own bind asks for
//!    128, which a flood of a thousand connections a second fills, and a
//!    connection the kernel drops for a full backlog retries only after a
//!    second.
//! 3. The request head is read incrementally, up to
//!    [`MAX_REQUEST_HEAD_BYTES`] (2 KiB), so a head split across many small
//!    writes is accepted.
//! 4. `accept` errors: connection-level ones (`ConnectionAborted`,
//!    `ConnectionReset`, `Interrupted`, `WouldBlock`) are retried at once;
//!    listener-level ones (`InvalidInput`, `NotConnected`, `Unsupported`)
//!    mark the service failed and request an `Internal` shutdown; anything
//!    else (for example `EMFILE`) is treated as resource exhaustion: the
//!    permit is kept and `accept` is retried after a backoff of 10 ms
//!    doubling up to 1 s, giving up like a listener-level error only after
//!    [`MAX_CONSECUTIVE_ACCEPT_FAILURES`] consecutive failures.
//! 5. A connection whose complete head arrived with it (a probe writes its
//!    head right after connecting, so by the time a busy server accepts it
//!    the head is usually there) is answered by the accept loop at once,
//!    without a slot or a task: one non-blocking read, one non-blocking
//!    write of the response (a few hundred bytes, which a fresh socket's
//!    send buffer always takes; a client that cannot take them loses its
//!    answer), then close. So probes keep being answered while slow or
//!    idle clients hold every slot, and the accept loop drains the listen
//!    backlog instead of waiting for a slot (a full backlog drops new
//!    connections, which then retry only after a second). `/metrics`
//!    (a larger answer) and requests that leave bytes unread (answered,
//!    then drained before the close) go through a slot.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::loom::Mutex;
use tokio::time::{timeout, timeout_at, Instant};
use tokio_util::sync::CancellationToken;

use super::{ServiceLifecycle, ServiceLifecycleState, ShutdownReason};
use crate::{task_group::TaskGroup, task_identity::TaskKind};

/// Maximum number of concurrently served probe connections.
pub(crate) const MAX_PROBE_CONNECTIONS: usize = 64;
/// Maximum size of a request head (request line and headers, including the
/// terminating blank line): a head must be complete within this many bytes.
pub(crate) const MAX_REQUEST_HEAD_BYTES: usize = 2_048;
/// Bound on every single read and write of a probe connection.
pub(crate) const PROBE_IO_TIMEOUT: Duration = Duration::from_secs(2);
/// Consecutive resource-exhaustion `accept` failures after which the
/// listener is considered unusable.
pub(crate) const MAX_CONSECUTIVE_ACCEPT_FAILURES: u32 = 64;
/// First backoff after a resource-exhaustion `accept` failure.
const ACCEPT_BACKOFF_INITIAL: Duration = Duration::from_millis(10);
/// Largest backoff between `accept` retries.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Header slots handed to `httparse`; more fields are answered `431`.
const MAX_HEADERS: usize = 64;
/// After an answer that left request bytes unread, at most this many more
/// bytes are discarded (within [`PROBE_IO_TIMEOUT`]) before closing, so the
/// close does not turn into a reset that destroys the response.
const LINGER_DISCARD_BYTES: usize = 64 * 1_024;
/// How long a connection must have sent nothing (since its accept or its
/// last read) before it may be evicted to make room (invariant 2).
pub(crate) const EVICTION_MIN_SILENCE: Duration = Duration::from_millis(20);
/// How often a connection waiting for a slot looks again for one to
/// evict while none qualifies (invariant 2).
const EVICTION_RETRY: Duration = Duration::from_millis(1);
/// How long a connection that evicted one to make room waits for a slot
/// before it evicts another.
const EVICTION_PATIENCE: Duration = Duration::from_millis(10);
/// Task name of one connection.
const CONNECTION_TASK_NAME: &str = "service-lifecycle.probe-connection";

/// Connections the kernel queues for the probe server before it accepts
/// them (invariant 2).
pub(crate) const LISTEN_BACKLOG: u32 = 1_024;

/// Binds the probe server's listener on `address` (with `SO_REUSEADDR`
/// on Unix, as Tokio's own bind) with a backlog of [`LISTEN_BACKLOG`].
pub(crate) fn bind_listener(address: std::net::SocketAddr) -> io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    #[cfg(unix)]
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Serves the probe routes on `listener` until `group`'s cancellation token
/// is cancelled (or the listener becomes unusable, see the module docs).
///
/// Each accepted connection is a [`TaskKind::Worker`] task of `group`; a
/// connection task also stops when the token is cancelled. If `group`
/// refuses a new task (it is shutting down), the server returns.
///
/// # Cancel safety
///
/// Dropping the future closes the listener; running connection tasks are
/// owned by `group` and finish on their own timeouts or its cancellation.
pub(crate) async fn serve_probes(
    listener: TcpListener,
    lifecycle: ServiceLifecycle,
    group: TaskGroup,
) {
    let token = group.cancellation_token();
    let cap = connection_cap(open_files_soft_limit());
    let permits = Arc::new(Semaphore::new(cap));
    let waiting_room = Arc::new(Semaphore::new(waiting_room(cap)));
    let slots = Arc::new(Slots::default());
    let mut consecutive_failures = 0_u32;
    let mut backoff = ACCEPT_BACKOFF_INITIAL;
    loop {
        let accepted = tokio::select! {
            biased;
            () = token.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _peer)) => {
                consecutive_failures = 0;
                backoff = ACCEPT_BACKOFF_INITIAL;
                let Some((stream, head, parsed)) = answer_at_once(stream, &lifecycle) else {
                    continue;
                };
                // A connection that must wait for its head takes a slot; a
                // full server lets it wait for one in its own task (the
                // accept loop goes on answering probes), and only when the
                // waiting room is full too does the loop wait here.
                let held = match Arc::clone(&permits).try_acquire_owned() {
                    Ok(held) => Held::Slot(held),
                    Err(_) => match Arc::clone(&waiting_room).try_acquire_owned() {
                        Ok(waiting) => Held::Waiting(waiting),
                        Err(_) => match wait_for_slot(&slots, &permits, &token).await {
                            Some(held) => Held::Slot(held),
                            None => return,
                        },
                    },
                };
                let connection_lifecycle = lifecycle.clone();
                let connection_token = token.clone();
                let connection_slots = Arc::clone(&slots);
                let connection_permits = Arc::clone(&permits);
                let spawned = group.spawn(CONNECTION_TASK_NAME, TaskKind::Worker, async move {
                    let _permit = match held {
                        Held::Slot(held) => held,
                        Held::Waiting(_waiting) => {
                            match wait_for_slot(&connection_slots, &connection_permits, &connection_token).await {
                                Some(held) => held,
                                None => return,
                            }
                        }
                    };
                    let slot = connection_slots.open();
                    tokio::select! {
                        biased;
                        () = connection_token.cancelled() => {}
                        () = slot.evicted.cancelled() => {}
                        () = serve_connection(stream, head, parsed, &connection_lifecycle, &slot) => {}
                    }
                });
                if spawned.is_err() {
                    // The group no longer admits tasks: it is shutting down.
                    return;
                }
            }
            Err(error) => match classify_accept_error(&error) {
                AcceptFailure::Connection => {
                    tracing::debug!(%error, "probe accept: connection-level error, retrying");
                }
                AcceptFailure::Listener => {
                    tracing::error!(%error, "probe listener unusable; failing the service");
                    fail_service(&lifecycle);
                    return;
                }
                AcceptFailure::Resource => {
                    consecutive_failures += 1;
                    if consecutive_failures >= MAX_CONSECUTIVE_ACCEPT_FAILURES {
                        tracing::error!(
                            %error,
                            failures = consecutive_failures,
                            "probe accept keeps failing; failing the service"
                        );
                        fail_service(&lifecycle);
                        return;
                    }
                    tracing::warn!(%error, ?backoff, "probe accept failed; backing off");
                    if !sleep_unless_cancelled(&token, backoff).await {
                        return;
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                }
            },
        }
    }
}

/// What a connection task holds when it starts.
enum Held {
    /// A connection slot.
    Slot(tokio::sync::OwnedSemaphorePermit),
    /// A place in the waiting room: the task waits for a slot.
    Waiting(tokio::sync::OwnedSemaphorePermit),
}

/// Waits for a connection slot, making room by evicting the connection
/// silent longest (invariant 2): at most one eviction per
/// [`EVICTION_PATIENCE`], so waiters do not close more connections than
/// they need while the evicted ones are still closing. `None` when the
/// server stops.
async fn wait_for_slot(
    slots: &Slots,
    permits: &Arc<Semaphore>,
    token: &CancellationToken,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    let mut evicted_at: Option<Instant> = None;
    loop {
        if evicted_at.is_none_or(|at| at.elapsed() >= EVICTION_PATIENCE)
            && slots.evict_longest_silent()
        {
            evicted_at = Some(Instant::now());
        }
        tokio::select! {
            biased;
            () = token.cancelled() => return None,
            acquired = Arc::clone(permits).acquire_owned() => return acquired.ok(),
            () = tokio::time::sleep(EVICTION_RETRY) => {}
        }
    }
}

/// Connections that may wait for a slot in their own task (each holds a
/// descriptor): a quarter of the slots, at least 1.
fn waiting_room(cap: usize) -> usize {
    (cap / 4).max(1)
}

/// The connections that hold a slot at once: [`MAX_PROBE_CONNECTIONS`],
/// and at most a quarter of the process's descriptors (`RLIMIT_NOFILE`,
/// soft), at least 4. With the waiting room (a quarter of the cap) probe
/// clients hold at most 5/16 of the descriptors: never those storage
/// needs (a limit of 64 leaves 44 to the rest of the process). Clients
/// beyond them wait in the listen backlog, holding no descriptor.
fn connection_cap(open_files: Option<u64>) -> usize {
    let quarter = open_files.map_or(usize::MAX, |limit| {
        usize::try_from(limit / 4).unwrap_or(usize::MAX)
    });
    quarter.clamp(4, MAX_PROBE_CONNECTIONS)
}

/// The soft `RLIMIT_NOFILE`, read from `/proc/self/limits` (the crate
/// links no libc binding); `None` where it cannot be read or is unlimited.
fn open_files_soft_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|soft| soft.parse().ok())
}

/// The open connections in accept order, each with whether its head is
/// still awaited: the eviction order of invariant 2.
struct Slots {
    open: Mutex<std::collections::VecDeque<Arc<SlotState>>>,
    /// The origin of `last_input_ms`.
    epoch: Instant,
}

impl Default for Slots {
    fn default() -> Self {
        Self {
            open: Mutex::default(),
            epoch: Instant::now(),
        }
    }
}

struct SlotState {
    /// Cancelled to close the connection.
    evicted: CancellationToken,
    /// `AWAITING_HEAD`, then either `HEAD_READ` (the connection answers) or
    /// `EVICTED` (it closes), decided once by a compare-and-swap, so a head
    /// completed as the eviction picks the slot is never routed and then
    /// dropped unanswered.
    phase: std::sync::atomic::AtomicU8,
    /// Set by the connection's first poll, right before its first read:
    /// only then can a head that already arrived be told from one that is
    /// still awaited, so an unpolled connection is never evicted.
    polled: std::sync::atomic::AtomicBool,
    /// When the client last sent something (its accept, then each read that
    /// returned bytes), in milliseconds since the server's epoch: the
    /// eviction order of invariant 2.
    last_input_ms: std::sync::atomic::AtomicU64,
}

const AWAITING_HEAD: u8 = 0;
const HEAD_READ: u8 = 1;
const EVICTED: u8 = 2;

/// A connection's slot: leaves the list when the connection ends.
struct Slot {
    state: Arc<SlotState>,
    slots: Arc<Slots>,
    evicted: CancellationToken,
}

impl Slots {
    fn open(self: &Arc<Self>) -> Slot {
        let state = Arc::new(SlotState {
            evicted: CancellationToken::new(),
            phase: std::sync::atomic::AtomicU8::new(AWAITING_HEAD),
            polled: std::sync::atomic::AtomicBool::new(false),
            last_input_ms: std::sync::atomic::AtomicU64::new(self.now_ms()),
        });
        self.open.lock().push_back(Arc::clone(&state));
        Slot {
            evicted: state.evicted.clone(),
            state,
            slots: Arc::clone(self),
        }
    }

    /// Milliseconds since the server's epoch.
    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Closes the polled connection still waiting for its head that has
    /// been silent longest, if it has been silent for at least
    /// [`EVICTION_MIN_SILENCE`] (the earliest accepted among equals); true
    /// when one was closed.
    fn evict_longest_silent(&self) -> bool {
        let silent_since = self
            .now_ms()
            .checked_sub(u64::try_from(EVICTION_MIN_SILENCE.as_millis()).unwrap_or(u64::MAX));
        let Some(silent_since) = silent_since else {
            return false;
        };
        let open = self.open.lock();
        loop {
            let candidate = open
                .iter()
                .filter(|slot| {
                    slot.polled.load(std::sync::atomic::Ordering::Acquire)
                        && slot.phase.load(std::sync::atomic::Ordering::Acquire) == AWAITING_HEAD
                        && slot
                            .last_input_ms
                            .load(std::sync::atomic::Ordering::Relaxed)
                            <= silent_since
                })
                .min_by_key(|slot| {
                    slot.last_input_ms
                        .load(std::sync::atomic::Ordering::Relaxed)
                });
            let Some(candidate) = candidate else {
                return false;
            };
            // A head completed since the filter read the phase: look again
            // (each round one candidate leaves the awaiting phase for good).
            if candidate.leave_awaiting(EVICTED) {
                candidate.evicted.cancel();
                return true;
            }
        }
    }
}

impl Slot {
    /// The client sent bytes: it is not silent.
    fn input(&self) {
        self.state
            .last_input_ms
            .store(self.slots.now_ms(), std::sync::atomic::Ordering::Relaxed);
    }

    /// The head is complete (or will never be): false when the slot was
    /// evicted first (the connection then closes without routing).
    fn head_read(&self) -> bool {
        self.state.leave_awaiting(HEAD_READ)
    }
}

impl SlotState {
    /// Moves the slot from `AWAITING_HEAD` to `to`; false when it had left
    /// that phase already.
    fn leave_awaiting(&self, to: u8) -> bool {
        self.phase
            .compare_exchange(
                AWAITING_HEAD,
                to,
                std::sync::atomic::Ordering::AcqRel,
                std::sync::atomic::Ordering::Acquire,
            )
            .is_ok()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots
            .open
            .lock()
            .retain(|open| !Arc::ptr_eq(open, &self.state));
    }
}

/// The three classes of `accept` failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AcceptFailure {
    /// One pending connection failed: retry at once.
    Connection,
    /// The listener itself is unusable: give up.
    Listener,
    /// Probably resource exhaustion (`EMFILE`, `ENFILE`, `ENOBUFS`, ...):
    /// back off and retry.
    Resource,
}

/// Linux `accept(2)` passes on network errors of the pending connection
/// (`ENETDOWN`, `EPROTO`, `ENOPROTOOPT`, `EHOSTDOWN`, `ENONET`,
/// `EHOSTUNREACH`, `EOPNOTSUPP`, `ENETUNREACH`) and asks callers to retry
/// as for `EAGAIN`; these raw codes are the ones without a dedicated kind.
#[cfg(target_os = "linux")]
const PENDING_CONNECTION_ERRNOS: [i32; 4] = [
    71,  // EPROTO
    92,  // ENOPROTOOPT
    112, // EHOSTDOWN
    64,  // ENONET
];

fn classify_accept_error(error: &io::Error) -> AcceptFailure {
    #[cfg(target_os = "linux")]
    if error
        .raw_os_error()
        .is_some_and(|code| PENDING_CONNECTION_ERRNOS.contains(&code))
    {
        return AcceptFailure::Connection;
    }
    match error.kind() {
        io::ErrorKind::ConnectionAborted
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::Interrupted
        | io::ErrorKind::WouldBlock
        | io::ErrorKind::NetworkDown
        | io::ErrorKind::NetworkUnreachable
        | io::ErrorKind::HostUnreachable => AcceptFailure::Connection,
        // `EOPNOTSUPP` is a pending connection's error on Linux.
        #[cfg(target_os = "linux")]
        io::ErrorKind::Unsupported => AcceptFailure::Connection,
        io::ErrorKind::InvalidInput | io::ErrorKind::NotConnected => AcceptFailure::Listener,
        #[cfg(not(target_os = "linux"))]
        io::ErrorKind::Unsupported => AcceptFailure::Listener,
        _ => AcceptFailure::Resource,
    }
}

fn fail_service(lifecycle: &ServiceLifecycle) {
    lifecycle.mark_failed();
    lifecycle.request_shutdown(ShutdownReason::Internal);
}

/// Sleeps `duration`; `false` when `token` was cancelled first.
async fn sleep_unless_cancelled(token: &CancellationToken, duration: Duration) -> bool {
    tokio::select! {
        biased;
        () = token.cancelled() => false,
        () = tokio::time::sleep(duration) => true,
    }
}

/// What reading a request head produced.
#[derive(Debug)]
enum Head {
    /// A complete head. `unread` is true when bytes beyond the head were
    /// received or a body was announced.
    Request {
        method: String,
        path: String,
        unread: bool,
        /// What `/drainz` needs to know about who asks.
        caller: Caller,
    },
    /// Malformed, or the stream ended before a complete head.
    Bad { unread: bool },
    /// Not complete within [`MAX_REQUEST_HEAD_BYTES`] or too many fields.
    TooManyFields,
    /// The head reached [`MAX_REQUEST_HEAD_BYTES`].
    Oversized,
    /// The head was not complete within [`PROBE_IO_TIMEOUT`].
    TimedOut,
    /// The connection failed; nothing can be answered.
    Broken,
}

/// Who sent a request, as far as `/drainz` cares.
#[derive(Debug, Default)]
struct Caller {
    /// A browser sent it for a page: an `Origin` header, or a
    /// `Sec-Fetch-Site` of `cross-site` or `same-site`.
    browser: bool,
    /// The token of an `Authorization: Bearer <token>` header.
    bearer: Option<Vec<u8>>,
}

impl Caller {
    fn of(headers: &[httparse::Header<'_>]) -> Self {
        let mut caller = Self::default();
        for header in headers {
            if header.name.eq_ignore_ascii_case("origin") {
                caller.browser = true;
            } else if header.name.eq_ignore_ascii_case("sec-fetch-site") {
                caller.browser |= matches!(header.value, b"cross-site" | b"same-site");
            } else if header.name.eq_ignore_ascii_case("authorization") {
                caller.bearer = header
                    .value
                    .strip_prefix(b"Bearer ")
                    .map(|token| token.trim_ascii().to_vec());
            }
        }
        caller
    }
}

/// Answers `stream` at once when its complete head arrived with it
/// (invariant 5) and returns `None`; otherwise returns the stream, what
/// was read of its head and the head if it is complete, for a connection
/// task. A connection that failed is closed (`None`).
fn answer_at_once(
    stream: TcpStream,
    lifecycle: &ServiceLifecycle,
) -> Option<(TcpStream, HeadBuffer, Option<Head>)> {
    use std::io::{Read, Write};
    // A socket Tokio just registered has no readiness yet, so its own
    // `try_read` would not look: read the descriptor directly (it is
    // non-blocking) and register it again only when a task must wait.
    let stream = stream.into_std().ok()?;
    let mut head = HeadBuffer::new();
    let parsed = match (&stream).read(head.spare()) {
        Ok(read) => head.received(read),
        Err(error) if would_block(&error) => None,
        Err(_broken) => return None,
    };
    let answerable = match &parsed {
        Some(Head::Request { unread, path, .. }) => {
            !is_metrics(path) && (!unread || drained_to_the_end(&stream))
        }
        Some(Head::Bad { unread }) => !unread || drained_to_the_end(&stream),
        Some(Head::Oversized) => true,
        Some(Head::Broken) => return None,
        Some(Head::TooManyFields | Head::TimedOut) | None => false,
    };
    if !answerable {
        return TcpStream::from_std(stream)
            .ok()
            .map(|stream| (stream, head, parsed));
    }
    if let Some((response, _linger)) = parsed.and_then(|head| respond(lifecycle, head)) {
        let _ = (&stream).write(&response.encode(lifecycle.state()));
        let _ = stream.shutdown(std::net::Shutdown::Write);
    }
    None
}

/// A non-blocking read found nothing to read yet.
fn would_block(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// Discards what `stream` holds without waiting (at most
/// [`LINGER_DISCARD_BYTES`]); true when its sender already closed it, so a
/// close after the answer resets nothing.
fn drained_to_the_end(mut stream: &std::net::TcpStream) -> bool {
    use std::io::Read;
    let mut scratch = [0_u8; 1_024];
    let mut discarded = 0;
    while discarded < LINGER_DISCARD_BYTES {
        match stream.read(&mut scratch) {
            Ok(0) => return true,
            Ok(read) => discarded += read,
            Err(_would_block_or_broken) => return false,
        }
    }
    false
}

/// Whether a request target is the `/metrics` route.
fn is_metrics(target: &str) -> bool {
    target.split_once('?').map_or(target, |(path, _query)| path) == "/metrics"
}

/// The answer to a head, and whether request bytes are left to drain
/// before the close; `None` for a connection that failed.
fn respond(lifecycle: &ServiceLifecycle, head: Head) -> Option<(Response, bool)> {
    Some(match head {
        Head::Request {
            method,
            path,
            unread,
            caller,
        } => (route(lifecycle, &method, &path, &caller), unread),
        Head::Bad { unread } => (Response::plain(400, "bad_request"), unread),
        Head::TooManyFields => (
            Response::plain(431, "request_header_fields_too_large"),
            true,
        ),
        // No lingering for a head past the limit: its sender may keep
        // sending for long (a 64 KiB head), and its slot is worth more to
        // the next probe than the courtesy of a clean close.
        Head::Oversized => (
            Response::plain(431, "request_header_fields_too_large"),
            false,
        ),
        Head::TimedOut => (Response::plain(408, "request_timeout"), false),
        Head::Broken => return None,
    })
}

/// Serves one request on `stream` and closes it: `parsed` when its head
/// is complete, otherwise the head that starts with `head`.
async fn serve_connection(
    mut stream: TcpStream,
    head: HeadBuffer,
    parsed: Option<Head>,
    lifecycle: &ServiceLifecycle,
    slot: &Slot,
) {
    slot.state
        .polled
        .store(true, std::sync::atomic::Ordering::Release);
    let head = match parsed {
        Some(parsed) => parsed,
        None => read_head(&mut stream, head, slot).await,
    };
    if !slot.head_read() {
        return;
    }
    let Some((response, linger)) = respond(lifecycle, head) else {
        return;
    };
    let bytes = response.encode(lifecycle.state());
    let written = timeout(PROBE_IO_TIMEOUT, stream.write_all(&bytes)).await;
    if !matches!(written, Ok(Ok(()))) {
        return;
    }
    if !matches!(
        timeout(PROBE_IO_TIMEOUT, stream.shutdown()).await,
        Ok(Ok(()))
    ) {
        return;
    }
    if linger {
        discard_remaining(&mut stream).await;
    }
}

/// A request head as it arrives, up to [`MAX_REQUEST_HEAD_BYTES`].
struct HeadBuffer {
    bytes: [u8; MAX_REQUEST_HEAD_BYTES],
    filled: usize,
}

impl HeadBuffer {
    fn new() -> Self {
        Self {
            bytes: [0; MAX_REQUEST_HEAD_BYTES],
            filled: 0,
        }
    }

    /// Where the next read goes.
    fn spare(&mut self) -> &mut [u8] {
        &mut self.bytes[self.filled..]
    }

    /// `read` more bytes arrived in [`Self::spare`] (0: the stream ended):
    /// the head once it is complete or can never be, `None` while more is
    /// needed.
    fn received(&mut self, read: usize) -> Option<Head> {
        if read == 0 {
            return Some(Head::Bad { unread: false });
        }
        self.filled += read;
        let filled = self.filled;
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&self.bytes[..filled]) {
            Ok(httparse::Status::Partial) if filled == self.bytes.len() => Some(Head::Oversized),
            Ok(httparse::Status::Partial) => None,
            Ok(httparse::Status::Complete(head_len)) if head_len >= MAX_REQUEST_HEAD_BYTES => {
                Some(Head::Oversized)
            }
            Ok(httparse::Status::Complete(head_len)) => {
                let announces_body = request.headers.iter().any(|header| {
                    (header.name.eq_ignore_ascii_case("content-length")
                        && header.value.iter().any(|byte| (b'1'..=b'9').contains(byte)))
                        || header.name.eq_ignore_ascii_case("transfer-encoding")
                });
                Some(Head::Request {
                    method: request.method.unwrap_or_default().to_owned(),
                    path: request.path.unwrap_or_default().to_owned(),
                    unread: announces_body || head_len < filled,
                    caller: Caller::of(request.headers),
                })
            }
            Err(httparse::Error::TooManyHeaders) => Some(Head::TooManyFields),
            Err(_malformed) => Some(Head::Bad { unread: true }),
        }
    }
}

/// Reads until a complete head, an error, the size limit, or
/// [`PROBE_IO_TIMEOUT`] after the call: one deadline for the whole head, so
/// a client dripping a byte at a time cannot hold a connection slot longer.
/// `head` holds what was read before (a head still partial).
async fn read_head(stream: &mut TcpStream, mut head: HeadBuffer, slot: &Slot) -> Head {
    let deadline = Instant::now() + PROBE_IO_TIMEOUT;
    loop {
        let read = match timeout_at(deadline, stream.read(head.spare())).await {
            Err(_elapsed) => return Head::TimedOut,
            Ok(Err(_error)) => return Head::Broken,
            Ok(Ok(read)) => read,
        };
        if read > 0 {
            slot.input();
        }
        if let Some(parsed) = head.received(read) {
            return parsed;
        }
    }
}

/// Discards what the client still sends (bounded in bytes and time), so
/// closing with unread data does not reset the connection before the client
/// read the response.
async fn discard_remaining(stream: &mut TcpStream) {
    let mut scratch = [0_u8; 1_024];
    let mut discarded = 0;
    let _ = timeout(PROBE_IO_TIMEOUT, async {
        while discarded < LINGER_DISCARD_BYTES {
            match stream.read(&mut scratch).await {
                Ok(0) | Err(_) => break,
                Ok(read) => discarded += read,
            }
        }
    })
    .await;
}

/// Answers a complete request.
fn route(lifecycle: &ServiceLifecycle, method: &str, target: &str, caller: &Caller) -> Response {
    let path = target.split_once('?').map_or(target, |(path, _query)| path);
    let probe_method = matches!(method, "GET" | "POST");
    match path {
        "/readyz" | "/livez" | "/startupz" if !probe_method => {
            Response::plain(405, "method_not_allowed").with_allow("GET, POST")
        }
        "/readyz" => verdict(lifecycle.is_ready(), "ready", "not_ready"),
        "/livez" => verdict(lifecycle.is_live(), "live", "not_live"),
        "/startupz" => verdict(
            lifecycle.state() != ServiceLifecycleState::Starting,
            "started",
            "starting",
        ),
        "/drainz" => {
            let methods = lifecycle.config().drain_request_methods;
            if !(probe_method && methods.allows(method)) {
                Response::plain(405, "method_not_allowed").with_allow(methods.allow_header())
            } else if caller.browser {
                Response::plain(403, "forbidden")
            } else if !lifecycle.drain_token_matches(caller.bearer.as_deref()) {
                Response::plain(401, "unauthorized").with_authenticate()
            } else {
                lifecycle.request_shutdown(ShutdownReason::PreStop);
                Response::plain(200, "draining")
            }
        }
        #[cfg(feature = "metrics")]
        "/metrics" => match lifecycle.metrics_text() {
            None => Response::plain(404, "not_found"),
            Some(_) if method != "GET" => {
                Response::plain(405, "method_not_allowed").with_allow("GET")
            }
            Some(text) => Response::metrics(text),
        },
        _ => Response::plain(404, "not_found"),
    }
}

fn verdict(ok: bool, yes: &'static str, no: &'static str) -> Response {
    if ok {
        Response::plain(200, yes)
    } else {
        Response::plain(503, no)
    }
}

/// One probe response.
#[derive(Debug, Clone)]
struct Response {
    status: u16,
    label: &'static str,
    allow: Option<&'static str>,
    /// A `/metrics` body (OpenMetrics text) instead of the JSON verdict.
    metrics: Option<String>,
    /// A `401`: asks for `Authorization: Bearer`.
    authenticate: bool,
}

impl Response {
    const fn plain(status: u16, label: &'static str) -> Self {
        Self {
            status,
            label,
            allow: None,
            metrics: None,
            authenticate: false,
        }
    }

    #[cfg(feature = "metrics")]
    fn metrics(text: String) -> Self {
        Self {
            metrics: Some(text),
            ..Self::plain(200, "ok")
        }
    }

    fn with_allow(mut self, allow: &'static str) -> Self {
        self.allow = Some(allow);
        self
    }

    fn with_authenticate(mut self) -> Self {
        self.authenticate = true;
        self
    }

    /// Serializes the response; `state` is read after the route acted, so
    /// `/drainz` reports `draining`.
    fn encode(self, state: ServiceLifecycleState) -> Vec<u8> {
        let (body, content_type) = match self.metrics {
            #[cfg(feature = "metrics")]
            Some(text) => (text, super::metrics::CONTENT_TYPE),
            #[cfg(not(feature = "metrics"))]
            Some(text) => (text, "text/plain; charset=utf-8"),
            None => (
                format!(
                    "{{\"status\":\"{}\",\"state\":\"{}\"}}",
                    self.label,
                    state.as_str()
                ),
                "application/json",
            ),
        };
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
             Connection: close\r\nCache-Control: no-store\r\n",
            self.status,
            reason_phrase(self.status),
            body.len()
        );
        if let Some(allow) = self.allow {
            head.push_str("Allow: ");
            head.push_str(allow);
            head.push_str("\r\n");
        }
        if self.authenticate {
            head.push_str("WWW-Authenticate: Bearer\r\n");
        }
        head.push_str("\r\n");
        head.push_str(&body);
        head.into_bytes()
    }
}

const fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Unknown",
    }
}

#[cfg(all(test, not(loom)))]
mod unit_tests {
    use super::*;

    #[test]
    fn the_connection_cap_takes_at_most_a_quarter_of_the_descriptors() {
        assert_eq!(connection_cap(None), MAX_PROBE_CONNECTIONS);
        assert_eq!(connection_cap(Some(1_048_576)), MAX_PROBE_CONNECTIONS);
        assert_eq!(connection_cap(Some(64)), 16);
        assert_eq!(connection_cap(Some(8)), 4);
        assert!(open_files_soft_limit().is_none_or(|limit| limit > 0));
    }

    #[test]
    fn accept_errors_are_classified() {
        use io::ErrorKind::*;
        for kind in [
            ConnectionAborted,
            ConnectionReset,
            Interrupted,
            WouldBlock,
            NetworkDown,
            NetworkUnreachable,
            HostUnreachable,
        ] {
            assert_eq!(
                classify_accept_error(&io::Error::from(kind)),
                AcceptFailure::Connection
            );
        }
        #[cfg(target_os = "linux")]
        for code in [71, 92, 112, 64, 95, 100, 113, 101] {
            // EPROTO, ENOPROTOOPT, EHOSTDOWN, ENONET, EOPNOTSUPP, ENETDOWN,
            // EHOSTUNREACH, ENETUNREACH: retried like EAGAIN (accept(2)).
            assert_eq!(
                classify_accept_error(&io::Error::from_raw_os_error(code)),
                AcceptFailure::Connection,
                "errno {code}"
            );
        }
        for kind in [InvalidInput, NotConnected] {
            assert_eq!(
                classify_accept_error(&io::Error::from(kind)),
                AcceptFailure::Listener
            );
        }
        assert_eq!(
            classify_accept_error(&io::Error::from_raw_os_error(24)),
            AcceptFailure::Resource
        );
    }

    #[test]
    fn responses_carry_the_contract_headers() {
        let bytes = Response::plain(405, "method_not_allowed")
            .with_allow("POST")
            .encode(ServiceLifecycleState::Ready);
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"));
        for header in [
            "Content-Type: application/json\r\n",
            "Connection: close\r\n",
            "Cache-Control: no-store\r\n",
            "Allow: POST\r\n",
        ] {
            assert!(text.contains(header), "{header:?} missing in {text:?}");
        }
        let body = r#"{"status":"method_not_allowed","state":"ready"}"#;
        assert!(text.ends_with(body));
        assert!(text.contains(&format!("Content-Length: {}\r\n", body.len())));
    }
}

#[cfg(test)]
mod tests;
