//! SIGTERM/SIGINT (and SIGHUP), taken by the main thread, and the sink's
//! drain: the set of live sink connections that shutdown reaches from
//! outside the runtimes.

use std::collections::HashSet;
use std::os::fd::RawFd;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

pub struct Signals(libc::sigset_t);

/// Blocks SIGTERM, SIGINT and SIGHUP in this thread; threads started
/// afterwards inherit the mask, so only `wait` ever takes them.
pub fn block_signals() -> Signals {
    // SAFETY: sigset_t is plain data, initialised by sigemptyset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        Signals(set)
    }
}

impl Signals {
    /// Until SIGTERM or SIGINT; each SIGHUP meanwhile calls on_hup.
    pub fn wait(&self, on_hup: impl Fn()) {
        loop {
            let mut sig = 0;
            // SAFETY: the set was initialised by block_signals.
            if unsafe { libc::sigwait(&self.0, &mut sig) } != 0 {
                continue;
            }
            if sig != libc::SIGHUP {
                return;
            }
            on_hup();
        }
    }
}

/// How long, after SIGTERM, a sink connection may still deliver bytes that
/// were in flight before it is ended (the other peers' 150 ms).
pub const DRAIN_WINDOW: Duration = Duration::from_millis(150);

/// The sockets of the live sink connections. A connection is in the set from
/// accept until just before its socket is closed, so every descriptor here is
/// open and still that connection's.
#[derive(Default)]
pub struct Live {
    state: Mutex<LiveState>,
    emptied: Condvar,
}

#[derive(Default)]
struct LiveState {
    fds: HashSet<RawFd>,
    draining: bool, // a connection accepted now is ended at once
}

fn end_reading(fd: RawFd) {
    // SAFETY: fd is open (see Live's comment); shutdown does not close it.
    unsafe { libc::shutdown(fd, libc::SHUT_RD) };
}

pub struct LiveGuard<'a> {
    live: &'a Live,
    fd: RawFd,
}

impl Live {
    /// Registers fd until the guard drops: declare the guard after the socket,
    /// so that it drops (and leaves the set) first.
    pub fn enter(&self, fd: RawFd) -> LiveGuard<'_> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.fds.insert(fd);
        if st.draining {
            end_reading(fd);
        }
        LiveGuard { live: self, fd }
    }

    /// Ends every connection's reading: shutdown(SHUT_RD) makes a pending or
    /// later read return the bytes already received, then end of file. Then
    /// waits, at most `limit`, for every connection to flush and leave.
    pub fn drain(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.draining = true;
        st.fds.iter().copied().for_each(end_reading);
        while !st.fds.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            st = self.emptied.wait_timeout(st, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        true
    }
}

impl Drop for LiveGuard<'_> {
    fn drop(&mut self) {
        let mut st = self.live.state.lock().unwrap_or_else(|e| e.into_inner());
        st.fds.remove(&self.fd);
        if st.fds.is_empty() {
            self.live.emptied.notify_all();
        }
    }
}

/// A server started on its runtime's threads. `_keep` holds the runtime.
pub struct Running {
    pub live: Option<std::sync::Arc<Live>>,
    pub _keep: Box<dyn std::any::Any>,
}

impl Running {
    /// After SIGTERM: a sink gives connections DRAIN_WINDOW to deliver what is
    /// in flight, then ends their reading and waits for their last writes.
    /// Every other app has nothing to finish. Then the process exits 0.
    pub fn stop(self) -> ! {
        if let Some(live) = &self.live {
            std::thread::sleep(DRAIN_WINDOW);
            if !live.drain(Duration::from_secs(2)) {
                eprintln!("yard-peer-rust: sink connections did not finish in 2 s");
            }
        }
        std::process::exit(0)
    }
}
