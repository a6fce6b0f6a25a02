"""The package version, written in one place: include/membudget/version.h.

A wheel carries it in ``_generated_version.py`` (scikit-build-core writes that file from the
header when it builds the wheel). Run from a source checkout, the package reads the header
itself, so the version is never typed a second time."""
from __future__ import annotations

import re
from pathlib import Path

__all__ = ["__version__"]


def _from_header() -> str:
    header = Path(__file__).resolve().parents[3] / "include" / "membudget" / "version.h"
    try:
        text = header.read_text(encoding="utf-8")
    except OSError:
        return "0+unknown"
    parts = [re.search(rf"#define\s+MB_VERSION_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        return "0+unknown"
    return ".".join(m.group(1) for m in parts)  # type: ignore[union-attr]


try:
    from ._generated_version import version as __version__  # type: ignore[import-not-found, unused-ignore]
except ImportError:
    __version__ = _from_header()
