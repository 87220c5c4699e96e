"""Security of the running sandbox, tested from outside: who may connect to the scheduler and the dashboard.
(What the hosts hold, listen on and run as is checked by testinfra in ../test_hosts.py.)"""
from __future__ import annotations

import datetime
import socket
from pathlib import Path

import live
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from distributed import Client

SCHEDULER_PORT, DASHBOARD_PORT = 8786, 8787


def refused(**security: object) -> str:
    """Try to connect with the given Security settings; return the error, or fail if it connected."""
    try:
        with Client(live.scheduler_address(), security=live.security(**security), timeout=8):
            pass
    except (OSError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"
    pytest.fail(f"connected with {security}")


def test_the_client_bundle_connects() -> None:
    # The control for the refusals below: the same address and CA, with the bundle's certificate.
    with live.connect() as client:
        assert len(client.scheduler_info()["workers"]) >= 1


def test_a_client_without_a_certificate_is_refused() -> None:
    env = live.bundle()
    bundle_cert = (env["DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT"], env["DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY"])
    # The control: with the bundle's certificate the scheduler sends its comm handshake.
    assert live.tls_exchange(bundle_cert) == "answered"
    outcome = live.tls_exchange(None)
    assert "certificate required" in outcome or outcome == "closed", outcome
    live.record("security", {"case": "TLS client without a certificate", "outcome": outcome})


def test_a_plain_tcp_client_is_refused() -> None:
    address = live.scheduler_address().replace("tls://", "tcp://")
    with pytest.raises((OSError, TimeoutError)), Client(address, timeout=8):
        pass


def other_ca_certificate(folder: Path) -> tuple[str, str]:
    """A CA of someone else's and a client certificate it signed (what an attacker can make)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "other-ca")])
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "client")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .sign(ca_key, hashes.SHA256()))
    cert_path, key_path = folder / "client.crt", folder / "client.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_path.chmod(0o600)
    return str(cert_path), str(key_path)


def test_a_certificate_signed_by_another_ca_is_refused(tmp_path: Path) -> None:
    cert, key = other_ca_certificate(tmp_path)
    live.record("security", {"case": "certificate signed by another CA",
                             "outcome": refused(tls_client_cert=cert, tls_client_key=key)[:160]})


def connects(host: str | None, address: str, port: int) -> bool:
    """Whether a TCP connection opens, from this machine (host None) or from inside a sandbox host."""
    if host is None:
        try:
            socket.create_connection((address, port), timeout=5).close()
            return True
        except OSError:
            return False
    probe = f"import socket; socket.create_connection(({address!r}, {port}), timeout=5).close()"
    return live.on_host(host, "python3", "-c", probe, check=False).returncode == 0


def test_the_dashboard_is_not_reachable_from_another_host() -> None:
    scheduler_ip = live.address(live.SCHEDULER)
    assert connects(live.SCHEDULER, "127.0.0.1", DASHBOARD_PORT)  # the control: it does listen, on loopback
    assert not connects(None, scheduler_ip, DASHBOARD_PORT)
    assert not connects("dask-w1", scheduler_ip, DASHBOARD_PORT)
    assert connects("dask-w1", scheduler_ip, SCHEDULER_PORT)  # the host can reach the scheduler port itself
