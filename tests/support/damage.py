"""Ways to damage a stored file, shared by the fault-injection tests of every store."""

from __future__ import annotations

from pathlib import Path


def truncate(path: Path) -> None:
    """Keep the first half of the file."""
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def flip(path: Path) -> None:
    """Invert every bit of the byte in the middle of the file."""
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def empty(path: Path) -> None:
    """Leave a file of zero bytes."""
    path.write_bytes(b"")
