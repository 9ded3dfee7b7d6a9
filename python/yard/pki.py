"""Certificates for the TLS experiments ({pki} in an experiment's argv): a CA
and two server certificates it signed, for localhost and 127.0.0.1 (and the
names a distributed run's server is reached by), one ECDSA P-256 and one
RSA-2048, made once per run by the openssl command in a private temporary
directory that goes away at exit. Never committed, never reused across runs.
A distributed run copies the directory to every host (distributed.py)."""

from __future__ import annotations

import atexit
import ipaddress
import shutil
import subprocess
import tempfile
from pathlib import Path

_dirs: dict[tuple[str, ...], Path] = {}
FILES = ["ca.pem", "ecdsa.pem", "ecdsa.key", "rsa.pem", "rsa.key"]  # what {pki} offers
KINDS = {"ecdsa": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"],
         "rsa": ["-newkey", "rsa:2048"]}


def _openssl(where: Path, *args: str) -> None:
    p = subprocess.run(["openssl", *args], cwd=where, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args[:2])}: {p.stderr.strip()}")


def _san(names: tuple[str, ...]) -> str:
    """subjectAltName: localhost and the loopback addresses, then each name
    (an IP address, or a DNS name)."""
    out = ["DNS:localhost", "IP:127.0.0.1", "IP:::1"]
    for n in names:
        try:
            ipaddress.ip_address(n)
            entry = f"IP:{n}"
        except ValueError:
            entry = f"DNS:{n}"
        if entry not in out:
            out.append(entry)
    return ",".join(out)


def pki_dir(names: tuple[str, ...] = ()) -> Path:
    """The directory: ca.pem, and ecdsa.pem/ecdsa.key and rsa.pem/rsa.key
    (each certificate followed by the CA's, a chain), the certificates valid
    for names too (a distributed run's server address)."""
    names = tuple(sorted(set(names)))
    if names in _dirs:
        return _dirs[names]
    d = Path(tempfile.mkdtemp(prefix="yard-pki-"))
    atexit.register(shutil.rmtree, d, True)
    _openssl(d, "req", "-x509", *KINDS["ecdsa"], "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=Switchyard run CA")
    (d / "san.ext").write_text(f"subjectAltName={_san(names)}\n")
    for kind, keyopt in KINDS.items():
        _openssl(d, "req", *keyopt, "-nodes", "-keyout", f"{kind}.key", "-out", f"{kind}.csr",
                 "-subj", "/CN=localhost")
        _openssl(d, "x509", "-req", "-in", f"{kind}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                 "-CAcreateserial", "-days", "2", "-extfile", "san.ext", "-out", f"{kind}.crt")
        (d / f"{kind}.pem").write_bytes((d / f"{kind}.crt").read_bytes() +
                                        (d / "ca.pem").read_bytes())
    _dirs[names] = d
    return d
