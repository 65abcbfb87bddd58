"""When a bench's reader saw its first, 10th-percentile, 90th-percentile and last record:
the window the worker bench takes a rate over (shared by its bare readers)."""

from __future__ import annotations

import json
import time
from pathlib import Path


class ProgressMarks:
    """Notes the wall-clock time of records 1, count/10, count*9/10 and count, and writes
    them as JSON to `result_file` at the last."""

    def __init__(self, count: int, result_file: str) -> None:
        self.marks = {1: "first", max(1, count // 10): "p10", max(1, count * 9 // 10): "p90"}
        self.marks[count] = "last"
        self.result_file = result_file
        self.seen: dict[str, float] = {}

    def record(self, n: int) -> None:
        """Record number `n` (from 1) has been read."""
        mark = self.marks.get(n)
        if mark is not None:
            self.seen[mark] = time.time()
            if mark == "last":
                Path(self.result_file).write_text(json.dumps(self.seen))
