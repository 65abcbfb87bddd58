"""The exit codes of `loopwatch` commands: one meaning each, the same in every command.

1 is what Python and faust return for any failure they do not handle, so it can only ever
mean "failed"; what a command finds (a loop, a missing key, unusable input) has a code of
its own, so that a script can tell a finding from a failure.
"""

EXIT_OK = 0
"""Done (with `--fail-on-loop`: and no loop was found)."""
EXIT_KAFKA = 1
"""The broker could not be reached or refused, or a service stopped on an error."""
EXIT_USAGE = 2
"""Invalid options, settings or records, or a file that cannot be read or written: the
message names the option, setting or file."""
EXIT_NOT_FOUND = 3
"""`policy get`/`delete`: the key has no policy."""
EXIT_LOOP_FOUND = 4
"""`--fail-on-loop` and a loop was found; `demo`: a loop went on after its warning, or a
clean session was warned."""
EXIT_INVALID_INPUT = 5
"""`--strict` and some input line was invalid (wins over EXIT_LOOP_FOUND: a gate over
garbage must not pass, nor report a loop it could not check fully)."""
EXIT_NO_EVENTS = 6
"""The input held no valid event at all (empty, or every line invalid, or read with the
wrong `--format`): nothing was checked."""
EXIT_MISMATCH = 7
"""`replay`: some session's live warnings differ from `scan`'s for the same input, or its
verdicts did not all arrive before the deadline."""
EXIT_INTERRUPTED = 130
"""Stopped by Ctrl-C (SIGINT)."""
EXIT_BROKEN_PIPE = 141
"""The reader of the output went away (`loopwatch scan ... | head`)."""

EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "done (with --fail-on-loop: no loop found)"),
    (EXIT_KAFKA, "the broker unreachable or refusing, or a service stopped on an error"),
    (EXIT_USAGE, "invalid option, setting or record; a file that cannot be read or written"),
    (EXIT_NOT_FOUND, "policy get/delete: the key has no policy"),
    (EXIT_LOOP_FOUND, "--fail-on-loop and a loop was found (demo: a loop was not broken)"),
    (EXIT_INVALID_INPUT, "--strict and some input line was invalid"),
    (EXIT_NO_EVENTS, "no valid event in the input: nothing was checked"),
    (EXIT_MISMATCH, "replay: live warnings differ from scan's, or verdicts missing"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (EXIT_BROKEN_PIPE, "the output's reader went away (| head)"),
)
"""The table `loopwatch --help` prints and the README's reference section lists."""


def exit_code_table() -> str:
    """The table as `loopwatch --help` prints it."""
    return "exit codes (every command):\n" + "\n".join(
        f"  {code:>3}  {meaning}" for code, meaning in EXIT_CODES
    )
