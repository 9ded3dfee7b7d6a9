"""Certificates for the TLS experiments ({pki} in an experiment's argv): a CA
and two server certificates it signed, for localhost and 127.0.0.1, one
ECDSA P-256 and one RSA-2048, made once per run by the openssl command in a
private temporary directory that goes away at exit. Never committed, never
reused across runs."""

from __future__ import annotations

import atexit
import shutil
import subprocess
import tempfile
from pathlib import Path

_dir: Path | None = None
KINDS = {"ecdsa": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
         "rsa": ["-newkey", "rsa:2048"]}


def _openssl(where: Path, *args: str) -> None:
    p = subprocess.run(["openssl", *args], cwd=where, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])}: {p.stderr.strip()}")


def pki_dir() -> Path:
    """The directory: ca.pem, and ecdsa.pem/ecdsa.key and rsa.pem/rsa.key
    (each certificate followed by the CA's, a chain)."""
    global _dir
    if _dir is not None:
        return _dir
    d = Path(tempfile.mkdtemp(prefix="yard-pki-"))
    atexit.register(shutil.rmtree, d, True)
    _openssl(d, "req", "-x509", *KINDS["ecdsa"], "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=Switchyard run CA")
    (d / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n")
    for kind, keyopt in KINDS.items():
        _openssl(d, "req", *keyopt, "-nodes", "-keyout", f"{kind}.key", "-out", f"{kind}.csr",
                 "-subj", "/CN=localhost")
        _openssl(d, "x509", "-req", "-in", f"{kind}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", f"{kind}.crt")
        (d / f"{kind}.pem").write_bytes((d / f"{kind}.crt").read_bytes() +
                                        (d / "ca.pem").read_bytes())
    _dir = d
    return d
