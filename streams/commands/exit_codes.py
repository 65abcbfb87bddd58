"""The exit codes of `loopwatch` commands (one name each)."""

EXIT_OK = 0
EXIT_KAFKA = 1
"""The broker could not be reached, or refused (topics, worker, otel-bridge)."""
EXIT_USAGE = 2
"""Invalid settings, options or input: the message names the setting or option."""
EXIT_MISMATCH = 4
"""`replay`: some session's live warnings differ from `scan`'s for the same input, or its
verdicts did not all arrive before the deadline."""
