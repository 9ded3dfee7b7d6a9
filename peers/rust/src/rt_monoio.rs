//! The apps on monoio: thread-per-core. N threads, each with its own io_uring
//! runtime and its own SO_REUSEPORT listener; a connection stays on the thread
//! that accepted it (the paradigm of yard-serve's `uring`). Buffers are owned
//! and lent to the kernel for each operation (monoio's rent-style I/O).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::{TcpListener, TcpStream};
use monoio::{IoUringDriver, RuntimeBuilder};

use crate::apps::{self, SinkWriter, SINK_BUF};
use crate::opts::{App, Opts};
use crate::shutdown::{Live, Running};

#[derive(Clone)]
enum Serve {
    Echo,
    Counter,
    Sink { file: Arc<File>, buffered: bool, live: Arc<Live>, path: Arc<String> },
}

pub fn start(o: &Opts, listeners: Vec<std::net::TcpListener>) -> Result<Running, String> {
    let mut live = None;
    let serve = match o.app {
        App::Echo => Serve::Echo,
        App::Counter => Serve::Counter,
        App::Sink => {
            let l = Arc::new(Live::default());
            live = Some(l.clone());
            Serve::Sink {
                file: Arc::new(apps::open_sink(&o.out)?),
                buffered: o.buffered,
                live: l,
                path: Arc::new(o.out.clone()),
            }
        }
        App::Rest | App::Broadcast => unreachable!("refused by opts::parse"),
    };
    // Each thread reports whether its ring and listener are up before the
    // caller prints "listening"; io_uring refused is an error, not a fallback.
    let (ready, started) = mpsc::channel();
    let n = listeners.len();
    for (i, listener) in listeners.into_iter().enumerate() {
        let (serve, ready) = (serve.clone(), ready.clone());
        std::thread::Builder::new()
            .name(format!("monoio-{i}"))
            .spawn(move || {
                let rt = RuntimeBuilder::<IoUringDriver>::new().enable_timer().build();
                let mut rt = match rt {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready.send(Err(format!(
                            "--runtime monoio: io_uring is unavailable here: {e}"
                        )));
                        return;
                    }
                };
                rt.block_on(async move {
                    match TcpListener::from_std(listener) {
                        Ok(l) => {
                            let _ = ready.send(Ok(()));
                            accept_loop(l, serve).await
                        }
                        Err(e) => {
                            let _ = ready.send(Err(format!("--runtime monoio: listener: {e}")));
                        }
                    }
                })
            })
            .map_err(|e| format!("--runtime monoio: starting a thread: {e}"))?;
    }
    drop(ready);
    for _ in 0..n {
        // A thread that ends without a word has panicked (and aborted us).
        started.recv().map_err(|_| "--runtime monoio: a runtime thread ended".to_string())??;
    }
    Ok(Running { live, _keep: Box::new(()) })
}

async fn accept_loop(listener: TcpListener, serve: Serve) {
    loop {
        match listener.accept().await {
            Ok((s, _)) => {
                let _ = s.set_nodelay(true);
                match &serve {
                    Serve::Echo => monoio::spawn(echo(s)),
                    Serve::Counter => monoio::spawn(counter(s)),
                    Serve::Sink { file, buffered, live, path } => {
                        monoio::spawn(sink(s, file.clone(), *buffered, live.clone(), path.clone()))
                    }
                };
            }
            Err(e) => {
                eprintln!("yard-peer-rust: accept: {e}");
                monoio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Every byte received is sent back: the buffer goes to the kernel for the
/// receive, comes back with its length set, and goes out whole.
async fn echo(mut s: TcpStream) {
    let mut buf = Vec::with_capacity(16 << 10);
    loop {
        let (r, b) = s.read(buf).await;
        match r {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let (w, b) = s.write_all(b).await;
        if w.is_err() {
            return;
        }
        buf = b;
    }
}

async fn counter(mut s: TcpStream) {
    let mut input = Vec::with_capacity(4096);
    let mut out = Vec::with_capacity(8 * 4096);
    loop {
        let (r, b) = s.read(input).await;
        input = b;
        match r {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        out.clear();
        let good = apps::counter_replies(&input, &mut out);
        if !out.is_empty() {
            let (w, b) = s.write_all(out).await;
            out = b;
            if w.is_err() {
                return;
            }
        }
        if !good {
            return;
        }
    }
}

/// As tokio's sink: the file write is a plain write(2) on this thread.
async fn sink(mut s: TcpStream, file: Arc<File>, buffered: bool, live: Arc<Live>, path: Arc<String>) {
    let _live = live.enter(s.as_raw_fd()); // dropped before s: see Live
    let mut w = SinkWriter::new(&file, buffered);
    let mut buf = Vec::with_capacity(SINK_BUF);
    let mut result = Ok(());
    loop {
        let (r, b) = s.read(buf).await;
        buf = b;
        match r {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        result = w.chunk(&buf);
        if result.is_err() {
            break;
        }
    }
    if result.is_ok() {
        result = w.finish();
    }
    if let Err(e) = result {
        eprintln!("yard-peer-rust: sink: writing {path}: {e}");
    }
}
