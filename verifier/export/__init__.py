"""Export: turn a private raw capture into a public, verifiable, redacted bundle.

raw (verifier.raw) -> assemble (public documents) -> redact (placeholders + ledger)
-> exporter (write beside the target, self-verify, rename) -> archive (reproducible .tar.gz)
"""

from verifier.export.exporter import ExportOptions, ExportSummary, export_bundle

__all__ = ["ExportOptions", "ExportSummary", "export_bundle"]
