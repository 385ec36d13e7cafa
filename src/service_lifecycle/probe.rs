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
//! 2. At most [`MAX_PROBE_CONNECTIONS`] connection tasks run at a time
//!    (fewer under a low `RLIMIT_NOFILE`: a quarter of it, at least 4),
//!    each a [`TaskKind::Worker`] task of the server's group, plus the one
//!    connection the accept loop holds while it waits for a slot. When
//!    every slot is taken, the connection that has waited longest without
//!    sending a complete request head (among those polled at least once:
//!    a head that arrived with the connection is read before it can be
//!    evicted) is closed to make room, so clients
//!    that hold idle or half-sent connections (hundreds of them) cannot keep
//!    a probe waiting: a probe's head arrives at once and is answered. Only
//!    when every open connection has a complete head (it is being answered,
//!    within [`PROBE_IO_TIMEOUT`]) does the new one wait for a slot. The
//!    listen backlog is Tokio's (1,024).
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
/// How often a full server looks again for a connection to evict while
/// every open one is still to be polled for the first time.
const EVICTION_RETRY: Duration = Duration::from_millis(1);
/// Task name of one connection.
const CONNECTION_TASK_NAME: &str = "service-lifecycle.probe-connection";

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
    let permits = Arc::new(Semaphore::new(connection_cap(open_files_soft_limit())));
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
                let held = match Arc::clone(&permits).try_acquire_owned() {
                    Ok(held) => held,
                    Err(_) => {
                        // Every slot is taken: close the connection that
                        // has waited longest for its head, then take the
                        // slot it gives back. Connections not yet polled
                        // are not candidates (their head may be waiting
                        // in the socket); while none is, look again every
                        // millisecond as they are polled.
                        let mut acquired = None;
                        while acquired.is_none() {
                            slots.evict_oldest_idle();
                            acquired = tokio::select! {
                                biased;
                                () = token.cancelled() => return,
                                acquired = Arc::clone(&permits).acquire_owned() => match acquired {
                                    Ok(acquired) => Some(acquired),
                                    Err(_closed) => return,
                                },
                                () = tokio::time::sleep(EVICTION_RETRY) => None,
                            };
                        }
                        acquired.unwrap_or_else(|| unreachable!("the loop ends with a permit"))
                    }
                };
                let slot = slots.open();
                let connection_lifecycle = lifecycle.clone();
                let connection_token = token.clone();
                let spawned = group.spawn(CONNECTION_TASK_NAME, TaskKind::Worker, async move {
                    let _permit = held;
                    let slot = slot;
                    tokio::select! {
                        biased;
                        () = connection_token.cancelled() => {}
                        () = slot.evicted.cancelled() => {}
                        () = serve_connection(stream, &connection_lifecycle, &slot) => {}
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

/// The connections the server holds at once: [`MAX_PROBE_CONNECTIONS`],
/// and at most a quarter of the process's descriptors (`RLIMIT_NOFILE`,
/// soft), at least 4: probe clients never take the descriptors storage
/// needs (a limit of 64 leaves 48 to the rest of the process). Clients
/// beyond the cap wait in the listen backlog, holding no descriptor.
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
#[derive(Default)]
struct Slots {
    open: Mutex<std::collections::VecDeque<Arc<SlotState>>>,
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
        });
        self.open.lock().push_back(Arc::clone(&state));
        Slot {
            evicted: state.evicted.clone(),
            state,
            slots: Arc::clone(self),
        }
    }

    /// Closes the oldest polled connection still waiting for its head, if
    /// any.
    fn evict_oldest_idle(&self) {
        let open = self.open.lock();
        if let Some(oldest) = open.iter().find(|slot| {
            slot.polled.load(std::sync::atomic::Ordering::Acquire) && slot.leave_awaiting(EVICTED)
        }) {
            oldest.evicted.cancel();
        }
    }
}

impl Slot {
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

/// Serves one request on `stream` and closes it.
async fn serve_connection(mut stream: TcpStream, lifecycle: &ServiceLifecycle, slot: &Slot) {
    slot.state
        .polled
        .store(true, std::sync::atomic::Ordering::Release);
    let head = read_head(&mut stream).await;
    if !slot.head_read() {
        return;
    }
    let (response, linger) = match head {
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
        Head::Broken => return,
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

/// Reads until a complete head, an error, the size limit, or
/// [`PROBE_IO_TIMEOUT`] after the call: one deadline for the whole head, so
/// a client dripping a byte at a time cannot hold a connection slot longer.
async fn read_head(stream: &mut TcpStream) -> Head {
    let deadline = Instant::now() + PROBE_IO_TIMEOUT;
    let mut buffer = [0_u8; MAX_REQUEST_HEAD_BYTES];
    let mut filled = 0;
    loop {
        if filled == buffer.len() {
            return Head::Oversized;
        }
        let read = match timeout_at(deadline, stream.read(&mut buffer[filled..])).await {
            Err(_elapsed) => return Head::TimedOut,
            Ok(Err(_error)) => return Head::Broken,
            Ok(Ok(read)) => read,
        };
        if read == 0 {
            return Head::Bad { unread: false };
        }
        filled += read;
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut request = httparse::Request::new(&mut headers);
        match request.parse(&buffer[..filled]) {
            Ok(httparse::Status::Partial) => {}
            Ok(httparse::Status::Complete(head_len)) if head_len >= MAX_REQUEST_HEAD_BYTES => {
                return Head::Oversized;
            }
            Ok(httparse::Status::Complete(head_len)) => {
                let announces_body = request.headers.iter().any(|header| {
                    (header.name.eq_ignore_ascii_case("content-length")
                        && header.value.iter().any(|byte| (b'1'..=b'9').contains(byte)))
                        || header.name.eq_ignore_ascii_case("transfer-encoding")
                });
                return Head::Request {
                    method: request.method.unwrap_or_default().to_owned(),
                    path: request.path.unwrap_or_default().to_owned(),
                    unread: announces_body || head_len < filled,
                    caller: Caller::of(request.headers),
                };
            }
            Err(httparse::Error::TooManyHeaders) => return Head::TooManyFields,
            Err(_malformed) => return Head::Bad { unread: true },
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
