"""The local cluster's keys: one CA for everything on loopback, the API server's serving certificate, the admin's
client certificate (group ``system:masters``), the webhooks' serving certificate, and the service-account signing
key. Made once per cluster folder by ``cryptography``; never leave the machine."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
DAYS = 365
"""Longer than cert-controller's 90-day lookahead, past which Kueue's rotator would replace the pair
(``parts.kueue_certificates``); the keys are deleted with the cluster."""
KUEUE_NAMES = ("kueue-ca", "kueue-webhook-service.kueue-system.svc")
"""The names Kueue's rotator verifies the CA and the serving certificate against (``pkg/util/cert/cert.go``)."""


@dataclass(frozen=True)
class Pki:
    folder: Path

    def path(self, name: str) -> Path:
        return self.folder / name

    @property
    def ca(self) -> Path:
        return self.path("ca.crt")

    @property
    def webhook_dir(self) -> Path:
        return self.path("webhooks")


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(key: rsa.RSAPrivateKey, path: Path) -> None:
    """PKCS #1, the one form Kueue's rotator parses (cert-controller: ``x509.ParsePKCS1PrivateKey``)."""
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
    path.chmod(0o600)


def _name(common: str, org: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common)]
    if org:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(parts)


def _certificate(
    subject: x509.Name, key: rsa.RSAPrivateKey, issuer: x509.Name, days: int = DAYS
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
    )


def make(folder: Path) -> Pki:
    """The keys, made unless the folder holds them."""
    pki = Pki(folder)
    if pki.ca.is_file():
        return pki
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_name = _name("tpu-rl local cluster CA")
    ca = (
        _certificate(ca_name, ca_key, ca_name, CA_DAYS)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(KUEUE_NAMES[0])]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(ca_key, pki.path("ca.key"))
    loopback = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
    for name, subject, usage, names in (
        (
            "apiserver",
            _name("kube-apiserver"),
            ExtendedKeyUsageOID.SERVER_AUTH,
            [*loopback, x509.DNSName("kubernetes")],
        ),
        ("webhooks", _name("webhooks"), ExtendedKeyUsageOID.SERVER_AUTH, [*loopback, x509.DNSName(KUEUE_NAMES[1])]),
        ("admin", _name("admin", "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH, []),
    ):
        key = _key()
        builder = _certificate(subject, key, ca_name).add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        # The webhooks' pair under the names controller-runtime's webhook server reads from its certDir.
        crt, key_file = (
            (pki.webhook_dir / "tls.crt", pki.webhook_dir / "tls.key")
            if name == "webhooks"
            else (
                pki.path(f"{name}.crt"),
                pki.path(f"{name}.key"),
            )
        )
        crt.parent.mkdir(exist_ok=True)
        crt.write_bytes(builder.sign(ca_key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM))
        _write_key(key, key_file)
    service_accounts = _key()
    _write_key(service_accounts, pki.path("sa.key"))
    pki.path("sa.pub").write_bytes(
        service_accounts.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    # Written last: its presence says the folder is whole.
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return pki
