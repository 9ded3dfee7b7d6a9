"""yard-tls-floor: the engine's TLS layer per echoed message in memory, and
the AEAD alone; with --handshakes, the server's part of a full handshake in
memory and its public-key work alone (docs/tls.md). Its checks and its refusals; the figures
themselves belong to docs/results.md."""

import json
import subprocess

import pytest

from conftest import BIN

FLOOR = BIN / "yard-tls-floor"


def floor(pki, *args):
    return subprocess.run([str(FLOOR), "--cert", str(pki.cert), "--key", str(pki.key),
                           *map(str, args)], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("size,conns", [(16, 1), (1000, 3)])
def test_rounds_over_tls13_with_positive_costs(pki, size, conns):
    r = floor(pki, "--connections", conns, "--rounds", 200, "--size", size, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["version"], d["size"], d["connections"], d["rounds"]) == ("TLSv1.3", size, conns,
                                                                        200)
    assert d["server_layer_ns"] > 0
    assert d["aes128gcm_seal_open_ns"] > 0 and d["aes256gcm_seal_open_ns"] > 0


def test_summary_names_both_figures(pki):
    r = floor(pki, "--rounds", 50)
    assert r.returncode == 0, r.stderr
    assert "TLSv1.3, 16-byte messages, 1 connections, 50 rounds:" in r.stdout
    assert "the server's TLS layer per echoed message" in r.stdout
    assert "the AEAD alone" in r.stdout


def test_handshakes_time_the_server_above_its_public_key_work(pki):
    r = floor(pki, "--handshakes", 20, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["handshakes"] == 20
    assert d["sign_ns"] > 0 and d["x25519_keygen_derive_ns"] > 0
    # The handshake does the signature and the key exchange, and more besides.
    assert d["server_handshake_ns"] > d["sign_ns"] + d["x25519_keygen_derive_ns"]
    r = floor(pki, "--handshakes", 5)
    assert r.returncode == 0, r.stderr
    assert "5 full handshakes, in memory:" in r.stdout and "public-key work alone" in r.stdout


@pytest.mark.parametrize("args,said", [
    (["--handshakes", "-1"], "--handshakes >= 0"),
    (["--rounds", "0"], "--rounds >= 1"),
    (["--size", "5000"], "--size 1..4096"),
    (["--connections", "0"], "--connections 1..10000"),
    (["--bogus"], "usage:"),
])
def test_usage_errors_exit_2(pki, args, said):
    r = floor(pki, *args)
    assert r.returncode == 2
    assert said in r.stderr


def test_a_missing_certificate_is_a_clear_error(tmp_path):
    r = subprocess.run([str(FLOOR), "--cert", str(tmp_path / "none.pem"), "--key",
                        str(tmp_path / "none.key")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "none.pem" in r.stderr
