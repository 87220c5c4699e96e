#!/usr/bin/python
"""The cluster's CA and every host's and the client's certificate on the controller, in one task."""
from __future__ import annotations

DOCUMENTATION = r"""
---
module: cluster_pki
short_description: A cluster CA and the certificates it signs, made or renewed on the controller in one task
description:
  - Runs on the controller (delegate_to localhost, run_once). Keeps or makes the CA (an ECC P-384 key, 0600, and a
    self-signed certificate - CA:TRUE, keyCertSign and cRLSign, both critical), then for each host and the client
    (C(folder)/client/client.key and .crt, the CA certificate beside them) a key (ECC P-384, 0600, kept once made)
    and a certificate signed by the CA - common name and DNS name the host's name (client), its IP address when
    given, serverAuth and clientAuth.
  - A certificate is kept while it has the wanted names, the entry's key, was signed by this CA and stays valid
    beyond C(renew_days); otherwise, or with C(renew), a new one is issued (same key, new serial).
  - Needs the Python library cryptography on the controller (as community.crypto does).
options:
  folder:
    description: The cluster's controller folder; the CA goes to C(folder)/tls.
    type: path
    required: true
  ca_name:
    description: The CA's common name.
    type: str
    required: true
  ca_valid_days:
    description: Validity of a new CA.
    type: int
    required: true
  cert_valid_days:
    description: Validity of a new certificate.
    type: int
    required: true
  renew_days:
    description: A certificate that expires within this many days is renewed.
    type: int
    required: true
  renew:
    description: Renew every certificate now.
    type: bool
    default: false
  hosts:
    description: Host names and the IP address each certificate names besides the host name (empty for none);
      each host's key and certificate go to C(folder)/tls/NAME.key and .crt.
    type: dict
    required: true
author: dask-gpu bundle
"""

EXAMPLES = r"""
- name: Controller holds the CA and a certificate for each host and the client
  dask_gpu.bundle.cluster_pki:
    folder: /srv/dask/artifacts/dask
    ca_name: dask Dask CA
    ca_valid_days: 3650
    cert_valid_days: 825
    renew_days: 30
    hosts: {gpu-01: 10.0.0.11, gpu-02: 10.0.0.12}
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
issued:
  description: The certificates issued in this run (by name; the CA as C(ca)).
  type: list
  elements: str
  returned: always
"""

import datetime
import ipaddress
import os
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dask_gpu.bundle.plugins.module_utils.atomic import write_atomic

try:
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    HAS_CRYPTOGRAPHY = True
except ImportError:  # pragma: no cover - reported by the module
    HAS_CRYPTOGRAPHY = False


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def write(path: str, data: bytes, mode: int) -> None:
    write_atomic(path, data, mode)


def key_at(path: str, made: list[str]) -> Any:
    """The key at path, made (ECC P-384, 0600) when there is none."""
    if os.path.exists(path):
        with open(path, "rb") as handle:
            key = serialization.load_pem_private_key(handle.read(), password=None)
        if (os.stat(path).st_mode & 0o777) != 0o600:
            os.chmod(path, 0o600)
        return key
    key = ec.generate_private_key(ec.SECP384R1())
    write(path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()), 0o600)
    made.append(path)
    return key


def cert_at(path: str) -> Any:
    if not os.path.exists(path):
        return None
    with open(path, "rb") as handle:
        return x509.load_pem_x509_certificate(handle.read())


def public(key: Any) -> bytes:
    return bytes(key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))


def names(name: str, ip: str) -> list[Any]:
    wanted: list[Any] = [x509.DNSName(name)]
    if ip:
        wanted.append(x509.IPAddress(ipaddress.ip_address(ip)))
    return wanted


def fits(cert: Any, key: Any, ca: Any, name: str, ip: str, renew_days: int) -> bool:
    """Whether a certificate can stay: this key, these names, signed by this CA, valid beyond the window."""
    try:
        ca.public_key().verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (InvalidSignature, x509.ExtensionNotFound, TypeError):  # another CA, no SAN, a non-EC signature: reissue
        return False
    common = [attr.value for attr in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)]
    return (public(cert.public_key()) == public(key.public_key()) and cert.issuer == ca.subject and common == [name]
            and set(map(str, san)) == set(map(str, names(name, ip)))
            and cert.not_valid_after_utc > now() + datetime.timedelta(days=renew_days))


def ca_certificate(key: Any, name: str, days: int) -> Any:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now())
            .not_valid_after(now() + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))


def host_certificate(key: Any, ca_key: Any, ca: Any, name: str, ip: str, days: int) -> Any:
    return (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now()).not_valid_after(now() + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName(names(name, ip)), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=True, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "folder": {"type": "path", "required": True},
            "ca_name": {"type": "str", "required": True},
            "ca_valid_days": {"type": "int", "required": True},
            "cert_valid_days": {"type": "int", "required": True},
            "renew_days": {"type": "int", "required": True},
            "renew": {"type": "bool", "default": False},
            "hosts": {"type": "dict", "required": True},
        },
    )
    if not HAS_CRYPTOGRAPHY:
        module.fail_json(msg="the controller's Python lacks the library cryptography (pip install cryptography)")
    params = module.params
    made: list[str] = []
    issued: list[str] = []
    tls = os.path.join(params["folder"], "tls")
    client = os.path.join(params["folder"], "client")
    for folder in (tls, client):
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if os.stat(folder).st_mode & 0o777 != 0o700:
            os.chmod(folder, 0o700)
            made.append(folder)
    certs = [(str(name), str(ip or ""), os.path.join(tls, str(name))) for name, ip in params["hosts"].items()]
    certs.append(("client", "", os.path.join(client, "client")))
    ca_key = key_at(os.path.join(tls, "ca.key"), made)
    ca_path = os.path.join(tls, "ca.crt")
    ca = cert_at(ca_path)
    if ca is None or public(ca.public_key()) != public(ca_key.public_key()):
        ca = ca_certificate(ca_key, params["ca_name"], params["ca_valid_days"])
        write(ca_path, ca.public_bytes(serialization.Encoding.PEM), 0o644)
        issued.append("ca")
    for name, ip, base in certs:
        key = key_at(base + ".key", made)
        cert = cert_at(base + ".crt")
        if params["renew"] or cert is None or not fits(cert, key, ca, name, ip, params["renew_days"]):
            cert = host_certificate(key, ca_key, ca, name, ip, params["cert_valid_days"])
            write(base + ".crt", cert.public_bytes(serialization.Encoding.PEM), 0o644)
            issued.append(name)
    ca_bytes = ca.public_bytes(serialization.Encoding.PEM)
    copy = os.path.join(client, "ca.crt")
    if cert_at(copy) is None or cert_at(copy).public_bytes(serialization.Encoding.PEM) != ca_bytes:
        write(copy, ca_bytes, 0o644)
        made.append(copy)
    module.exit_json(changed=bool(made or issued), issued=issued, made=made)


if __name__ == "__main__":
    main()
