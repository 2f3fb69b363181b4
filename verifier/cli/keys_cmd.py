"""`evidence keygen`: an Ed25519 key pair for signing bundles."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from verifier.cli.common import Command, boundary, stderr


def keygen(
    out: Annotated[
        Path,
        typer.Option(
            "--out", metavar="DIR", help="Directory for the two PEM files (created if needed)."
        ),
    ],
) -> None:
    """Make an Ed25519 key pair: a PKCS#8 private key (mode 0600) and its public key.

    Sign an export with [bold]--sign-key[/] PRIVATE.pem; reviewers verify with
    [bold]evidence verify --key[/] PUBLIC.pem, or with stock OpenSSL (below). The
    report names the key by its fingerprint, the SHA-256 of its DER encoding.

    Example: evidence keygen --out keys

      openssl pkeyutl -verify -pubin -inkey keys/evidence-signing-key.pub.pem
        -rawin -in SHA256SUMS -sigfile SHA256SUMS.sig
      openssl pkey -pubin -in keys/evidence-signing-key.pub.pem -outform DER
        | sha256sum
    """
    from verifier import signing  # cryptography loads only here
    from verifier.atomic import new_folders_removed_on_failure

    with new_folders_removed_on_failure(out):  # no empty folder left by a failure
        paths = signing.generate_key_pair(out)
    from verifier.report.common import printable

    stderr.print(f"private key: {printable(str(paths.private))} (keep it secret)", markup=False)
    stderr.print(f"public key:  {printable(str(paths.public))} (publish it)", markup=False)


def register(app: typer.Typer) -> None:
    app.command(cls=Command)(boundary(keygen))
