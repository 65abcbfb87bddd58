"""loopwatch: fleet-wide tool-loop detection for AI agents.

`loopwatch.models` is the wire contract (docs/contract.md); `loopwatch.streams` the
stream worker, the runtime client and the command line. In the repository they are the
top-level folders `models/` and `streams/` (pyproject maps them here).
"""
