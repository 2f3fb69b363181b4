"""One error root for all a user can cause; each subclass carries its text and exit code."""

from __future__ import annotations


class EvidenceError(Exception):
    """Base of every error the user can cause. Its text is shown as is, without a traceback."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(EvidenceError):
    """The command was called wrongly (bad option, missing argument, existing output)."""

    exit_code = 2


class UnreadableInput(EvidenceError):
    """The input cannot be read at all (not a directory, not a gzip stream, ...)."""

    exit_code = 2


class UnsafeInput(EvidenceError):
    """The input breaks a safety rule badly enough that reading must stop."""

    exit_code = 1


class InvalidDocument(EvidenceError):
    """A JSON document is malformed or breaks the strict reading rules."""

    exit_code = 1


class SchemaVersionError(InvalidDocument):
    """A document declares a schema major version this tool does not know."""


class ExportError(EvidenceError):
    """Export could not produce a safe public bundle."""

    exit_code = 1


class CaptureError(EvidenceError):
    """The capture harness could not complete its protocol."""

    exit_code = 1
