"""The detached Ed25519 signature over SHA256SUMS."""

from __future__ import annotations

from collections.abc import Iterator

from verifier import layout
from verifier.checks.context import BundleContext
from verifier.errors import UsageError
from verifier.model import Finding, Severity

CHECK = "signature"


def check_signature(ctx: BundleContext) -> Iterator[Finding]:
    from verifier import signing  # cryptography: not for `evidence --help`

    signature = ctx.files.get(layout.SIGNATURE)
    key_path = ctx.options.public_key
    size = len(signature) if signature is not None else 0
    if signature is not None and size != signing.SIGNATURE_LENGTH:
        # Whatever the key, a file of the wrong size is no signature: never "signed".
        yield Finding(
            CHECK,
            Severity.ERROR,
            f"{layout.SIGNATURE} is {size} {'byte' if size == 1 else 'bytes'}, not a "
            f"{signing.SIGNATURE_LENGTH}-byte Ed25519 signature: the bundle is not signed",
            file=layout.SIGNATURE,
        )
        return
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
    sums = ctx.files.get(layout.SHA256SUMS)
    try:
        key = signing.load_public_key(key_path)
    except UsageError as exc:  # the CLI says it before reading; a library caller hears it here
        yield Finding(CHECK, Severity.ERROR, exc.message, file=layout.SIGNATURE)
        return
    if sums is None or not signing.signature_is_valid(sums, signature, key):
        yield Finding(
            CHECK,
            Severity.ERROR,
            "the signature does not verify against SHA256SUMS with the given key",
            file=layout.SIGNATURE,
        )
    else:
        yield Finding(CHECK, Severity.INFO, "signature verified", file=layout.SIGNATURE)
