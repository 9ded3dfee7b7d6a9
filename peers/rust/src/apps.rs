//! What the apps compute, apart from any runtime: the counter's replies, the
//! sink's per-connection buffer, the broadcast chat's lines and limits.

use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};

/// The one shared counter: every connection updates it with one atomic
/// instruction, on whichever thread it runs.
pub static COUNT: AtomicU64 = AtomicU64::new(0);

/// Appends the 8-byte big-endian reply to each request byte of `input`
/// (0x00 reads, 0x01 increments). Returns false at the first other byte: the
/// replies before it are sent, then the connection is closed.
pub fn counter_replies(input: &[u8], out: &mut Vec<u8>) -> bool {
    for &op in input {
        let v = match op {
            0x00 => COUNT.load(Ordering::Relaxed),
            0x01 => COUNT.fetch_add(1, Ordering::Relaxed) + 1,
            _ => return false,
        };
        out.extend_from_slice(&v.to_be_bytes());
    }
    true
}

/// The sink's buffer size for --flush buffered, and its read size: 64 KiB, as yard-serve's.
pub const SINK_BUF: usize = 64 << 10;

/// Opens --out once for every connection. O_APPEND makes each write(2) land
/// whole at the end of the file: chunks of connections interleave, never overlap.
pub fn open_sink(path: &str) -> Result<File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_TRUNC) // as the other peers: a run starts with an empty file
        .mode(0o644)
        .open(path)
        .map_err(|e| format!("--out {path}: {e}"))
}

/// One sink connection's writer: each chunk written at once (--flush each),
/// or gathered in 64 KiB (buffered). A chunk never straddles two writes: the
/// buffer is written first when the chunk would not fit.
pub struct SinkWriter<'a> {
    out: &'a File,
    buf: Option<Vec<u8>>,
}

impl<'a> SinkWriter<'a> {
    pub fn new(out: &'a File, buffered: bool) -> Self {
        SinkWriter { out, buf: buffered.then(|| Vec::with_capacity(SINK_BUF)) }
    }

    pub fn chunk(&mut self, data: &[u8]) -> io::Result<()> {
        match &mut self.buf {
            None => (&*self.out).write_all(data),
            Some(buf) => {
                if buf.len() + data.len() > SINK_BUF {
                    (&*self.out).write_all(buf)?;
                    buf.clear();
                }
                if data.len() >= SINK_BUF {
                    (&*self.out).write_all(data)
                } else {
                    buf.extend_from_slice(data);
                    Ok(())
                }
            }
        }
    }

    pub fn finish(&mut self) -> io::Result<()> {
        match &mut self.buf {
            Some(buf) if !buf.is_empty() => {
                let r = (&*self.out).write_all(buf);
                buf.clear();
                r
            }
            _ => Ok(()),
        }
    }
}

/// The longest line a broadcast client may send, its '\n' included.
pub const MAX_LINE: usize = 64 << 10;
/// The bytes that may wait in the server for one broadcast client.
pub const MAX_QUEUED: usize = 1 << 20;

/// A broadcast client's input: bytes are read into `buf()`, and `take()`
/// cuts off the complete lines received so far.
#[derive(Default)]
pub struct Lines {
    held: BytesMut,
    scanned: usize, // held[..scanned] holds no '\n'
}

impl Lines {
    /// The buffer to read into, with room for a read.
    pub fn buf(&mut self) -> &mut BytesMut {
        if self.held.capacity() - self.held.len() < 4096 {
            self.held.reserve(16 << 10);
        }
        &mut self.held
    }

    /// The complete lines held, as one buffer (shared by every recipient), and
    /// whether the client broke the line limit: a complete line over MAX_LINE
    /// (not included, nor anything after it), or a partial one that reached it.
    pub fn take(&mut self) -> (Option<Bytes>, bool) {
        let (mut start, mut pos) = (0, self.scanned);
        let mut over = false;
        while let Some(i) = memchr::memchr(b'\n', &self.held[pos..]) {
            let end = pos + i + 1;
            if end - start > MAX_LINE {
                over = true;
                break;
            }
            start = end;
            pos = end;
        }
        over |= self.held.len() - start >= MAX_LINE;
        let lines = (start > 0).then(|| self.held.split_to(start).freeze());
        self.scanned = self.held.len();
        (lines, over)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_answers_then_stops_at_a_bad_byte() {
        let before = COUNT.load(Ordering::Relaxed);
        let mut out = Vec::new();
        assert!(!counter_replies(&[1, 0, 7, 1], &mut out));
        assert_eq!(out.len(), 16);
        assert_eq!(u64::from_be_bytes(out[..8].try_into().unwrap()), before + 1);
        assert!(u64::from_be_bytes(out[8..].try_into().unwrap()) >= before + 1);
    }

    fn feed(l: &mut Lines, data: &[u8]) -> (Option<Bytes>, bool) {
        l.buf().extend_from_slice(data);
        l.take()
    }

    #[test]
    fn lines_are_cut_whole_and_partial_ones_held() {
        let mut l = Lines::default();
        assert_eq!(feed(&mut l, b"ab"), (None, false));
        assert_eq!(feed(&mut l, b"c\nde\nf"), (Some(Bytes::from_static(b"abc\nde\n")), false));
        assert_eq!(feed(&mut l, b"\n"), (Some(Bytes::from_static(b"f\n")), false));
    }

    #[test]
    fn line_limit() {
        let mut l = Lines::default();
        let mut exact = vec![b'x'; MAX_LINE - 1];
        exact.push(b'\n');
        assert_eq!(feed(&mut l, &exact).0.map(|b| b.len()), Some(MAX_LINE));
        let mut long = b"ok\n".to_vec();
        long.extend(vec![b'y'; MAX_LINE]);
        long.push(b'\n');
        assert_eq!(feed(&mut l, &long), (Some(Bytes::from_static(b"ok\n")), true));
        let mut l = Lines::default();
        assert_eq!(feed(&mut l, &vec![b'z'; MAX_LINE - 1]), (None, false));
        assert_eq!(feed(&mut l, b"z"), (None, true));
    }
}
