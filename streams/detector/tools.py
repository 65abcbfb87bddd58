"""Tool vocabulary of SPEC §4: mutating tools, read tools, read targets and ranges."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from models.fingerprints import canonical_json

_MUTATING = ("edit_file", "write_file", "delete_file", "bash")
_READ_FILE = "read_file"
_READ_MANY = "read_many_files"


def _is_named(tool_name: str, base: str) -> bool:
    """`base` itself, or an MCP-namespaced `<server>__base`."""
    return tool_name == base or tool_name.endswith("__" + base)


def is_mutating(tool_name: str) -> bool:
    return any(_is_named(tool_name, base) for base in _MUTATING)


def short_digest(text: str) -> str:
    """128-bit hex digest: kept in state instead of raw paths, ids or long ranges."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def read_resource(tool_name: str, arguments: Any) -> str | None:
    """The resource a read call targets, or None when the call is not a read.

    (tool name, `path`) for read_file tools, (tool name, compact JSON of `paths`) for
    read_many_files tools; a call without a string `path` / list `paths` is not a read.
    Raw (it holds a path): compare it, and keep only `short_digest` of it in state.
    """
    if not isinstance(arguments, dict):
        return None
    if _is_named(tool_name, _READ_FILE):
        path = arguments.get("path")
        return f"{tool_name}\x00{path}" if isinstance(path, str) else None
    if _is_named(tool_name, _READ_MANY):
        paths = arguments.get("paths")
        if isinstance(paths, list):
            return f"{tool_name}\x00{canonical_json(paths).decode('utf-8')}"
    return None


_MAX_RANGE_KEY_CHARS = 40


def read_range(arguments: dict[str, Any]) -> str:
    """The range of a read: its `offset` (missing → "0"; a number → its JSON text; a
    string → itself, so "0" equals 0; anything else → compact JSON). `limit` is ignored."""
    offset = arguments.get("offset", "0")
    if isinstance(offset, str):
        key = offset
    elif isinstance(offset, int | float) and not isinstance(offset, bool):
        key = json.dumps(offset)
    else:
        key = canonical_json(offset).decode("utf-8")
    # Offsets are short; anything long is digested so state stays small and raw-free.
    return key if len(key) <= _MAX_RANGE_KEY_CHARS else "#" + short_digest(key)
