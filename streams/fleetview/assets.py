"""The page's and the report's static files, read from the package (they ship in the wheel)."""

from __future__ import annotations

from functools import cache
from importlib import resources

CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


@cache
def asset(name: str) -> str:
    """The text of static/`name`; FileNotFoundError when there is no such asset."""
    if "/" in name or name.startswith(".") or not name.endswith(tuple(CONTENT_TYPES)):
        raise FileNotFoundError(name)
    return (resources.files("loopwatch.streams.fleetview") / "static" / name).read_text("utf-8")


def content_type(name: str) -> str:
    return next(t for ext, t in CONTENT_TYPES.items() if name.endswith(ext))
