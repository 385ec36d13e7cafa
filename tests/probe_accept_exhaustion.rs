//! The probe server under file-descriptor exhaustion
//! (`src/service_lifecycle/probe.rs`, invariant 4): `accept` failing with
//! `EMFILE` is retried with backoff, the service stays up and serves the
//! waiting client once descriptors are free again; a listener that stays
//! unusable marks the service failed and requests an `Internal` shutdown.
//!
//! Descriptor exhaustion is process-wide, so this binary holds a single
//! test that runs both scenarios in sequence (Linux only: it lowers
//! `RLIMIT_NOFILE` and fills the table with `/dev/null` handles).
#![cfg(all(feature = "probes", feature = "metrics"))]
#![cfg(target_os = "linux")]
// `getrlimit`/`setrlimit` are the only way to bound the descriptor table of
// this test process; both calls get valid pointers (see the SAFETY notes).
#![allow(unsafe_code)]

use std::fs::File;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_runtime::{
    RuntimeContext, ServiceLifecycle, ServiceLifecycleConfig, ServiceLifecycleState, ShutdownReason,
};
use tokio::io::AsyncReadExt;
use tokio::sync::Notify;
use tracing::span;

/// Counts warnings of the probe module and wakes a waiter on each.
struct AcceptWarnings {
    count: AtomicUsize,
    seen: Notify,
}

struct Capture(Arc<AcceptWarnings>);

impl tracing::Subscriber for Capture {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let metadata = event.metadata();
        if *metadata.level() == tracing::Level::WARN
            && metadata
                .module_path()
                .is_some_and(|path| path.ends_with("probe"))
        {
            self.0.count.fetch_add(1, Ordering::SeqCst);
            self.0.seen.notify_waiters();
        }
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

/// Lowers the soft descriptor limit and opens `/dev/null` until `EMFILE`;
/// dropping the returned handles frees the table again.
fn exhaust_descriptors() -> Vec<File> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is a valid, writable `rlimit`.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    let open = std::fs::read_dir("/proc/self/fd")
        .expect("fd table")
        .count() as libc::rlim_t;
    let lowered = libc::rlimit {
        rlim_cur: limit.rlim_cur.min(open + 256),
        rlim_max: limit.rlim_max,
    };
    // SAFETY: `lowered` is a valid `rlimit` not above the hard limit.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lowered) }, 0);
    let mut filler = Vec::new();
    loop {
        match File::open("/dev/null") {
            Ok(file) => filler.push(file),
            Err(error) if error.raw_os_error() == Some(libc::EMFILE) => return filler,
            Err(error) => panic!("unexpected open failure: {error}"),
        }
    }
}

/// A probe server whose only client connected (and sent its request)
/// before the descriptor table was filled, so the server's `accept` meets
/// `EMFILE`. The server task is not polled before the table is full: the
/// runtime is single-threaded and nothing awaits until then.
struct Scenario {
    lifecycle: ServiceLifecycle,
    client: tokio::net::TcpStream,
    filler: Vec<File>,
    _context: RuntimeContext,
}

/// Starts a lifecycle with its probe server on 127.0.0.1:0 (through the
/// public `start`, which spawns the server without polling it) and fills
/// the descriptor table after one client connected.
async fn scenario(name: &'static str) -> Scenario {
    let context = RuntimeContext::try_from_current(name).expect("inside Tokio");
    let mut config = ServiceLifecycleConfig::new("broker");
    config.probe_bind_addr = Some("127.0.0.1:0".parse().expect("address"));
    let lifecycle = ServiceLifecycle::new(config);
    lifecycle
        .start(&context.service_context("probes"))
        .await
        .expect("started");
    lifecycle.mark_ready().expect("ready");
    let address = lifecycle.probe_local_addr().expect("bound");
    // The kernel completes the handshake into the accept backlog.
    let mut client = std::net::TcpStream::connect(address).expect("connect");
    client
        .write_all(b"GET /livez HTTP/1.1\r\nHost: probe\r\n\r\n")
        .expect("request");
    client.set_nonblocking(true).expect("non-blocking");
    let client = tokio::net::TcpStream::from_std(client).expect("register");
    let filler = exhaust_descriptors();
    Scenario {
        lifecycle,
        client,
        filler,
        _context: context,
    }
}

#[tokio::test(start_paused = true)]
async fn accept_exhaustion_backs_off_and_recovers_and_a_lasting_one_fails_the_service() {
    let warnings = Arc::new(AcceptWarnings {
        count: AtomicUsize::new(0),
        seen: Notify::new(),
    });
    let _capture = tracing::subscriber::set_default(Capture(Arc::clone(&warnings)));

    // Transient exhaustion: the server backs off, then serves the client.
    let mut transient = scenario("probe-exhaustion-transient").await;
    let warned = warnings.seen.notified();
    tokio::pin!(warned);
    warned.as_mut().enable();
    if warnings.count.load(Ordering::SeqCst) == 0 {
        tokio::time::timeout(Duration::from_secs(60), warned)
            .await
            .expect("hang guard: the server met EMFILE and warned");
    }
    assert_eq!(transient.lifecycle.state(), ServiceLifecycleState::Ready);
    transient.filler.clear();
    let mut response = String::new();
    tokio::time::timeout(
        Duration::from_secs(60),
        transient.client.read_to_string(&mut response),
    )
    .await
    .expect("hang guard: served after the backoff")
    .expect("read");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert_eq!(transient.lifecycle.state(), ServiceLifecycleState::Ready);
    assert_eq!(transient.lifecycle.shutdown_request(), None);

    // Lasting exhaustion: after its retries the server gives up, fails the
    // service and requests an Internal shutdown.
    let lasting = scenario("probe-exhaustion-lasting").await;
    let request = tokio::time::timeout(
        Duration::from_secs(600),
        lasting.lifecycle.wait_for_shutdown(),
    )
    .await
    .expect("hang guard: the server gave up");
    drop(lasting.filler);
    assert_eq!(request.reason, ShutdownReason::Internal);
    assert_eq!(lasting.lifecycle.state(), ServiceLifecycleState::Failed);
    assert!(
        warnings.count.load(Ordering::SeqCst) > 2,
        "backed off several times first"
    );
    drop(lasting.client);
}
