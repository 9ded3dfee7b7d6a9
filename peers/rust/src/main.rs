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

use std::io::Write;
use std::net::{SocketAddr, TcpListener};

use opts::{Opts, Runtime};
use socket2::{Domain, Protocol, Socket, Type};

fn main() {
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
    // SIGTERM and SIGINT are blocked in every thread (the runtimes' threads
    // inherit the mask) and taken by the main thread with sigwait.
    let signals = shutdown::block_signals();
    if let Err(msg) = run(&o, &signals) {
        eprintln!("yard-peer-rust: {msg}");
        std::process::exit(1);
    }
}

fn run(o: &Opts, signals: &shutdown::Signals) -> Result<(), String> {
    let addr = resolve(&o.listen)?;
    let first = bind(addr, o.runtime == Runtime::Monoio)?;
    let local = first.local_addr().map_err(|e| format!("listen {}: {e}", o.listen))?;
    let server = match o.runtime {
        Runtime::Tokio => rt_tokio::start(o, first)?,
        Runtime::Monoio => {
            // One listener per runtime, all on the port the first one got.
            let mut listeners = vec![first];
            for _ in 1..o.workers() {
                listeners.push(bind(local, true)?);
            }
            rt_monoio::start(o, listeners)?
        }
    };
    println!("listening {local}");
    std::io::stdout().flush().map_err(|e| format!("stdout: {e}"))?;
    signals.wait();
    server.stop()
}

/// HOST:PORT to one socket address; a name resolves to its first address.
fn resolve(listen: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = listen.parse::<SocketAddr>() {
        return Ok(a);
    }
    listen
        .to_socket_addrs()
        .map_err(|e| format!("--listen {listen}: {e}"))?
        .next()
        .ok_or_else(|| format!("--listen {listen}: the name has no address"))
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
