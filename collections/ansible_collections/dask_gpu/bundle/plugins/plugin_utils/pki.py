"""Reading a certificate the controller holds (the checks run on the controller, before any host changes)."""
from __future__ import annotations


def common_name(pem: str) -> str:
    """The subject's common name of a PEM certificate; "" when there is none or the text is not a certificate."""
    if "BEGIN CERTIFICATE" not in (pem or ""):
        return ""
    try:
        from cryptography import x509
        from cryptography.x509.oid import NameOID

        cert = x509.load_pem_x509_certificate(pem.encode())
    except (ImportError, ValueError):
        return ""
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""
