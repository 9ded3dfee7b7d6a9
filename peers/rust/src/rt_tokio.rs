//! The apps on tokio: a task per connection on the multi-threaded,
//! work-stealing runtime (the paradigm of yard-serve's `coro`).

use std::collections::HashMap;
use std::fs::File;
use std::future::{poll_fn, Future};
use std::io::{self, IoSlice};
use std::os::fd::AsRawFd;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::task::Poll;
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};

use crate::apps::{self, Lines, SinkWriter, MAX_QUEUED, SINK_BUF};
use crate::opts::{App, Opts};
use crate::shutdown::{Live, Running};

pub fn start(o: &Opts, listener: std::net::TcpListener) -> Result<Running, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.workers())
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    listener.set_nonblocking(true).map_err(|e| format!("listen: {e}"))?;
    let listener = {
        let _in_runtime = rt.enter();
        TcpListener::from_std(listener).map_err(|e| format!("listen: {e}"))?
    };
    let mut live = None;
    match o.app {
        App::Echo => {
            rt.spawn(accept_loop(listener, echo));
        }
        App::Counter => {
            rt.spawn(accept_loop(listener, counter));
        }
        App::Sink => {
            let file = Arc::new(apps::open_sink(&o.out)?);
            let l = Arc::new(Live::default());
            live = Some(l.clone());
            let (buffered, path) = (o.buffered, Arc::new(o.out.clone()));
            rt.spawn(accept_loop(listener, move |s| {
                sink(s, file.clone(), buffered, l.clone(), path.clone())
            }));
        }
        App::Broadcast => {
            let room = Arc::new(Room::default());
            rt.spawn(accept_loop(listener, move |s| broadcast(s, room.clone())));
        }
        App::Rest => crate::rest::start(&rt, listener, o)?,
    }
    Ok(Running { live, _keep: Box::new(rt) })
}

/// Accepts until the process ends, a task per connection. Out of descriptors
/// and the like: report and back off instead of spinning.
pub async fn accept_loop<F, Fut>(listener: TcpListener, handle: F)
where
    F: Fn(TcpStream) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        match listener.accept().await {
            Ok((s, _)) => {
                let _ = s.set_nodelay(true);
                tokio::spawn(handle(s));
            }
            Err(e) => {
                eprintln!("yard-peer-rust: accept: {e}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Every byte received is sent back.
async fn echo(mut s: TcpStream) {
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let n = match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if s.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// A pipelined batch read at once is answered with one write.
async fn counter(mut s: TcpStream) {
    let mut input = vec![0u8; 4096];
    let mut out = Vec::with_capacity(8 * input.len());
    loop {
        let n = match s.read(&mut input).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        out.clear();
        let good = apps::counter_replies(&input[..n], &mut out);
        if !out.is_empty() && s.write_all(&out).await.is_err() {
            return;
        }
        if !good {
            return;
        }
    }
}

/// Reads until end of file (or the drain's shutdown) and appends what it read
/// to the shared file. The write is a plain write(2) on the worker thread, as
/// Go's and Node's sinks do: to /dev/null or the page cache it does not block
/// for long, and tokio::fs would send every chunk through spawn_blocking.
async fn sink(mut s: TcpStream, file: Arc<File>, buffered: bool, live: Arc<Live>, path: Arc<String>) {
    let _live = live.enter(s.as_raw_fd()); // dropped before s: see Live
    let mut w = SinkWriter::new(&file, buffered);
    let mut buf = vec![0u8; SINK_BUF];
    let mut result = Ok(());
    while let Ok(n @ 1..) = s.read(&mut buf).await {
        result = w.chunk(&buf[..n]);
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

/// The broadcast chat's room. A sender holds the read lock while it queues a
/// line for every other member, so senders run in parallel; never across an await.
#[derive(Default)]
struct Room {
    members: RwLock<HashMap<u64, Arc<Member>>>,
    next_id: AtomicU64,
}

/// One client: its writer task writes everything queued for it at once.
struct Member {
    queue: mpsc::UnboundedSender<Bytes>,
    queued: AtomicUsize, // bytes queued or being written
    kill: Notify,        // ends the reader (which then ends the writer)
}

impl Room {
    fn broadcast(&self, from: u64, lines: &Bytes) {
        let members = self.members.read().unwrap_or_else(|e| e.into_inner());
        for (&id, m) in members.iter() {
            if id != from {
                m.send(lines);
            }
        }
    }
}

impl Member {
    /// Queues the lines, or drops a client that has MAX_QUEUED bytes it has not taken.
    fn send(&self, lines: &Bytes) {
        let before = self.queued.fetch_add(lines.len(), Ordering::AcqRel);
        if before + lines.len() > MAX_QUEUED || self.queue.send(lines.clone()).is_err() {
            self.kill.notify_one();
        }
    }
}

/// f, unless `kill` is notified first (None).
async fn unless_killed<F: Future>(f: F, kill: &Notify) -> Option<F::Output> {
    let mut f = pin!(f);
    let mut killed = pin!(kill.notified());
    poll_fn(|cx| {
        if let Poll::Ready(v) = f.as_mut().poll(cx) {
            return Poll::Ready(Some(v));
        }
        killed.as_mut().poll(cx).map(|()| None)
    })
    .await
}

async fn broadcast(s: TcpStream, room: Arc<Room>) {
    let (mut r, w) = s.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    let me = Arc::new(Member { queue: tx, queued: AtomicUsize::new(0), kill: Notify::new() });
    let id = room.next_id.fetch_add(1, Ordering::Relaxed);
    room.members.write().unwrap_or_else(|e| e.into_inner()).insert(id, me.clone());
    let writer = tokio::spawn(write_loop(w, rx, me.clone()));
    let mut lines = Lines::default();
    // Ends at end of file, a read error, a line over the limit or a kill.
    while let Some(Ok(1..)) = unless_killed(r.read_buf(lines.buf()), &me.kill).await {
        let (complete, over) = lines.take();
        if let Some(complete) = complete {
            room.broadcast(id, &complete);
        }
        if over {
            break;
        }
    }
    room.members.write().unwrap_or_else(|e| e.into_inner()).remove(&id);
    writer.abort(); // it may be blocked writing to a client that does not read
}

async fn write_loop(mut w: OwnedWriteHalf, mut rx: mpsc::UnboundedReceiver<Bytes>, me: Arc<Member>) {
    let mut batch = Vec::new();
    while rx.recv_many(&mut batch, 256).await > 0 {
        let n: usize = batch.iter().map(Bytes::len).sum();
        if write_batch(&mut w, &mut batch).await.is_err() {
            me.kill.notify_one();
            return;
        }
        me.queued.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Writes every buffer of the batch, as few writev(2) as the socket allows.
async fn write_batch(w: &mut OwnedWriteHalf, batch: &mut Vec<Bytes>) -> io::Result<()> {
    let mut first = 0;
    while first < batch.len() {
        let mut n = {
            let mut slices = [IoSlice::new(&[]); 64];
            let k = (batch.len() - first).min(slices.len());
            for (slot, b) in slices.iter_mut().zip(&batch[first..first + k]) {
                *slot = IoSlice::new(b);
            }
            w.write_vectored(&slices[..k]).await?
        };
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        while n > 0 {
            let len = batch[first].len();
            if n >= len {
                n -= len;
                first += 1;
            } else {
                batch[first].advance(n);
                n = 0;
            }
        }
    }
    batch.clear();
    Ok(())
}
