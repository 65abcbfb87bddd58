"""What the rules share about tools and digests: MCP-namespaced names, short digests.

Each rule's own vocabulary (which tools mutate, which read) lives in its module under
`streams.detector.rules`.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

_FINGERPRINT_HEX_START = len("sha256:")


def is_named(tool_name: str, base: str) -> bool:
    """`base` itself, or an MCP-namespaced `<server>__base`."""
    return tool_name == base or tool_name.endswith("__" + base)


def short_digest(text: str) -> str:
    """128-bit hex digest: kept in state instead of raw paths, ids or long ranges."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@lru_cache(maxsize=4096)
def id_digest(call_id: str) -> str:
    """`short_digest` of a call id, remembered for the 4,096 newest ids: each id is
    digested when its call is remembered and again for each of its results (by the core
    and by the tool-step tracker), and results follow their calls closely. A pure
    function: what is remembered changes the cost only."""
    return short_digest(call_id)


def fingerprint_digest(fingerprint: str) -> str:
    """The first 128 bits of a `sha256:<hex>` fingerprint: plenty for equality tests,
    and half the state size."""
    return fingerprint[_FINGERPRINT_HEX_START : _FINGERPRINT_HEX_START + 32]
