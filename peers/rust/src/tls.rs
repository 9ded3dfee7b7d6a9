//! --tls-listen on tokio, through the system's OpenSSL 3 (the library
//! yard-serve's TLS layer uses): TLS 1.2 and 1.3, the openssl crate's
//! "intermediate" server settings (its ciphers and groups, session tickets
//! on), no renegotiation. A handshake runs in the connection's own task,
//! bounded as yard-serve's default --tls-handshake-timeout, before the app
//! sees the connection. SIGHUP loads the two files again (`Certs::reload`).

use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use openssl::pkey::PKey;
use openssl::ssl::{Ssl, SslAcceptor, SslMethod, SslOptions, SslVersion};
use openssl::x509::X509;
use tokio::net::TcpStream;
use tokio_openssl::SslStream;

/// yard-serve's default --tls-handshake-timeout: a client that never
/// finishes its handshake is closed.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificate and key in use. Each handshake takes the acceptor current
/// when its connection was accepted, so a reload reaches new connections and
/// leaves the ones already made as they are.
pub struct Certs {
    cert_file: String,
    key_file: String,
    acceptor: RwLock<Arc<SslAcceptor>>,
}

impl Certs {
    /// Loads and checks the pair: an error names the file at fault.
    pub fn load(cert_file: &str, key_file: &str) -> Result<Arc<Certs>, String> {
        let acceptor = acceptor(cert_file, key_file)?;
        Ok(Arc::new(Certs {
            cert_file: cert_file.to_string(),
            key_file: key_file.to_string(),
            acceptor: RwLock::new(Arc::new(acceptor)),
        }))
    }

    pub fn current(&self) -> Arc<SslAcceptor> {
        self.acceptor.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// SIGHUP: the two files again. A pair that does not load keeps the one
    /// in use, and stderr says why.
    pub fn reload(&self) {
        match acceptor(&self.cert_file, &self.key_file) {
            Ok(a) => {
                *self.acceptor.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(a);
                eprintln!("yard-peer-rust: SIGHUP: reloaded the TLS certificate and key");
            }
            Err(e) => eprintln!("yard-peer-rust: SIGHUP: keeping the certificate in use: {e}"),
        }
    }
}

fn read(flag: &str, file: &str) -> Result<Vec<u8>, String> {
    std::fs::read(file).map_err(|e| {
        let why = match e.kind() {
            std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
            std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
            _ => e.to_string(),
        };
        format!("{flag} {file}: {why}")
    })
}

fn acceptor(cert_file: &str, key_file: &str) -> Result<SslAcceptor, String> {
    let cert_pem = read("--tls-cert", cert_file)?;
    let key_pem = read("--tls-key", key_file)?;
    let chain = X509::stack_from_pem(&cert_pem)
        .ok()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| format!("--tls-cert {cert_file}: not a PEM certificate"))?;
    let key = PKey::private_key_from_pem(&key_pem)
        .map_err(|e| format!("--tls-key {key_file}: not a PEM private key ({e})"))?;
    let setup = |e: openssl::error::ErrorStack| format!("TLS: {e}");
    let mut b = SslAcceptor::mozilla_intermediate_v5(SslMethod::tls_server()).map_err(setup)?;
    b.set_min_proto_version(Some(SslVersion::TLS1_2)).map_err(setup)?;
    b.set_options(SslOptions::NO_RENEGOTIATION | SslOptions::NO_COMPRESSION);
    let mismatch = |e: openssl::error::ErrorStack| {
        format!("--tls-key {key_file} is not the key of --tls-cert {cert_file}: {e}")
    };
    b.set_certificate(&chain[0]).map_err(setup)?;
    for c in &chain[1..] {
        b.add_extra_chain_cert(c.clone()).map_err(setup)?;
    }
    b.set_private_key(&key).map_err(mismatch)?;
    b.check_private_key().map_err(mismatch)?;
    Ok(b.build())
}

/// The server's side of the handshake on a new connection: the stream once
/// it is done, None when it failed or outlasted HANDSHAKE_TIMEOUT (the
/// connection is then dropped, so closed).
pub async fn accept(acceptor: Arc<SslAcceptor>, tcp: TcpStream) -> Option<SslStream<TcpStream>> {
    let ssl = Ssl::new(acceptor.context()).ok()?;
    let mut s = SslStream::new(ssl, tcp).ok()?;
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, Pin::new(&mut s).accept()).await {
        Ok(Ok(())) => Some(s),
        _ => None,
    }
}
