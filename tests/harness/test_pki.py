"""The run's certificates ({pki}, python/yard/pki.py): valid for loopback, and for the names a
distributed run's server is reached by when asked; one directory per set of names."""

import subprocess

import harness_paths  # noqa: F401

from yard.pki import FILES, pki_dir  # noqa: E402


def san(cert) -> str:
    p = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-ext", "subjectAltName"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def verifies(d, name: str) -> bool:
    """openssl verify of the ECDSA certificate against the run's CA, for an IP address."""
    p = subprocess.run(["openssl", "verify", "-CAfile", str(d / "ca.pem"), "-verify_ip", name,
                        str(d / "ecdsa.pem")], capture_output=True, text=True, timeout=30)
    return p.returncode == 0


def test_the_server_hosts_address_is_in_the_certificates():
    local = pki_dir()
    assert pki_dir() == local  # made once per run
    assert all((local / f).is_file() for f in FILES)
    assert "IP Address:127.0.0.1" in san(local / "ecdsa.pem")
    assert "198.18.0.1" not in san(local / "ecdsa.pem")
    assert not verifies(local, "198.18.0.1")
    remote = pki_dir(("198.18.0.1", "server.example"))
    assert remote != local and pki_dir(("server.example", "198.18.0.1")) == remote
    for kind in ("ecdsa", "rsa"):
        text = san(remote / f"{kind}.pem")
        assert "IP Address:198.18.0.1" in text and "DNS:server.example" in text, text
        assert "IP Address:127.0.0.1" in text and "DNS:localhost" in text, text
    assert verifies(remote, "198.18.0.1") and verifies(remote, "127.0.0.1")
