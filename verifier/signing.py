"""Ed25519 keys and the detached signature over SHA256SUMS, checkable with stock OpenSSL."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from verifier.errors import UsageError

if TYPE_CHECKING:  # cryptography loads where a key is used, not to check a signature's size
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

PRIVATE_KEY_FILE = "evidence-signing-key.pem"
PUBLIC_KEY_FILE = "evidence-signing-key.pub.pem"
SIGNATURE_LENGTH = 64


class KeyPairPaths(NamedTuple):
    private: Path
    public: Path


def generate_key_pair(out_dir: Path) -> KeyPairPaths:
    """Write a new PKCS#8 private key (mode 0600) and its SubjectPublicKeyInfo public key."""
    private_path = out_dir / PRIVATE_KEY_FILE
    public_path = out_dir / PUBLIC_KEY_FILE
    for path in (private_path, public_path):
        if path.exists():
            raise UsageError(f"{path} already exists; refusing to overwrite a key")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    with os.fdopen(os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as fd:
        fd.write(private_pem)
    with public_path.open("xb") as handle:
        handle.write(public_pem)
    return KeyPairPaths(private_path, public_path)


def load_private_key(path: Path) -> Ed25519PrivateKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except OSError as exc:
        raise UsageError(f"cannot read the signing key {path}: {exc.strerror}") from None
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{path} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"{path} is not an Ed25519 private key")
    return key


_MAX_KEY_FILE_BYTES = 64 * 1024


def load_public_key(path: Path) -> Ed25519PublicKey:
    """The reviewer's public key; every way of getting it wrong is a UsageError that says which."""
    try:
        with path.open("rb") as handle:
            data = handle.read(_MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read the public key {path}: {exc.strerror}") from None
    if len(data) > _MAX_KEY_FILE_BYTES:
        raise UsageError(f"{path} is not a public key: it is over {_MAX_KEY_FILE_BYTES} bytes")
    if b"PRIVATE KEY-----" in data:
        raise UsageError(
            f"{path} holds a private key; give the public key ({PUBLIC_KEY_FILE}), "
            "and keep the private key to yourself"
        )
    if data.startswith(b"ssh-"):
        raise UsageError(
            f"{path} is an OpenSSH public key; give it as PEM "
            "(ssh-keygen -e -m PKCS8 -f KEY.pub > KEY.pub.pem)"
        )
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{path} is not a PEM public key: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise UsageError(f"{path} is not an Ed25519 public key")
    return key


def sign(data: bytes, key: Ed25519PrivateKey) -> bytes:
    """The raw 64-byte Ed25519 signature over the exact bytes given."""
    return key.sign(data)


def signature_is_valid(data: bytes, signature: bytes, key: Ed25519PublicKey) -> bool:
    from cryptography.exceptions import InvalidSignature

    if len(signature) != SIGNATURE_LENGTH:
        return False
    try:
        key.verify(signature, data)
    except InvalidSignature:
        return False
    return True
