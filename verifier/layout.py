"""File names of the raw capture directory and the public bundle, kept in one place."""

from __future__ import annotations

# Public bundle.
EXPERIMENT = "experiment.json"
MODEL_MANIFEST = "model-manifest.json"
REDACTION_LEDGER = "redaction-ledger.json"
RECORDS_DIR = "records"
SHA256SUMS = "SHA256SUMS"
SIGNATURE = "SHA256SUMS.sig"
UNSUMMED = frozenset({SHA256SUMS, SIGNATURE})


def record_path(condition: str, sequence: int) -> str:
    """records/<condition>/<sequence, 3 digits>.json"""
    return f"{RECORDS_DIR}/{condition}/{sequence:03d}.json"


# Raw capture directory (private).
RAW_RUN = "run.json"
RAW_MODEL_MANIFEST = "model-manifest.json"
RAW_HARNESS_LOG = "harness.log"
RAW_CONDITIONS_DIR = "conditions"


def raw_exchange_path(condition: str, sequence: int) -> str:
    """conditions/<condition>/exchanges/<sequence, 3 digits>.json"""
    return f"{RAW_CONDITIONS_DIR}/{condition}/exchanges/{sequence:03d}.json"


def raw_server_path(condition: str, instance: int) -> str:
    """conditions/<condition>/servers/<instance>.json"""
    return f"{RAW_CONDITIONS_DIR}/{condition}/servers/{instance}.json"


def raw_server_log_path(condition: str, instance: int) -> str:
    """conditions/<condition>/servers/<instance>.log: the server's own output."""
    return f"{RAW_CONDITIONS_DIR}/{condition}/servers/{instance}.log"
