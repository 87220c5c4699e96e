"""The module dask_gpu.bundle.cluster_pki, run in-process as Ansible runs it (its real argument handling): a CA
and certificates made once and kept, renewed when asked or due, reissued when a host's address or the CA changes;
keys stay and are 0600."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args
from ansible_collections.dask_gpu.bundle.plugins.modules import cluster_pki
from cryptography import x509
from cryptography.x509.oid import NameOID


def run_pki(capsys: pytest.CaptureFixture[str], folder: Path, hosts: dict[str, str],
            **extra: object) -> dict[str, object]:
    args = {"folder": str(folder), "ca_name": "t Dask CA", "ca_valid_days": 3650, "cert_valid_days": 825,
            "renew_days": 30, "hosts": hosts, **extra}
    with patch_module_args(args), pytest.raises(SystemExit) as exited:
        cluster_pki.main()
    result = dict(json.loads(capsys.readouterr().out))
    assert exited.value.code == 0, result
    return result


def cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_made_once_kept_then_renewed_and_reissued(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def pki(folder: Path, hosts: dict[str, str], **extra: object) -> dict[str, object]:
        return run_pki(capsys, folder, hosts, **extra)

    hosts = {"gpu-01": "10.0.0.11", "gpu-02": "10.0.0.12"}
    first = pki(tmp_path, hosts)
    assert first["changed"] and sorted(first["issued"]) == ["ca", "client", "gpu-01", "gpu-02"], first
    tls = tmp_path / "tls"
    ca = cert(tls / "ca.crt")
    host = cert(tls / "gpu-01.crt")
    assert host.issuer == ca.subject
    assert host.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "gpu-01"
    san = host.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sorted(map(str, san)) == sorted(["<DNSName(value='gpu-01')>", "<IPAddress(value=10.0.0.11)>"])
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    for key in (tls / "ca.key", tls / "gpu-01.key", tmp_path / "client" / "client.key"):
        assert oct(key.stat().st_mode & 0o777) == "0o600", key
    assert (tmp_path / "client" / "ca.crt").read_bytes() == (tls / "ca.crt").read_bytes()

    again = pki(tmp_path, hosts)
    assert not again["changed"], again
    (tmp_path / "client").chmod(0o755)
    closed = pki(tmp_path, hosts)
    assert closed["made"] == [str(tmp_path / "client")] and not closed["issued"], closed
    assert oct((tmp_path / "client").stat().st_mode & 0o777) == "0o700"

    keys = {name: (tls / f"{name}.key").read_bytes() for name in hosts}
    renewed = pki(tmp_path, hosts, renew=True)
    assert sorted(renewed["issued"]) == ["client", "gpu-01", "gpu-02"], renewed
    assert cert(tls / "gpu-01.crt").serial_number != host.serial_number
    assert {name: (tls / f"{name}.key").read_bytes() for name in hosts} == keys
    assert cert(tls / "ca.crt").serial_number == ca.serial_number

    # Within the renewal window: every certificate (825 days) is due when the window is longer.
    due = pki(tmp_path, hosts, renew_days=900)
    assert sorted(due["issued"]) == ["client", "gpu-01", "gpu-02"], due

    moved = pki(tmp_path, {**hosts, "gpu-02": "10.0.0.22"})
    assert moved["issued"] == ["gpu-02"], moved

    # A new CA (its key lost): every certificate is issued again by it.
    (tls / "ca.key").unlink()
    new_ca = pki(tmp_path, hosts)
    assert sorted(new_ca["issued"]) == ["ca", "client", "gpu-01", "gpu-02"], new_ca
    assert cert(tls / "gpu-01.crt").issuer == cert(tls / "ca.crt").subject
