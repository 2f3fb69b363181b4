"""The output formats of `evidence verify` and `evidence diff`: a module of its own, so
that a command's options load neither rich nor a renderer."""

from __future__ import annotations

import enum


class OutputFormat(enum.StrEnum):
    TEXT = "text"
    JSON = "json"
    MARKDOWN = "markdown"
