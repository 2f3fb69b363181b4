"""Ed25519 keys and the detached signature over SHA256SUMS, checkable with stock OpenSSL."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from verifier.errors import UsageError
from verifier.inputs import read_small_file

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
        if os.path.lexists(path):  # (a link too, even one that leads nowhere)
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
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"{out_dir} is not a folder: give the folder to write the keys in")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the folder {out_dir}: {exc.strerror or exc}") from None
    written: list[Path] = []
    path = private_path
    try:  # both keys or neither: a private key without its public one is no pair
        for path, data, mode in (
            (private_path, private_pem, 0o600),
            (public_path, public_pem, 0o644),
        ):
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            written.append(path)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
    except OSError as exc:
        for done in written:
            with contextlib.suppress(OSError):
                done.unlink()
        raise UsageError(
            f"cannot write {path}: {exc.strerror or exc}; no key was written"
        ) from None
    return KeyPairPaths(private_path, public_path)


def load_private_key(path: Path) -> Ed25519PrivateKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    data = read_small_file(path, "the signing key", MAX_KEY_FILE_BYTES)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{path} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise UsageError(f"{path} is not an Ed25519 private key")
    return key


MAX_KEY_FILE_BYTES = 64 * 1024  # the most bytes a key file is read to (a PEM key is some 120)


def load_public_key(path: Path) -> Ed25519PublicKey:
    """The reviewer's public key; every way of getting it wrong is a UsageError that says which."""
    data = read_small_file(path, "the public key", MAX_KEY_FILE_BYTES)
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
