//! The health probe server over real TCP on 127.0.0.1:0 (the server's invariants, `service_lifecycle/probe.rs`):
//! routes and methods, `/drainz` methods, protocol errors (400/404/431),
//! incremental head reads, the 64-connection limit and I/O timeouts.
//!
//! Clients are plain `tokio::net::TcpStream`s writing raw HTTP/1.1.

use std::net::SocketAddr;
use std::time::Duration;

use super::serve_probes;
use crate::{
    context::RuntimeContext, service_lifecycle::DrainRequestMethods,
    service_lifecycle::ServiceLifecycle, service_lifecycle::ServiceLifecycleConfig,
    service_lifecycle::ServiceLifecycleState, service_lifecycle::ShutdownReason,
    task_group::TaskGroup,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio::time::{timeout, Instant};

/// The server's I/O timeout (contract: 2 s).
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// The server's connection limit (contract: 64).
const LIMIT: usize = 64;
/// Upper bound for any single client wait in these tests.
const TEST_WAIT: Duration = Duration::from_secs(20);

/// A running probe server on its own harness group.
struct Server {
    addr: SocketAddr,
    lifecycle: ServiceLifecycle,
    group: TaskGroup,
    task: JoinHandle<()>,
    _context: RuntimeContext,
}

impl Server {
    async fn start(config: ServiceLifecycleConfig) -> Self {
        Self::start_lifecycle(ServiceLifecycle::new(config)).await
    }

    /// A server for `lifecycle` (built by the caller, e.g. with a token).
    async fn start_lifecycle(lifecycle: ServiceLifecycle) -> Self {
        let context = RuntimeContext::try_from_current("probe-test").expect("inside Tokio");
        let group = context
            .root_group()
            .try_child("probes")
            .expect("child group");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(serve_probes(listener, lifecycle.clone(), group.clone()));
        Self {
            addr,
            lifecycle,
            group,
            task,
            _context: context,
        }
    }

    async fn start_default() -> Self {
        Self::start(ServiceLifecycleConfig::new("broker")).await
    }

    /// Cancels the group and checks that the server returns.
    async fn stop(self) {
        self.group.cancel();
        timeout(TEST_WAIT, self.task)
            .await
            .expect("server stops on cancellation")
            .expect("server task did not panic");
    }

    async fn send(&self, raw: &[u8]) -> Reply {
        let mut stream = TcpStream::connect(self.addr).await.expect("connect");
        stream.write_all(raw).await.expect("write request");
        read_reply(&mut stream).await
    }

    async fn call(&self, method: &str, path: &str) -> Reply {
        self.send(format!("{method} {path} HTTP/1.1\r\nHost: probe\r\n\r\n").as_bytes())
            .await
    }

    /// Waits (without advancing paused time) until `n` connection tasks run.
    async fn wait_for_connections(&self, n: usize) {
        for _ in 0..1_000_000 {
            if self.group.task_count() == n {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!(
            "expected {n} connection tasks, found {}",
            self.group.task_count()
        );
    }
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// Checks the status, the body and the headers every response carries.
    fn expect(&self, status: u16, label: &str, state: ServiceLifecycleState) {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(
            self.body,
            format!(r#"{{"status":"{label}","state":"{}"}}"#, state.as_str()),
            "{self:?}"
        );
        assert_eq!(self.header("content-type"), Some("application/json"));
        assert_eq!(self.header("connection"), Some("close"));
        assert_eq!(self.header("cache-control"), Some("no-store"));
        assert_eq!(
            self.header("content-length"),
            Some(self.body.len().to_string().as_str())
        );
    }
}

/// Reads a whole response (the server closes every connection).
async fn read_reply(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> Reply {
    let mut raw = Vec::new();
    timeout(TEST_WAIT, stream.read_to_end(&mut raw))
        .await
        .expect("response within the test bound")
        .expect("read response");
    parse_reply(&raw)
}

fn parse_reply(raw: &[u8]) -> Reply {
    let text = std::str::from_utf8(raw).expect("utf-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("complete head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status = status_line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers = lines
        .map(|line| {
            let (name, value) = line.split_once(':').expect("header line");
            (name.trim().to_owned(), value.trim().to_owned())
        })
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

#[tokio::test]
async fn readyz_livez_startupz_answer_get_and_post() {
    use ServiceLifecycleState::{Ready, Starting};
    let server = Server::start_default().await;

    for method in ["GET", "POST"] {
        server
            .call(method, "/readyz")
            .await
            .expect(503, "not_ready", Starting);
        server
            .call(method, "/livez")
            .await
            .expect(200, "live", Starting);
        server
            .call(method, "/startupz")
            .await
            .expect(503, "starting", Starting);
    }

    server.lifecycle.mark_ready().expect("starting -> ready");
    for method in ["GET", "POST"] {
        server
            .call(method, "/readyz")
            .await
            .expect(200, "ready", Ready);
        server
            .call(method, "/livez")
            .await
            .expect(200, "live", Ready);
        server
            .call(method, "/startupz")
            .await
            .expect(200, "started", Ready);
    }
    // A query string does not change the route.
    server
        .call("GET", "/readyz?verbose=1")
        .await
        .expect(200, "ready", Ready);

    // Other methods on the probe routes: 405 with `Allow: GET, POST`.
    for method in ["PUT", "DELETE", "HEAD", "PATCH", "OPTIONS", "get"] {
        for path in ["/readyz", "/livez", "/startupz"] {
            let reply = server.call(method, path).await;
            reply.expect(405, "method_not_allowed", Ready);
            assert_eq!(reply.header("allow"), Some("GET, POST"), "{method} {path}");
        }
    }

    // Unknown paths: 404 for any method.
    for (method, path) in [
        ("GET", "/"),
        ("GET", "/healthz"),
        ("POST", "/readyz/extra"),
        ("DELETE", "/nope"),
    ] {
        server
            .call(method, path)
            .await
            .expect(404, "not_found", Ready);
    }

    // Not-ready readiness and not-live liveness.
    server.lifecycle.mark_failed();
    use ServiceLifecycleState::Failed;
    server
        .call("GET", "/readyz")
        .await
        .expect(503, "not_ready", Failed);
    server
        .call("GET", "/livez")
        .await
        .expect(503, "not_live", Failed);
    server
        .call("GET", "/startupz")
        .await
        .expect(200, "started", Failed);
    server.stop().await;
}

#[tokio::test]
async fn drainz_default_is_post_only_and_requests_a_pre_stop_shutdown() {
    use ServiceLifecycleState::{Draining, Ready};
    let server = Server::start_default().await;
    server.lifecycle.mark_ready().expect("ready");

    for method in ["GET", "PUT", "DELETE"] {
        let reply = server.call(method, "/drainz").await;
        reply.expect(405, "method_not_allowed", Ready);
        assert_eq!(reply.header("allow"), Some("POST"), "{method}");
    }
    assert_eq!(server.lifecycle.state(), Ready);
    assert!(server.lifecycle.shutdown_request().is_none());

    server
        .call("POST", "/drainz")
        .await
        .expect(200, "draining", Draining);
    assert_eq!(server.lifecycle.state(), Draining);
    let request = server.lifecycle.shutdown_request().expect("requested");
    assert_eq!(request.reason, ShutdownReason::PreStop);

    // Readiness is revoked; the server keeps answering while draining, and
    // a repeated drain keeps the first request.
    server
        .call("GET", "/readyz")
        .await
        .expect(503, "not_ready", Draining);
    server
        .call("GET", "/livez")
        .await
        .expect(200, "live", Draining);
    server
        .call("POST", "/drainz")
        .await
        .expect(200, "draining", Draining);
    assert_eq!(server.lifecycle.shutdown_request(), Some(request));
    server.stop().await;
}

/// A browser-originated `/drainz` (any `Origin`, or a cross-site or
/// same-site `Sec-Fetch-Site`: what a web page the operator opens sends) is
/// refused with 403 and drains nothing; the probes answer such requests.
#[tokio::test]
async fn drainz_refuses_browser_originated_requests() {
    use ServiceLifecycleState::Ready;
    let server = Server::start_default().await;
    server.lifecycle.mark_ready().expect("ready");
    for header in [
        "Origin: http://evil.example",
        "Origin: null",
        "Sec-Fetch-Site: cross-site",
        "Sec-Fetch-Site: same-site",
    ] {
        let request = format!(
            "POST /drainz HTTP/1.1\r\nHost: probe\r\n{header}\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n"
        );
        server
            .send(request.as_bytes())
            .await
            .expect(403, "forbidden", Ready);
        assert!(server.lifecycle.shutdown_request().is_none(), "{header}");
    }
    server
        .send(b"GET /readyz HTTP/1.1\r\nHost: probe\r\nOrigin: http://evil.example\r\n\r\n")
        .await
        .expect(200, "ready", Ready);
    server.stop().await;
}

/// With a drain token, `/drainz` without it or with another is 401 (and a
/// `WWW-Authenticate: Bearer` challenge); the right one drains; the probes
/// stay open.
#[tokio::test]
async fn drainz_requires_the_drain_token_when_one_is_set() {
    use ServiceLifecycleState::{Draining, Ready};
    const TOKEN: &str = "s3cret-drain-token-0123";
    let lifecycle = ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"))
        .with_drain_token(TOKEN)
        .expect("a valid token");
    assert!(lifecycle.requires_drain_token());
    let server = Server::start_lifecycle(lifecycle).await;
    server.lifecycle.mark_ready().expect("ready");
    for authorization in [
        String::new(),
        "Authorization: Bearer wrong-token-0123456789\r\n".to_owned(),
        format!("Authorization: Bearer {TOKEN}x\r\n"),
        format!("Authorization: Basic {TOKEN}\r\n"),
    ] {
        let request = format!("POST /drainz HTTP/1.1\r\nHost: probe\r\n{authorization}\r\n");
        let reply = server.send(request.as_bytes()).await;
        reply.expect(401, "unauthorized", Ready);
        assert_eq!(reply.header("www-authenticate"), Some("Bearer"));
        assert!(
            server.lifecycle.shutdown_request().is_none(),
            "{authorization}"
        );
    }
    server
        .call("GET", "/livez")
        .await
        .expect(200, "live", Ready);
    let request =
        format!("POST /drainz HTTP/1.1\r\nHost: probe\r\nAuthorization: Bearer {TOKEN}\r\n\r\n");
    server
        .send(request.as_bytes())
        .await
        .expect(200, "draining", Draining);
    server.stop().await;
}

/// A token must be 16 to 256 visible ASCII characters; empty removes it.
#[test]
fn drain_tokens_are_validated() {
    let lifecycle = || ServiceLifecycle::new(ServiceLifecycleConfig::new("broker"));
    for refused in [
        "short",
        "has a space in it!",
        &"x".repeat(257),
        "contröl-characters-é",
    ] {
        let error = lifecycle().with_drain_token(refused).expect_err(refused);
        assert_eq!(error.kind(), crate::RuntimeErrorKind::Configuration);
    }
    assert!(!lifecycle()
        .with_drain_token("")
        .expect("empty: none")
        .requires_drain_token());
}

#[tokio::test]
async fn drainz_accepts_get_when_configured() {
    let config = ServiceLifecycleConfig {
        drain_request_methods: DrainRequestMethods::GetOrPost,
        ..ServiceLifecycleConfig::new("broker")
    };
    let server = Server::start(config).await;
    server.lifecycle.mark_ready().expect("ready");

    let reply = server.call("PUT", "/drainz").await;
    reply.expect(405, "method_not_allowed", ServiceLifecycleState::Ready);
    assert_eq!(reply.header("allow"), Some("GET, POST"));

    server
        .call("GET", "/drainz")
        .await
        .expect(200, "draining", ServiceLifecycleState::Draining);
    assert_eq!(
        server
            .lifecycle
            .shutdown_request()
            .map(|request| request.reason),
        Some(ShutdownReason::PreStop)
    );
    server.stop().await;
}

#[tokio::test]
async fn malformed_and_empty_heads_are_400() {
    use ServiceLifecycleState::Starting;
    let server = Server::start_default().await;
    for raw in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET /readyz HTTP/9.9\r\n\r\n",
        b"GET /readyz HTTP/1.1\r\nno colon here\r\n\r\n",
        b"\x00\x01\x02\x03\r\n\r\n",
        // End of stream before the head is complete.
        b"GET /readyz HTTP/1.1\r\nHost: probe\r\n",
    ] {
        let mut stream = TcpStream::connect(server.addr).await.expect("connect");
        stream.write_all(raw).await.expect("write");
        stream.shutdown().await.expect("half-close");
        read_reply(&mut stream)
            .await
            .expect(400, "bad_request", Starting);
    }
    // Connect and close the write side without sending anything.
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    stream.shutdown().await.expect("half-close");
    read_reply(&mut stream)
        .await
        .expect(400, "bad_request", Starting);
    server.stop().await;
}

#[tokio::test]
async fn oversized_heads_and_too_many_fields_are_431() {
    use ServiceLifecycleState::Starting;
    let server = Server::start_default().await;

    // A head that does not end within 2,048 bytes (sent in one piece, more
    // than the limit, without a terminating blank line in the first 2 KiB):
    // An oversized head is answered with 431.
    let mut raw = b"GET /readyz HTTP/1.1\r\nX-Fill: ".to_vec();
    raw.extend_from_slice(&[b'a'; 3_000]);
    raw.extend_from_slice(b"\r\n\r\n");
    server
        .send(&raw)
        .await
        .expect(431, "request_header_fields_too_large", Starting);

    // Exactly at the limit still incomplete: 431 as well.
    let mut raw = b"GET /readyz HTTP/1.1\r\nX-Fill: ".to_vec();
    raw.resize(2_048, b'b');
    server
        .send(&raw)
        .await
        .expect(431, "request_header_fields_too_large", Starting);

    // A complete head of exactly 2,048 bytes is oversized too (≥ 2,048).
    let mut raw = b"GET /readyz HTTP/1.1\r\nX-Fill: ".to_vec();
    raw.resize(2_044, b'd');
    raw.extend_from_slice(b"\r\n\r\n");
    assert_eq!(raw.len(), 2_048);
    server
        .send(&raw)
        .await
        .expect(431, "request_header_fields_too_large", Starting);

    // Too many header fields within the size limit.
    let mut raw = b"GET /readyz HTTP/1.1\r\n".to_vec();
    for index in 0..100 {
        raw.extend_from_slice(format!("h{index}: v\r\n").as_bytes());
    }
    raw.extend_from_slice(b"\r\n");
    assert!(raw.len() < 2_048);
    server
        .send(&raw)
        .await
        .expect(431, "request_header_fields_too_large", Starting);

    // A large but complete head under the limit is served.
    let mut raw = b"GET /livez HTTP/1.1\r\nX-Fill: ".to_vec();
    raw.resize(2_000, b'c');
    raw.extend_from_slice(b"\r\n\r\n");
    server.send(&raw).await.expect(200, "live", Starting);
    server.stop().await;
}

#[tokio::test]
async fn a_head_split_across_many_small_writes_is_read_incrementally() {
    let server = Server::start_default().await;
    server.lifecycle.mark_ready().expect("ready");
    let raw = b"GET /readyz HTTP/1.1\r\nHost: probe\r\nUser-Agent: kube-probe/1.31\r\nAccept: */*\r\n\r\n";
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    for chunk in raw.chunks(3) {
        stream.write_all(chunk).await.expect("write chunk");
        stream.flush().await.expect("flush");
        // No timer: on this single-threaded runtime, `yield_now` resumes
        // the client only after the I/O driver was polled, so the server's
        // connection task reads what has arrived before the next chunk.
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    }
    read_reply(&mut stream)
        .await
        .expect(200, "ready", ServiceLifecycleState::Ready);
    server.stop().await;
}

/// A client that drips its head a byte at a time (each byte well within
/// the 2 s timeout) is still answered `408` 2 s after it connected: the
/// timeout bounds the whole head, not each read (paused time).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_client_dripping_its_head_is_dropped_two_seconds_after_connecting() {
    let server = Server::start_default().await;
    let started = Instant::now();
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    server.wait_for_connections(1).await;
    let (mut reader, mut writer) = stream.split();
    let drip = async {
        for byte in b"GET /livez HTTP/1.1\r\n" {
            if writer.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(900)).await;
        }
        std::future::pending::<()>().await;
    };
    let reply = tokio::select! {
        reply = read_reply(&mut reader) => reply,
        () = drip => unreachable!("the drip never ends"),
    };
    let waited = started.elapsed();
    reply.expect(408, "request_timeout", ServiceLifecycleState::Starting);
    assert!(
        waited >= IO_TIMEOUT && waited < IO_TIMEOUT + Duration::from_millis(500),
        "{waited:?}"
    );
    server.stop().await;
}

/// A client that connects and sends nothing is answered `408` and closed
/// after the 2 s read timeout (paused time).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_silent_client_is_dropped_after_its_timeout() {
    let server = Server::start_default().await;
    let started = Instant::now();
    let mut stream = TcpStream::connect(server.addr).await.expect("connect");
    server.wait_for_connections(1).await;
    let reply = read_reply(&mut stream).await;
    let waited = started.elapsed();
    reply.expect(408, "request_timeout", ServiceLifecycleState::Starting);
    assert!(
        waited >= IO_TIMEOUT && waited < IO_TIMEOUT + Duration::from_millis(500),
        "{waited:?}"
    );
    // The connection task is gone and its permit released.
    server.wait_for_connections(0).await;
    server
        .call("GET", "/livez")
        .await
        .expect(200, "live", ServiceLifecycleState::Starting);
    server.stop().await;
}

/// Opens `LIMIT` idle connections and waits until the server holds all of
/// them.
async fn saturate(server: &Server) -> Vec<TcpStream> {
    let mut idle = Vec::with_capacity(LIMIT);
    for _ in 0..LIMIT {
        idle.push(TcpStream::connect(server.addr).await.expect("connect idle"));
    }
    server.wait_for_connections(LIMIT).await;
    idle
}

/// 64 idle connections hold every slot: a 65th client's `/livez`, whose
/// head arrived with its connection, is answered at once by the accept
/// loop (invariant 5; paused time: no I/O timeout elapses) and takes no
/// slot, so no idle client is closed for it. The server never runs more
/// than 64 connection tasks.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_probe_is_answered_at_once_while_idle_clients_hold_every_slot() {
    let server = Server::start_default().await;
    let started = Instant::now();
    let mut idle = saturate(&server).await;
    let mut extra = TcpStream::connect(server.addr).await.expect("connect 65th");
    extra
        .write_all(b"GET /livez HTTP/1.1\r\nHost: probe\r\n\r\n")
        .await
        .expect("write 65th");
    read_reply(&mut extra)
        .await
        .expect(200, "live", ServiceLifecycleState::Starting);
    assert_eq!(started.elapsed(), Duration::ZERO, "no timeout was needed");
    assert_eq!(server.group.task_count(), LIMIT, "the probe took no slot");
    let mut byte = [0_u8; 1];
    for client in [0, LIMIT - 1] {
        assert!(
            timeout(Duration::from_millis(1), idle[client].read(&mut byte))
                .await
                .is_err(),
            "idle client {client} is still open"
        );
    }
    idle.clear();
    server.stop().await;
}

/// A client whose head has not arrived waits for a slot in its own task;
/// it makes room by closing the connection silent longest (the earliest
/// accepted among equals), never one that sent a byte more recently, and
/// its head is then answered (invariant 2).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_client_waiting_for_a_slot_closes_the_connection_silent_longest() {
    let server = Server::start_default().await;
    let mut idle = saturate(&server).await;
    tokio::time::advance(Duration::from_millis(30)).await;
    // The oldest client speaks: it is no longer the longest silent, though
    // silent long enough to be evicted when the late client comes.
    idle[0].write_all(b"GET /li").await.expect("partial head");
    for _ in 0..1_000 {
        tokio::task::yield_now().await;
    }
    tokio::time::advance(Duration::from_millis(30)).await;
    let mut late = TcpStream::connect(server.addr).await.expect("connect 65th");
    let mut byte = [0_u8; 1];
    let closed = timeout(TEST_WAIT, idle[1].read(&mut byte))
        .await
        .expect("the longest silent client is closed");
    assert_eq!(
        closed.expect("end of stream"),
        0,
        "closed without an answer"
    );
    assert!(
        timeout(Duration::from_millis(1), idle[0].read(&mut byte))
            .await
            .is_err(),
        "the client that spoke is still open"
    );
    late.write_all(b"GET /livez HTTP/1.1\r\n\r\n")
        .await
        .expect("write");
    read_reply(&mut late)
        .await
        .expect(200, "live", ServiceLifecycleState::Starting);
    idle.clear();
    server.stop().await;
}

/// A connection silent for less than `EVICTION_MIN_SILENCE` is never
/// evicted (a probe between its connect and its write); once silent that
/// long it is, the earliest accepted first (invariant 2).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn only_connections_silent_for_the_minimum_are_evicted() {
    let slots = std::sync::Arc::new(super::Slots::default());
    let open: Vec<_> = (0..2).map(|_| slots.open()).collect();
    for slot in &open {
        slot.state
            .polled
            .store(true, std::sync::atomic::Ordering::Release);
    }
    assert!(!slots.evict_longest_silent(), "silent for 0 ms");
    tokio::time::advance(super::EVICTION_MIN_SILENCE - Duration::from_millis(1)).await;
    assert!(
        !slots.evict_longest_silent(),
        "silent just under the minimum"
    );
    tokio::time::advance(Duration::from_millis(1)).await;
    open[0].input();
    assert!(slots.evict_longest_silent(), "the other one qualifies");
    assert!(open[1].evicted.is_cancelled());
    assert!(!open[0].evicted.is_cancelled(), "it just sent a byte");
    assert!(!slots.evict_longest_silent(), "nobody else qualifies");
    // Both qualify: the one silent longest goes, not the earliest accepted.
    let later = slots.open();
    later
        .state
        .polled
        .store(true, std::sync::atomic::Ordering::Release);
    tokio::time::advance(super::EVICTION_MIN_SILENCE).await;
    open[0].input();
    tokio::time::advance(super::EVICTION_MIN_SILENCE).await;
    assert!(slots.evict_longest_silent());
    assert!(later.evicted.is_cancelled(), "silent longest");
    assert!(
        !open[0].evicted.is_cancelled(),
        "accepted earlier, spoke later"
    );
}

/// Clients that send their heads are answered while others stay idle, and
/// 100 more idle clients on top of a full server delay a probe by at most
/// the eviction's minimum silence and never raise the number of
/// connection tasks above 64 plus the waiting room (paused time).
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_probe_is_answered_while_a_hundred_more_idle_clients_connect() {
    let server = Server::start_default().await;
    let mut idle = saturate(&server).await;
    // Half of the connections send their head: they are answered and end.
    for stream in idle.iter_mut().take(LIMIT / 2) {
        stream
            .write_all(b"GET /livez HTTP/1.1\r\n\r\n")
            .await
            .expect("write");
    }
    for stream in idle.iter_mut().take(LIMIT / 2) {
        read_reply(stream)
            .await
            .expect(200, "live", ServiceLifecycleState::Starting);
    }
    // 100 more idle clients on top.
    let started = Instant::now();
    let mut more = Vec::new();
    for _ in 0..100 {
        more.push(TcpStream::connect(server.addr).await.expect("connect"));
    }
    let reply = server.call("GET", "/livez").await;
    reply.expect(200, "live", ServiceLifecycleState::Starting);
    // The idle clients beyond the slots and the waiting room hold the
    // accept loop until one connection has been silent for the minimum.
    assert!(started.elapsed() <= super::EVICTION_MIN_SILENCE);
    assert!(server.group.task_count() <= LIMIT + super::waiting_room(LIMIT));
    drop((idle, more));
    server.stop().await;
}

#[tokio::test]
async fn cancelling_the_group_stops_the_server() {
    let server = Server::start_default().await;
    server
        .call("GET", "/livez")
        .await
        .expect(200, "live", ServiceLifecycleState::Starting);
    let addr = server.addr;
    server.stop().await;
    // The listener is closed with the server.
    assert!(TcpStream::connect(addr).await.is_err());
}
