//! The REST study's API (docs/rest.md) on hyper's HTTP/1.1 server over tokio:
//! a task per connection, keep-alive, bcrypt on tokio's blocking pool, JSON
//! with serde_json.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{Map, Value};

use crate::opts::Opts;
use crate::rt_tokio::{Conn, Serve};

/// Request bodies are a few hundred bytes; anything over 1 MiB is refused.
const MAX_BODY: usize = 1 << 20;
/// bcrypt reads only a password's first 72 bytes: longer ones are refused,
/// as yard-serve does, rather than silently truncated.
const MAX_PASSWORD: usize = 72;

type Resp = Response<Full<Bytes>>;

struct Rest {
    passwords: RwLock<HashMap<String, String>>, // user -> bcrypt hash
    users: RwLock<HashMap<String, Bytes>>,      // user -> JSON object, as sent
    cost: u32,
    long_poll: Duration,
    /// Verified against when a user has no password, so that an unknown user
    /// costs what a known one does.
    dummy_hash: String,
}

/// The app on every listener: the stores and hyper's settings, shared.
#[derive(Clone)]
pub struct RestApp {
    state: Arc<Rest>,
    http: Arc<http1::Builder>,
}

impl Serve for RestApp {
    fn serve<S: Conn>(self, s: S) -> impl std::future::Future<Output = ()> + Send + 'static {
        async move {
            let state = self.state;
            let svc = service_fn(move |req| state.clone().handle(req));
            let _ = self.http.serve_connection(TokioIo::new(s), svc).await;
        }
    }
}

pub fn app(o: &Opts) -> Result<RestApp, String> {
    let mut secret = [0u8; 16];
    getrandom::fill(&mut secret).map_err(|e| format!("getrandom: {e}"))?;
    let dummy_hash = bcrypt::hash(secret, o.bcrypt_cost).map_err(|e| format!("bcrypt: {e}"))?;
    let state = Arc::new(Rest {
        passwords: RwLock::default(),
        users: RwLock::default(),
        cost: o.bcrypt_cost,
        long_poll: Duration::from_millis(o.longpoll_ms),
        dummy_hash,
    });
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(30));
    Ok(RestApp { state, http: Arc::new(http) })
}

fn text(code: StatusCode, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = code;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    r
}

fn ok() -> Resp {
    text(StatusCode::OK, "OK")
}

/// 405 unless the request uses `method` (GET admits HEAD too).
fn allow(req: &Request<Incoming>, method: Method) -> Result<(), Resp> {
    if *req.method() == method || (method == Method::GET && *req.method() == Method::HEAD) {
        return Ok(());
    }
    let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed.");
    r.headers_mut().insert(ALLOW, HeaderValue::from_str(method.as_str()).expect("a method is a valid header"));
    Err(r)
}

/// The {user} after a route's prefix: one non-empty path segment.
fn user_of<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    path.strip_prefix(prefix).filter(|u| !u.is_empty() && !u.contains('/'))
}

async fn body_of(req: Request<Incoming>) -> Result<Bytes, Resp> {
    match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            Err(text(StatusCode::PAYLOAD_TOO_LARGE, "Body too large."))
        }
        Err(_) => Err(text(StatusCode::BAD_REQUEST, "Bad body.")),
    }
}

/// {"password": "..."}: a string of at most 72 bytes with no NUL.
fn password_of(body: &[u8]) -> Result<String, Resp> {
    let bad = |why: &'static str| Err(text(StatusCode::BAD_REQUEST, why));
    let pw = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut m)) => match m.remove("password") {
            Some(Value::String(s)) => s,
            Some(_) => return bad("Bad JSON: password is not a string."),
            None => return bad("Missing password."),
        },
        Ok(Value::Null) => return bad("Missing password."),
        _ => return bad("Bad JSON."),
    };
    if pw.len() > MAX_PASSWORD {
        return bad("Bad password: longer than 72 bytes.");
    }
    if pw.contains('\0') {
        return bad("Bad password: it contains a NUL byte.");
    }
    Ok(pw)
}

impl Rest {
    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Result<Resp, Infallible> {
        let path = req.uri().path().to_owned();
        let r = if path == "/" {
            allow(&req, Method::GET).map(|()| ok())
        } else if path == "/longPoll" {
            match allow(&req, Method::GET) {
                Ok(()) => {
                    tokio::time::sleep(self.long_poll).await;
                    Ok(ok())
                }
                Err(r) => Err(r),
            }
        } else if let Some(user) = user_of(&path, "/password/set/") {
            self.password_set(user, req).await
        } else if let Some(user) = user_of(&path, "/password/verify/") {
            self.password_verify(user, req).await
        } else if let Some(user) = user_of(&path, "/user/set/") {
            self.user_set(user, req).await
        } else if let Some(user) = user_of(&path, "/user/get/") {
            self.user_get(user, &req)
        } else {
            Ok(text(StatusCode::NOT_FOUND, "Not found."))
        };
        Ok(r.unwrap_or_else(|e| e))
    }

    async fn password_set(&self, user: &str, req: Request<Incoming>) -> Result<Resp, Resp> {
        allow(&req, Method::POST)?;
        let pw = password_of(&body_of(req).await?)?;
        let cost = self.cost;
        let hash = tokio::task::spawn_blocking(move || bcrypt::hash(pw, cost))
            .await
            .map_err(|e| text(StatusCode::INTERNAL_SERVER_ERROR, format!("bcrypt: {e}")))?
            .map_err(|e| text(StatusCode::INTERNAL_SERVER_ERROR, format!("bcrypt: {e}")))?;
        self.passwords.write().unwrap_or_else(|e| e.into_inner()).insert(user.to_owned(), hash);
        Ok(ok())
    }

    async fn password_verify(&self, user: &str, req: Request<Incoming>) -> Result<Resp, Resp> {
        allow(&req, Method::POST)?;
        let pw = password_of(&body_of(req).await?)?;
        let stored = self.passwords.read().unwrap_or_else(|e| e.into_inner()).get(user).cloned();
        let found = stored.is_some();
        let hash = stored.unwrap_or_else(|| self.dummy_hash.clone());
        let matched = tokio::task::spawn_blocking(move || bcrypt::verify(pw, &hash))
            .await
            .map_err(|e| text(StatusCode::INTERNAL_SERVER_ERROR, format!("bcrypt: {e}")))?
            .map_err(|e| text(StatusCode::INTERNAL_SERVER_ERROR, format!("bcrypt: {e}")))?;
        Ok(match (found, matched) {
            (false, _) => text(StatusCode::BAD_REQUEST, "Password not found"),
            (true, true) => ok(),
            (true, false) => text(StatusCode::FORBIDDEN, "Forbidden"),
        })
    }

    /// Stores the object as sent (whitespace around it trimmed), once serde
    /// has checked that it is one JSON object.
    async fn user_set(&self, user: &str, req: Request<Incoming>) -> Result<Resp, Resp> {
        allow(&req, Method::POST)?;
        let body = body_of(req).await?;
        if serde_json::from_slice::<Map<String, Value>>(&body).is_err() {
            return Err(text(StatusCode::BAD_REQUEST, "Bad JSON: expected an object."));
        }
        let start = body.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(0);
        let end = body.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |e| e + 1);
        self.users.write().unwrap_or_else(|e| e.into_inner()).insert(user.to_owned(), body.slice(start..end));
        Ok(ok())
    }

    fn user_get(&self, user: &str, req: &Request<Incoming>) -> Result<Resp, Resp> {
        allow(req, Method::GET)?;
        let found = self.users.read().unwrap_or_else(|e| e.into_inner()).get(user).cloned();
        let json = found.ok_or_else(|| text(StatusCode::BAD_REQUEST, "User not found."))?;
        let mut r = Response::new(Full::new(json));
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(r)
    }
}

/// `yard-peer-rust bcrypt hash PASSWORD [COST]` prints a `$2b$` hash;
/// `bcrypt verify PASSWORD HASH` exits 0 if it matches, 1 if not. The tests
/// check these hashes against libcrypt's, the engine's bcrypt, both ways.
pub fn bcrypt_command(args: &[String]) -> i32 {
    const USAGE: &str = "usage: yard-peer-rust bcrypt hash PASSWORD [COST]\n       yard-peer-rust bcrypt verify PASSWORD HASH";
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args[..] {
        ["hash", pw] | ["hash", pw, _] => {
            let cost = match args.get(2).map(|c| c.parse::<u32>()) {
                None => 10,
                Some(Ok(c)) if (4..=31).contains(&c) => c,
                Some(_) => {
                    eprintln!("yard-peer-rust: bcrypt hash: COST {:?}: expected 4..31", args[2]);
                    return 2;
                }
            };
            match bcrypt::hash(pw, cost) {
                Ok(h) => {
                    println!("{h}");
                    0
                }
                Err(e) => {
                    eprintln!("yard-peer-rust: bcrypt: {e}");
                    1
                }
            }
        }
        ["verify", pw, hash] => match bcrypt::verify(pw, hash) {
            Ok(true) => 0,
            Ok(false) => 1,
            Err(e) => {
                eprintln!("yard-peer-rust: bcrypt verify: {e}");
                1
            }
        },
        ["--help"] => {
            println!("{USAGE}");
            0
        }
        _ => {
            eprintln!("{USAGE}");
            2
        }
    }
}
