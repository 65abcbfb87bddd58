"""Claude Agent SDK: `LoopwatchHooks` in `ClaudeAgentOptions` (docs/frameworks.md).

With the Claude Code CLI and an API key, `query(prompt=..., options=options)` runs the
agent and the hooks fire by themselves. Without them this script calls the hooks the
way Claude Code does, with a Bash command that keeps returning the same output.
"""

from __future__ import annotations

import asyncio
import os
import uuid

from claude_agent_sdk import ClaudeAgentOptions

from loopwatch.streams.client import LoopwatchClient
from loopwatch.streams.client.claude_agent import LoopwatchHooks
from loopwatch.streams.settings import Settings


async def main() -> None:
    # broker and topics from the environment, as the worker reads them
    async with LoopwatchClient.from_settings(Settings.from_env()) as client:
        hooks = LoopwatchHooks(client)
        options = ClaudeAgentOptions(hooks=hooks.hooks())  # pass to query() / ClaudeSDKClient
        session = f"example-{uuid.uuid4().hex[:8]}"
        for step in range(3):
            output = await hooks.post_tool_use(
                {
                    "session_id": session,
                    "transcript_path": "",
                    "cwd": os.getcwd(),
                    "hook_event_name": "PostToolUse",
                    "tool_name": "Bash",
                    "tool_input": {"command": "git status"},
                    "tool_response": {"stdout": "nothing to commit", "stderr": ""},
                    "tool_use_id": f"toolu_{step}",
                },
                None,
                {"signal": None},
            )
            print(f"step {step}: {output or 'no warning'}")
        await hooks.end(session)
        assert options.hooks


if __name__ == "__main__":
    asyncio.run(main())
