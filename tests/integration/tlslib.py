"""TLS for the tests: certificates made by the openssl command in the test's own
directory (never a committed private key), and clients that verify them."""

import hashlib
import socket
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Pki:
    ca: Path    # the test CA's certificate: what a client trusts
    cert: Path  # the server's certificate, then the CA's (a chain)
    key: Path   # the server's key


def openssl(*args: str, cwd: Path) -> None:
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"openssl {' '.join(args)}: {p.stderr}"


def make_pki(where: Path, name: str = "server", kind: str = "ec") -> Pki:
    """A CA and a server certificate it signed, for localhost and 127.0.0.1.
    kind: 'ec' (P-256) or 'rsa' (2048 bits)."""
    where.mkdir(parents=True, exist_ok=True)
    keyopt = (["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"] if kind == "ec"
              else ["-newkey", "rsa:2048"])
    if not (where / "ca.pem").exists():
        openssl("req", "-x509", *keyopt, "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
                "-days", "2", "-subj", "/CN=Switchyard test CA", cwd=where)
    openssl("req", *keyopt, "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", "/CN=localhost", cwd=where)
    (where / f"{name}.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt",
            cwd=where)
    chain = where / f"{name}.pem"
    chain.write_bytes((where / f"{name}.crt").read_bytes() + (where / "ca.pem").read_bytes())
    return Pki(ca=where / "ca.pem", cert=chain, key=where / f"{name}.key")


def client_context(pki: Pki, **kw) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    for k, v in kw.items():
        setattr(ctx, k, v)
    return ctx


def tls_connect(addr, pki: Pki, timeout: float = 10.0, ctx: ssl.SSLContext | None = None,
                session: ssl.SSLSession | None = None) -> ssl.SSLSocket:
    """A verified TLS connection to addr (host name checked as localhost)."""
    raw = socket.create_connection(addr, timeout=timeout)
    try:
        return (ctx or client_context(pki)).wrap_socket(raw, server_hostname="localhost",
                                                        session=session)
    except BaseException:
        raw.close()
        raise


def fingerprint(sock: ssl.SSLSocket) -> str:
    """SHA-256 of the certificate the server presented."""
    return hashlib.sha256(sock.getpeercert(binary_form=True)).hexdigest()


def tls_args(pki: Pki, listen: str = "127.0.0.1:0") -> list[str]:
    return ["--tls-listen", listen, "--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]


def make_client_cert(where: Path, name: str) -> tuple[Path, Path, str]:
    """A self-signed client certificate (what IRC users make for SASL
    EXTERNAL): its file, its key, and its SHA-256 as openssl prints it
    (upper-case pairs between colons)."""
    where.mkdir(parents=True, exist_ok=True)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN={name}",
            cwd=where)
    p = subprocess.run(["openssl", "x509", "-in", f"{name}.crt", "-noout", "-fingerprint",
                        "-sha256"], cwd=where, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return where / f"{name}.crt", where / f"{name}.key", p.stdout.strip().split("=", 1)[1]
