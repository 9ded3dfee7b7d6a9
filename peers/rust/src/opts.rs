//! The command line: the flags of the other peers, plus --runtime and --workers.

pub const USAGE: &str = "\
usage: yard-peer-rust [--runtime tokio|monoio] --app echo|counter|sink|rest|broadcast --listen HOST:PORT [flags]
       yard-peer-rust --app NAME [--listen HOST:PORT] --tls-listen HOST:PORT --tls-cert FILE --tls-key FILE [flags]

  --runtime NAME      tokio (default): a work-stealing M:N runtime over epoll, every app;
                      monoio: thread-per-core runtimes over io_uring, echo, counter and sink
  --app NAME          echo, counter, sink, rest or broadcast (required)
  --listen HOST:PORT  address to listen on; port 0 picks a free port, IPv6 as [::1]:PORT
                      (required unless --tls-listen is given)
  --tls-listen HOST:PORT
                      also listen for TLS connections (1.2 and 1.3) here; may be given
                      several times; needs --tls-cert and --tls-key; tokio only
  --tls-cert FILE     TLS: the server's certificate, then its chain (PEM)
  --tls-key FILE      TLS: the certificate's private key (PEM)
  --workers N         tokio's worker threads, or monoio's runtimes (one thread and one
                      SO_REUSEPORT listener each) (default: the CPUs this process may use)
  --cluster N         the same as --workers N (the other peers' name for it)
  --out PATH          sink: file the received bytes are appended to (default /dev/null)
  --flush MODE        sink: each (one write per chunk received) or buffered (64 KiB per
                      connection, flushed when full and at close) (default each)
  --bcrypt-cost N     rest: bcrypt cost, 4..31 (default 10)
  --longpoll-ms MS    rest: delay before GET /longPoll answers (default 5000)

Prints \"listening HOST:PORT\" once it accepts connections (every address, a TLS one as
tls:HOST:PORT); exits 0 on SIGTERM or SIGINT; SIGHUP reloads the TLS certificate and key.
`yard-peer-rust bcrypt hash|verify ...` hashes or checks one password (bcrypt --help).
";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Runtime {
    Tokio,
    Monoio,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum App {
    Echo,
    Counter,
    Sink,
    Rest,
    Broadcast,
}

#[derive(Clone, Debug)]
pub struct Opts {
    pub runtime: Runtime,
    pub app: App,
    pub listen: Option<String>,
    pub tls_listen: Vec<String>,
    pub tls_cert: Option<String>,
    pub tls_key: Option<String>,
    pub workers: usize, // 0: the CPUs this process may use
    pub out: String,
    pub buffered: bool,
    pub bcrypt_cost: u32,
    pub longpoll_ms: u64,
}

impl Opts {
    pub fn workers(&self) -> usize {
        if self.workers > 0 {
            self.workers
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

fn number<T: std::str::FromStr>(flag: &str, v: &str, what: &str) -> Result<T, String> {
    v.parse().map_err(|_| format!("{flag} {v:?}: expected {what}"))
}

/// Ok(None) for --help (printed). `--flag value` and `--flag=value` both work.
pub fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut runtime = Runtime::Tokio;
    let mut app = None;
    let mut listen = None;
    let mut tls_listen = Vec::new();
    let (mut tls_cert, mut tls_key) = (None, None);
    let mut workers = 0usize;
    let mut out = "/dev/null".to_string();
    let mut buffered = false;
    let mut bcrypt_cost = 10u32;
    let mut longpoll_ms = 5000u64;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if arg == "--help" || arg == "-h" {
            print!("{USAGE}");
            return Ok(None);
        }
        if !arg.starts_with("--") {
            return Err(format!("unexpected argument {arg:?} (flags only; see --help)"));
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (arg.as_str(), None),
        };
        let known = [
            "--runtime", "--app", "--listen", "--workers", "--cluster", "--out", "--flush",
            "--bcrypt-cost", "--longpoll-ms", "--tls-listen", "--tls-cert", "--tls-key",
        ];
        if !known.contains(&flag) {
            return Err(format!("unknown flag {flag} (see --help)"));
        }
        let v = match inline {
            Some(v) => v,
            None => it.next().cloned().ok_or_else(|| format!("{flag} needs a value (see --help)"))?,
        };
        match flag {
            "--runtime" => {
                runtime = match v.as_str() {
                    "tokio" => Runtime::Tokio,
                    "monoio" => Runtime::Monoio,
                    _ => return Err(format!("--runtime {v:?}: expected tokio or monoio")),
                }
            }
            "--app" => {
                app = Some(match v.as_str() {
                    "echo" => App::Echo,
                    "counter" => App::Counter,
                    "sink" => App::Sink,
                    "rest" => App::Rest,
                    "broadcast" => App::Broadcast,
                    _ => return Err(format!("--app {v:?}: expected echo, counter, sink, rest or broadcast")),
                })
            }
            "--listen" => listen = Some(v),
            "--tls-listen" => tls_listen.push(v),
            "--tls-cert" => tls_cert = Some(v),
            "--tls-key" => tls_key = Some(v),
            "--workers" | "--cluster" => {
                workers = number(flag, &v, "a positive number of threads")?;
                if workers == 0 || workers > 1024 {
                    return Err(format!("{flag} {v}: expected 1..1024"));
                }
            }
            "--out" => out = v,
            "--flush" => {
                buffered = match v.as_str() {
                    "each" => false,
                    "buffered" => true,
                    _ => return Err(format!("--flush {v:?}: expected each or buffered")),
                }
            }
            "--bcrypt-cost" => {
                bcrypt_cost = number(flag, &v, "4..31")?;
                if !(4..=31).contains(&bcrypt_cost) {
                    return Err(format!("--bcrypt-cost {v}: expected 4..31"));
                }
            }
            "--longpoll-ms" => {
                longpoll_ms = number(flag, &v, "a non-negative number of milliseconds")?;
            }
            _ => unreachable!("every known flag is matched"),
        }
    }
    let app = app.ok_or("--app is required: echo, counter, sink, rest or broadcast")?;
    if tls_listen.is_empty() && (tls_cert.is_some() || tls_key.is_some()) {
        return Err("--tls-cert and --tls-key apply to TLS listeners: add --tls-listen HOST:PORT".into());
    }
    if !tls_listen.is_empty() && (tls_cert.is_none() || tls_key.is_none()) {
        return Err("--tls-listen needs --tls-cert FILE and --tls-key FILE".into());
    }
    if listen.is_none() && tls_listen.is_empty() {
        return Err("--listen is required, as HOST:PORT (e.g. 127.0.0.1:0 or [::1]:0), unless --tls-listen is given".into());
    }
    if let Some(l) = &listen {
        check_listen("--listen", l)?;
    }
    for l in &tls_listen {
        check_listen("--tls-listen", l)?;
    }
    if runtime == Runtime::Monoio && !tls_listen.is_empty() {
        return Err("--tls-listen runs on --runtime tokio; monoio serves plain TCP only (docs/peers.md says why)".into());
    }
    if runtime == Runtime::Monoio && matches!(app, App::Rest | App::Broadcast) {
        let name = if app == App::Rest { "rest" } else { "broadcast" };
        return Err(format!(
            "--runtime monoio serves echo, counter and sink; --app {name} runs on --runtime tokio (docs/peers.md says why)"
        ));
    }
    Ok(Some(Opts {
        runtime, app, listen, tls_listen, tls_cert, tls_key, workers, out, buffered, bcrypt_cost,
        longpoll_ms,
    }))
}

/// HOST:PORT with a port 0..65535; IPv6 in brackets.
fn check_listen(flag: &str, listen: &str) -> Result<(), String> {
    let bad = || format!("{flag} {listen:?}: expected HOST:PORT (IPv6 as [::1]:PORT)");
    let (host, port) = listen.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || (host.contains(':') && !(host.starts_with('[') && host.ends_with(']'))) {
        return Err(bad());
    }
    port.parse::<u16>()
        .map_err(|_| format!("{flag} {listen:?}: port must be a number 0..65535"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Option<Opts>, String> {
        parse(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn defaults_and_both_flag_forms() {
        let o = p(&["--app", "rest", "--listen=127.0.0.1:0", "--bcrypt-cost=4"]).unwrap().unwrap();
        assert_eq!((o.runtime, o.app, o.bcrypt_cost, o.longpoll_ms), (Runtime::Tokio, App::Rest, 4, 5000));
        assert_eq!(o.out, "/dev/null");
        let o = p(&["--runtime", "monoio", "--app", "sink", "--listen", "[::1]:7", "--cluster", "3",
                    "--flush", "buffered"]).unwrap().unwrap();
        assert_eq!((o.runtime, o.workers, o.buffered), (Runtime::Monoio, 3, true));
        let o = p(&["--app", "echo", "--tls-listen", "h:1", "--tls-listen=[::1]:0", "--tls-cert", "c",
                    "--tls-key", "k"]).unwrap().unwrap();
        assert_eq!((o.listen, o.tls_listen.len(), o.tls_cert.as_deref()), (None, 2, Some("c")));
    }

    #[test]
    fn bad_command_lines_name_the_flag() {
        for (args, needle) in [
            (&["--app", "nope", "--listen", "h:1"][..], "--app"),
            (&["--app", "echo"], "--listen is required"),
            (&["--app", "echo", "--listen", "h:99999"], "port"),
            (&["--app", "echo", "--listen", "::1:80"], "--listen"),
            (&["--app", "echo", "--listen", "h:1", "--flush", "sometimes"], "--flush"),
            (&["--app", "echo", "--listen", "h:1", "--workers", "0"], "--workers"),
            (&["--app", "echo", "--listen", "h:1", "--bcrypt-cost", "3"], "--bcrypt-cost"),
            (&["--app", "echo", "--listen", "h:1", "--longpoll-ms", "-1"], "--longpoll-ms"),
            (&["--app", "echo", "--listen", "h:1", "--no-such-flag"], "--no-such-flag"),
            (&["--app", "echo", "--listen"], "--listen needs a value"),
            (&["--runtime", "monoio", "--app", "rest", "--listen", "h:1"], "monoio"),
            (&["stray"], "stray"),
            (&["--app", "echo", "--tls-listen", "h:1"], "--tls-listen needs"),
            (&["--app", "echo", "--tls-listen", "h:1", "--tls-cert", "c"], "--tls-listen needs"),
            (&["--app", "echo", "--listen", "h:1", "--tls-cert", "c", "--tls-key", "k"], "add --tls-listen"),
            (&["--app", "echo", "--tls-listen", "h:99999", "--tls-cert", "c", "--tls-key", "k"], "--tls-listen"),
            (&["--runtime", "monoio", "--app", "echo", "--tls-listen", "h:1", "--tls-cert", "c",
               "--tls-key", "k"], "tokio"),
        ] {
            let e = p(args).unwrap_err();
            assert!(e.contains(needle), "{args:?}: {e}");
        }
    }
}
