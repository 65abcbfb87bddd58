"""loopwatch: fleet-wide tool-loop detection for AI agents.

`loopwatch.models` is the wire contract (docs/contract.md); `loopwatch.streams` the
stream worker, the runtime client and the command line. In the repository they are the
top-level folders `models/` and `streams/`; pyproject's package-dir maps them here in the
sdist, the wheel and an editable install.

Run straight from a checkout (`PYTHONPATH=<checkout>`, or pytest's `pythonpath`), this
file finds the folders itself: the checkout's root joins this package's path, so that
`loopwatch.models` and `loopwatch.streams` are that checkout's own folders (never another
checkout's editable install). Installed, nothing is added.
"""

from pathlib import Path as _Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loopwatch.streams.scan.api import ScanResult

_ROOT = _Path(__file__).resolve().parent.parent
if all((_ROOT / sub / "__init__.py").is_file() for sub in ("models", "streams")) and (
    _ROOT / "pyproject.toml"
).is_file():
    __path__.append(str(_ROOT))
del _Path, _ROOT


def scan(messages_or_events: Any, **options: Any) -> "ScanResult":
    """Judge recorded sessions in process, as `loopwatch scan` does: returns a
    `ScanResult` (verdicts, episodes, counts; a table in Jupyter). See
    `loopwatch.streams.scan.api.scan` for the options and docs/scan.md ("In process").
    The scanner is imported here, on first use, so that `import loopwatch` stays light."""
    from loopwatch.streams.scan.api import scan as _scan  # noqa: PLC0415  (lazy: see above)

    return _scan(messages_or_events, **options)
