//! The apps on tokio: a task per connection on the multi-threaded,
//! work-stealing runtime (the paradigm of yard-serve's `coro`). An app serves
//! any `Conn`: a TCP stream from --listen, or a TLS stream from --tls-listen
//! (tls.rs), whose handshake is done before the app sees it.

use std::collections::HashMap;
use std::fs::File;
use std::future::{poll_fn, Future};
use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::task::Poll;
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};
use tokio_openssl::SslStream;

use crate::apps::{self, Lines, SinkWriter, MAX_QUEUED, SINK_BUF};
use crate::opts::{App, Opts};
use crate::shutdown::{Live, Running};
use crate::tls::{self, Certs};

/// A connection an app serves: plain TCP, or TLS over it.
pub trait Conn: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    type Read: AsyncRead + Unpin + Send + 'static;
    type Write: AsyncWrite + Unpin + Send + 'static;
    /// The socket (the sink's drain shuts its reading down).
    fn fd(&self) -> RawFd;
    /// A reading half and a writing half, for two tasks.
    fn halves(self) -> (Self::Read, Self::Write);
}

impl Conn for TcpStream {
    type Read = OwnedReadHalf;
    type Write = OwnedWriteHalf;
    fn fd(&self) -> RawFd {
        self.as_raw_fd()
    }
    fn halves(self) -> (OwnedReadHalf, OwnedWriteHalf) {
        self.into_split() // no lock between the halves
    }
}

impl Conn for SslStream<TcpStream> {
    type Read = tokio::io::ReadHalf<Self>;
    type Write = tokio::io::WriteHalf<Self>;
    fn fd(&self) -> RawFd {
        self.get_ref().as_raw_fd()
    }
    fn halves(self) -> (Self::Read, Self::Write) {
        tokio::io::split(self) // one TLS state: the halves take turns
    }
}

/// An app: what a connection of either kind gets (a clone of it per connection).
pub trait Serve: Clone + Send + Sync + 'static {
    fn serve<S: Conn>(self, s: S) -> impl Future<Output = ()> + Send + 'static;
}

/// The sockets the server listens on: --listen's, then each --tls-listen's
/// with the certificate they present.
pub struct Listeners {
    pub plain: Option<std::net::TcpListener>,
    pub tls: Vec<std::net::TcpListener>,
    pub certs: Option<Arc<Certs>>,
}

pub fn start(o: &Opts, listeners: Listeners) -> Result<Running, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.workers())
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let mut live = None;
    match o.app {
        App::Echo => spawn_listeners(&rt, listeners, Echo)?,
        App::Counter => spawn_listeners(&rt, listeners, Counter)?,
        App::Sink => {
            let l = Arc::new(Live::default());
            live = Some(l.clone());
            let app = Sink {
                file: Arc::new(apps::open_sink(&o.out)?),
                buffered: o.buffered,
                live: l,
                path: Arc::new(o.out.clone()),
            };
            spawn_listeners(&rt, listeners, app)?
        }
        App::Broadcast => spawn_listeners(&rt, listeners, Broadcast(Arc::new(Room::default())))?,
        App::Rest => spawn_listeners(&rt, listeners, crate::rest::app(o)?)?,
    }
    Ok(Running { live, _keep: Box::new(rt) })
}

/// An accept loop per listener on rt, each connection served by app; on a
/// TLS listener after its handshake, with the certificate current when it
/// was accepted.
fn spawn_listeners<A: Serve>(rt: &tokio::runtime::Runtime, l: Listeners, app: A) -> Result<(), String> {
    let _in_runtime = rt.enter();
    let tokio_listener = |l: std::net::TcpListener| {
        l.set_nonblocking(true).map_err(|e| format!("listen: {e}"))?;
        TcpListener::from_std(l).map_err(|e| format!("listen: {e}"))
    };
    if let Some(plain) = l.plain {
        let app = app.clone();
        rt.spawn(accept_loop(tokio_listener(plain)?, move |s| app.clone().serve(s)));
    }
    for t in l.tls {
        let (app, certs) = (app.clone(), l.certs.clone().ok_or("TLS listener without certificate")?);
        rt.spawn(accept_loop(tokio_listener(t)?, move |s| {
            let (app, acceptor) = (app.clone(), certs.current());
            async move {
                if let Some(s) = tls::accept(acceptor, s).await {
                    app.serve(s).await;
                }
            }
        }));
    }
    Ok(())
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

#[derive(Clone)]
struct Echo;
#[derive(Clone)]
struct Counter;
#[derive(Clone)]
struct Sink {
    file: Arc<File>,
    buffered: bool,
    live: Arc<Live>,
    path: Arc<String>,
}
#[derive(Clone)]
struct Broadcast(Arc<Room>);

impl Serve for Echo {
    fn serve<S: Conn>(self, s: S) -> impl Future<Output = ()> + Send + 'static {
        echo(s)
    }
}

impl Serve for Counter {
    fn serve<S: Conn>(self, s: S) -> impl Future<Output = ()> + Send + 'static {
        counter(s)
    }
}

impl Serve for Sink {
    fn serve<S: Conn>(self, s: S) -> impl Future<Output = ()> + Send + 'static {
        sink(s, self.file, self.buffered, self.live, self.path)
    }
}

impl Serve for Broadcast {
    fn serve<S: Conn>(self, s: S) -> impl Future<Output = ()> + Send + 'static {
        broadcast(s, self.0)
    }
}

/// Every byte received is sent back.
async fn echo<S: Conn>(mut s: S) {
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
async fn counter<S: Conn>(mut s: S) {
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
async fn sink<S: Conn>(mut s: S, file: Arc<File>, buffered: bool, live: Arc<Live>, path: Arc<String>) {
    let _live = live.enter(s.fd()); // dropped before s: see Live
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

async fn broadcast<S: Conn>(s: S, room: Arc<Room>) {
    let (mut r, w) = s.halves();
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

async fn write_loop<W: AsyncWrite + Unpin>(mut w: W, mut rx: mpsc::UnboundedReceiver<Bytes>, me: Arc<Member>) {
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
async fn write_batch<W: AsyncWrite + Unpin>(w: &mut W, batch: &mut Vec<Bytes>) -> io::Result<()> {
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
