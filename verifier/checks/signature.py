"""The detached Ed25519 signature over SHA256SUMS."""

from __future__ import annotations

from collections.abc import Iterator

from verifier import layout
from verifier.checks.context import BundleContext
from verifier.model import Finding, Severity

CHECK = "signature"


def check_signature(ctx: BundleContext) -> Iterator[Finding]:
    signature = ctx.files.get(layout.SIGNATURE)
    key_path = ctx.options.public_key
    if key_path is None:
        if signature is not None:
            yield Finding(
                CHECK,
                Severity.INFO,
                "the bundle is signed, but no public key was given (--key): signature not checked",
                file=layout.SIGNATURE,
            )
        return
    if signature is None:
        yield Finding(
            CHECK,
            Severity.ERROR,
            "a public key was given but the bundle is not signed",
            file=layout.SIGNATURE,
        )
        return
    from verifier import signing  # cryptography (~35 ms to import) only when a key is given

    sums = ctx.files.get(layout.SHA256SUMS)
    key = signing.load_public_key(key_path)
    if sums is None or not signing.signature_is_valid(sums, signature, key):
        yield Finding(
            CHECK,
            Severity.ERROR,
            "the signature does not verify against SHA256SUMS with the given key",
            file=layout.SIGNATURE,
        )
    else:
        yield Finding(CHECK, Severity.INFO, "signature verified", file=layout.SIGNATURE)
