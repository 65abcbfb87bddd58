"""Scripted agents that fall into one loop kind each (docs/contract.md §4) and change
approach as soon as a loopwatch warning reaches their prompt. No model: the script is the policy.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from loopwatch.models import RuleName
from loopwatch.streams.client import Call
from loopwatch.streams.demo.conversation import Conversation, Outcome, warnings_in

MAX_REPEATS = 8
"""A looping agent gives up after this many repetitions without a warning."""


@dataclass(frozen=True)
class LoopOutcome:
    """How a scripted loop ended."""

    warned_after: int | None
    """Repetitions done before the warning reached the prompt; None: it never did."""

    @property
    def broken(self) -> bool:
        return self.warned_after is not None


class Calls:
    """Call ids in the style of the conversation's API."""

    def __init__(self, conv: Conversation) -> None:
        self._prefix = "call_" if conv.format == "openai" else "toolu_"
        self._numbers = itertools.count(1)

    def __call__(self, name: str, **arguments: object) -> Call:
        return Call(f"{self._prefix}{next(self._numbers):04d}", name, arguments)


async def repeat_until_warned(
    conv: Conversation, repeat: Callable[[], Awaitable[None]]
) -> int | None:
    """Run `repeat` (one model turn and its tools) until a warning is in the prompt."""
    before = len(warnings_in(await conv.prompt()))
    for done in range(MAX_REPEATS):
        await repeat()
        if len(warnings_in(await conv.prompt())) > before:
            return done + 1
    return None


async def failing_edit(conv: Conversation) -> LoopOutcome:
    """repeated_failed_mutation: the same edit, with a stale `old_string`, fails again."""
    call = Calls(conv)
    await conv.system("You are a coding agent working in the repository at /repo.")
    await conv.user("test_parse_iso_date fails with a ValueError. Fix src/dates.py.")
    await conv.prompt()
    read = call("read_file", path="src/dates.py")
    await conv.assistant("Let me look at the parser first.", [read])
    await conv.results([Outcome(read, {"content": _DATES_PY, "lines": 6})])

    async def edit() -> None:
        stale = call("edit_file", path="src/dates.py", old_string=_STALE, new_string=_FIXED)
        await conv.assistant("I'll replace the strptime format.", [stale])
        await conv.results([Outcome(stale, error="old_string not found in src/dates.py")])

    warned = await repeat_until_warned(conv, edit)
    if warned is not None:  # the warning says: read the error, change the arguments
        fresh = call("read_file", path="src/dates.py")
        await conv.assistant("The file differs from what I assumed; reading it again.", [fresh])
        await conv.results([Outcome(fresh, {"content": _DATES_PY, "lines": 6})])
        good = call("edit_file", path="src/dates.py", old_string=_ACTUAL, new_string=_FIXED)
        run = call("bash", command="pytest -q tests/test_dates.py")
        await conv.assistant("Editing the line as it really is, then running the tests.", [good])
        await conv.results([Outcome(good, {"replaced": 1})])
        await conv.prompt()
        await conv.assistant(None, [run])
        await conv.results([Outcome(run, "4 passed in 0.12s")])
        await conv.prompt()
        await conv.assistant("Fixed: the parser now accepts the trailing 'Z'. Tests pass.")
    return LoopOutcome(warned)


async def empty_search(conv: Conversation) -> LoopOutcome:
    """repeated_result: the same search returns the same empty list, retried after a
    remark each time (text steps between, so only the result repeats, not the batch).
    OpenAI format only: two assistant messages in a row do not exist in Anthropic's."""
    call = Calls(conv)
    await conv.system("You are an airline booking assistant. Use the tools; never guess.")
    await conv.user("Find me a direct flight from SFO to JFK on May 20th.")

    searched = False

    async def search() -> None:
        nonlocal searched
        if searched:  # a text step between the searches: the batch run restarts each time
            await conv.assistant("No results came back; let me search again.")
            await conv.prompt()
        searched = True
        find = call("search_direct_flight", origin="SFO", destination="JFK", date="2024-05-20")
        await conv.assistant(None, [find])
        await conv.results([Outcome(find, [])])

    warned = await repeat_until_warned(conv, search)
    if warned is not None:  # use what was returned: there is no such flight; look elsewhere
        other = call("search_direct_flight", origin="SFO", destination="EWR", date="2024-05-20")
        await conv.assistant("JFK has none that day; checking Newark instead.", [other])
        await conv.results([Outcome(other, [{"flight": "UA1532", "depart": "07:05"}])])
        await conv.prompt()
        await conv.assistant("There is no direct SFO-JFK flight on May 20; UA1532 to EWR is.")
    return LoopOutcome(warned)


async def paging_reader(conv: Conversation) -> LoopOutcome:
    """repeated_read_range: pages through a file, then keeps rereading its first page."""
    call = Calls(conv)
    await conv.system("You are a coding agent. Keep answers short.")
    await conv.user("Where does the server set its request timeout? Look in src/server.py.")
    await conv.prompt()
    for offset in (0, 200):
        page = call("read_file", path="src/server.py", offset=offset, limit=200)
        await conv.assistant(None, [page])
        await conv.results([Outcome(page, {"content": f"<lines {offset}-{offset + 199}>"})])
        await conv.prompt()

    async def reread() -> None:
        page = call("read_file", path="src/server.py", offset=0, limit=200)
        await conv.assistant(None, [page])
        await conv.results([Outcome(page, {"content": "<lines 0-199>"})])

    warned = await repeat_until_warned(conv, reread)
    if warned is not None:  # a different source: search instead of rereading
        grep = call("grep", pattern="timeout", path="src/")
        await conv.assistant("Searching for the setting instead of rereading.", [grep])
        await conv.results([Outcome(grep, ["src/config.py:12: REQUEST_TIMEOUT = 30"])])
        await conv.prompt()
        await conv.assistant("It is REQUEST_TIMEOUT = 30 in src/config.py, line 12.")
    return LoopOutcome(warned)


async def status_batch(conv: Conversation) -> LoopOutcome:
    """repeated_batch: the same parallel pair of look-around calls, again and again."""
    call = Calls(conv)
    await conv.system("You are a release assistant with shell access.")
    await conv.user("Is the working tree ready to tag v2.3.0?")

    async def look_around() -> None:
        ls = call("list_dir", path=".")
        status = call("git_status")
        await conv.assistant("Checking the tree.", [ls, status])
        await conv.results(
            [Outcome(ls, ["CHANGELOG.md", "pyproject.toml", "src"]), Outcome(status, "clean")]
        )

    warned = await repeat_until_warned(conv, look_around)
    if warned is not None:  # report instead of looking again
        tags = call("bash", command="git tag --list 'v2.3*'")
        await conv.assistant("The tree is clean; checking the tag is free.", [tags])
        await conv.results([Outcome(tags, "")])
        await conv.prompt()
        await conv.assistant("Ready: the tree is clean and v2.3.0 is not taken yet.")
    return LoopOutcome(warned)


LOOPERS: dict[RuleName, Callable[[Conversation], Awaitable[LoopOutcome]]] = {
    "repeated_failed_mutation": failing_edit,
    "repeated_result": empty_search,
    "repeated_read_range": paging_reader,
    "repeated_batch": status_batch,
}

_DATES_PY = (
    "from datetime import datetime\n\n"
    "def parse_iso_date(text):\n"
    "    return datetime.strptime(text, '%Y-%m-%dT%H:%M:%S')\n"
)
_STALE = "return datetime.strptime(text, '%Y-%m-%d %H:%M:%S')"
_ACTUAL = "return datetime.strptime(text, '%Y-%m-%dT%H:%M:%S')"
_FIXED = "return datetime.fromisoformat(text.replace('Z', '+00:00'))"
