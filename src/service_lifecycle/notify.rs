//! systemd service-manager notifications (`sd_notify` protocol): `READY=1`
//! when the service becomes ready, `STOPPING=1` at the first shutdown
//! request, `STATUS=` lines with the lifecycle state, and `WATCHDOG=1`
//! pings while the service is live.
//!
//! Written by hand (a datagram per message to `$NOTIFY_SOCKET`) because
//! the maintained `sd-notify` crate connects to the variable's value as a
//! file path, so a socket in the abstract namespace (`@name`, which
//! systemd uses for some units and which containers often pass) would not
//! be reached; the protocol itself is one `sendto` of `KEY=VALUE` lines.
//!
//! Invariants:
//!
//! 1. Nothing is sent, and nothing is read besides the environment, when
//!    `NOTIFY_SOCKET` is unset or empty.
//! 2. Sending never blocks a runtime thread: the socket is non-blocking,
//!    and a message the manager cannot take now is dropped (systemd keeps
//!    only the latest state anyway); a failure is logged once.
//! 3. The watchdog interval is half of `WATCHDOG_USEC`, and only when
//!    `WATCHDOG_PID` is unset or this process's id.

use std::ffi::OsString;
use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Where `$NOTIFY_SOCKET` points.
#[derive(Debug, Clone)]
enum Target {
    Path(PathBuf),
    /// A Linux abstract-namespace name (`@name` in the variable).
    #[cfg(target_os = "linux")]
    Abstract(Vec<u8>),
}

/// Sends notifications to the service manager.
#[derive(Debug)]
pub(crate) struct SystemdNotifier {
    target: Target,
    /// The watchdog ping interval: half of `WATCHDOG_USEC`.
    watchdog: Option<Duration>,
    failure_logged: AtomicBool,
}

impl SystemdNotifier {
    /// The notifier `NOTIFY_SOCKET` asks for, if any.
    pub(crate) fn from_env() -> Option<Self> {
        let socket = std::env::var_os("NOTIFY_SOCKET")?;
        let watchdog = watchdog_interval(
            std::env::var("WATCHDOG_USEC").ok().as_deref(),
            std::env::var("WATCHDOG_PID").ok().as_deref(),
            std::process::id(),
        );
        Self::for_socket(socket, watchdog)
    }

    fn for_socket(socket: OsString, watchdog: Option<Duration>) -> Option<Self> {
        use std::os::unix::ffi::OsStringExt;
        let bytes = socket.into_vec();
        let target = match bytes.first() {
            None => return None,
            Some(b'/') => Target::Path(PathBuf::from(OsString::from_vec(bytes))),
            #[cfg(target_os = "linux")]
            Some(b'@') => Target::Abstract(bytes[1..].to_vec()),
            Some(_) => {
                tracing::warn!(
                    socket = %String::from_utf8_lossy(&bytes),
                    "NOTIFY_SOCKET is neither an absolute path nor an abstract socket name; no service-manager notifications"
                );
                return None;
            }
        };
        Some(Self {
            target,
            watchdog,
            failure_logged: AtomicBool::new(false),
        })
    }

    /// Half of `WATCHDOG_USEC`, when the manager expects pings.
    pub(crate) fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog
    }

    /// Reports a committed transition: `READY=1` on `Ready`, the state as
    /// `STATUS=` otherwise (`STOPPING=1` goes with the first shutdown
    /// request, not with `Draining`).
    pub(crate) fn on_transition(&self, to: crate::service_lifecycle::ServiceLifecycleState) {
        match to {
            crate::service_lifecycle::ServiceLifecycleState::Ready => {
                self.send("READY=1\nSTATUS=ready\n")
            }
            crate::service_lifecycle::ServiceLifecycleState::Draining => {}
            other => self.send(&format!("STATUS={}\n", other.as_str())),
        }
    }

    /// Sends `message` (`KEY=VALUE` lines) as one datagram.
    pub(crate) fn send(&self, message: &str) {
        if let Err(error) = self.try_send(message.as_bytes()) {
            if !self.failure_logged.swap(true, Ordering::Relaxed) {
                tracing::warn!(%error, "service-manager notification not delivered");
            }
        }
    }

    fn try_send(&self, message: &[u8]) -> io::Result<()> {
        let socket = UnixDatagram::unbound()?;
        socket.set_nonblocking(true)?;
        let sent = match &self.target {
            Target::Path(path) => socket.send_to(message, path)?,
            #[cfg(target_os = "linux")]
            Target::Abstract(name) => {
                use std::os::linux::net::SocketAddrExt;
                let address = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                socket.send_to_addr(message, &address)?
            }
        };
        if sent == message.len() {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "truncated notification",
            ))
        }
    }
}

/// Half of `usec` microseconds, when `pid` is unset or `own_pid`.
fn watchdog_interval(usec: Option<&str>, pid: Option<&str>, own_pid: u32) -> Option<Duration> {
    let usec: u64 = usec?.trim().parse().ok().filter(|usec| *usec > 0)?;
    if let Some(pid) = pid {
        if pid.trim().parse::<u32>().ok() != Some(own_pid) {
            return None;
        }
    }
    Some(Duration::from_micros(usec) / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watchdog_pings_at_half_the_interval_for_this_process_only() {
        assert_eq!(
            watchdog_interval(Some("2000000"), None, 7),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            watchdog_interval(Some("2000000"), Some("7"), 7),
            Some(Duration::from_secs(1))
        );
        assert_eq!(watchdog_interval(Some("2000000"), Some("8"), 7), None);
        assert_eq!(watchdog_interval(Some("0"), None, 7), None);
        assert_eq!(watchdog_interval(Some("soon"), None, 7), None);
        assert_eq!(watchdog_interval(None, None, 7), None);
    }

    #[test]
    fn the_socket_variable_names_a_path_or_an_abstract_name() {
        assert!(SystemdNotifier::for_socket(OsString::new(), None).is_none());
        assert!(SystemdNotifier::for_socket("relative".into(), None).is_none());
        assert!(matches!(
            SystemdNotifier::for_socket("/run/systemd/notify".into(), None).map(|n| n.target),
            Some(Target::Path(_))
        ));
        #[cfg(target_os = "linux")]
        assert!(matches!(
            SystemdNotifier::for_socket("@/org/freedesktop/systemd1/notify".into(), None)
                .map(|n| n.target),
            Some(Target::Abstract(name)) if name == b"/org/freedesktop/systemd1/notify"
        ));
    }

    /// The abstract-namespace case end to end: a datagram reaches a socket
    /// bound to an abstract name.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_message_reaches_an_abstract_socket() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("rocketmq-runtime-notify-test-{}", std::process::id());
        let address =
            std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).expect("name");
        let receiver = UnixDatagram::bind_addr(&address).expect("bind");
        let notifier =
            SystemdNotifier::for_socket(format!("@{name}").into(), None).expect("a notifier");
        notifier.send("READY=1\n");
        let mut buffer = [0u8; 64];
        let received = receiver.recv(&mut buffer).expect("a datagram");
        assert_eq!(&buffer[..received], b"READY=1\n");
    }
}
