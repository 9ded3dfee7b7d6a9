//! yard-peer-rust: Switchyard's Rust reference server. The engine's echo,
//! counter, sink and REST apps and the broadcast chat, on tokio (a
//! work-stealing M:N runtime over epoll) or on monoio (thread-per-core
//! runtimes over io_uring, each with its own SO_REUSEPORT listener).
//! See docs/peers.md for the launcher contract and the protocols.

mod apps;
mod opts;
mod rest;
mod rt_monoio;
mod rt_tokio;
mod shutdown;
mod tls;

use std::io::Write;
use std::net::{SocketAddr, TcpListener};

use opts::{Opts, Runtime};
use socket2::{Domain, Protocol, Socket, Type};

fn main() {
    // Any panic, in any thread, ends the process, as `panic = "abort"` would: a bug never
    // leaves the server running with a dead thread. A hook rather than the profile
    // setting, so that `cargo test --release` (make test) reuses the release build's crates
    // instead of compiling them all again with unwinding.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::abort();
    }));
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("bcrypt") {
        std::process::exit(rest::bcrypt_command(&args[1..]));
    }
    let o = match opts::parse(&args) {
        Ok(Some(o)) => o,
        Ok(None) => std::process::exit(0), // --help
        Err(msg) => {
            eprintln!("yard-peer-rust: {msg}");
            std::process::exit(2);
        }
    };
    // SIGTERM, SIGINT and SIGHUP are blocked in every thread (the runtimes'
    // threads inherit the mask) and taken by the main thread with sigwait.
    let signals = shutdown::block_signals();
    if let Err(msg) = run(&o, &signals) {
        eprintln!("yard-peer-rust: {msg}");
        std::process::exit(1);
    }
}

fn run(o: &Opts, signals: &shutdown::Signals) -> Result<(), String> {
    // The certificate first: a bad file is exit 1 before anything listens.
    let certs = match (&o.tls_cert, &o.tls_key) {
        (Some(c), Some(k)) => Some(tls::Certs::load(c, k)?),
        _ => None,
    };
    let monoio = o.runtime == Runtime::Monoio;
    let plain = match &o.listen {
        Some(l) => Some(bind(resolve("--listen", l)?, monoio)?),
        None => None,
    };
    let mut tls = Vec::new();
    for l in &o.tls_listen {
        tls.push(bind(resolve("--tls-listen", l)?, false)?);
    }
    let local = |l: &TcpListener| l.local_addr().map_err(|e| format!("listen: {e}"));
    let mut words = Vec::new();
    if let Some(p) = &plain {
        words.push(local(p)?.to_string());
    }
    for t in &tls {
        words.push(format!("tls:{}", local(t)?));
    }
    let server = match o.runtime {
        Runtime::Tokio => {
            rt_tokio::start(o, rt_tokio::Listeners { plain, tls, certs: certs.clone() })?
        }
        Runtime::Monoio => {
            // One listener per runtime, all on the port the first one got
            // (opts::parse gives monoio --listen and no --tls-listen).
            let first = plain.ok_or("--runtime monoio needs --listen")?;
            let at = local(&first)?;
            let mut listeners = vec![first];
            for _ in 1..o.workers() {
                listeners.push(bind(at, true)?);
            }
            rt_monoio::start(o, listeners)?
        }
    };
    println!("listening {}", words.join(" "));
    std::io::stdout().flush().map_err(|e| format!("stdout: {e}"))?;
    signals.wait(|| match &certs {
        Some(c) => c.reload(),
        None => eprintln!("yard-peer-rust: SIGHUP: nothing to reload (no --tls-listen)"),
    });
    server.stop()
}

/// HOST:PORT to one socket address; a name resolves to its first address.
fn resolve(flag: &str, listen: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = listen.parse::<SocketAddr>() {
        return Ok(a);
    }
    listen
        .to_socket_addrs()
        .map_err(|e| format!("{flag} {listen}: {e}"))?
        .next()
        .ok_or_else(|| format!("{flag} {listen}: the name has no address"))
}

/// A listening socket for addr: IPv4 only for an IPv4 address, and for `[::]`
/// IPv4 and IPv6 (IPV6_V6ONLY set to 0 explicitly, as yard-serve does).
fn bind(addr: SocketAddr, reuse_port: bool) -> Result<TcpListener, String> {
    let err = |what: &str, e: std::io::Error| format!("listen {addr}: {what}: {e}");
    let domain = if addr.is_ipv6() { Domain::IPV6 } else { Domain::IPV4 };
    let s = Socket::new(domain, Type::STREAM, Some(Protocol::TCP)).map_err(|e| err("socket", e))?;
    s.set_reuse_address(true).map_err(|e| err("SO_REUSEADDR", e))?;
    if reuse_port {
        s.set_reuse_port(true).map_err(|e| err("SO_REUSEPORT", e))?;
    }
    if addr.is_ipv6() {
        s.set_only_v6(false).map_err(|e| err("IPV6_V6ONLY", e))?;
    }
    s.bind(&addr.into()).map_err(|e| err("bind", e))?;
    s.listen(4096).map_err(|e| err("listen", e))?;
    Ok(s.into())
}
