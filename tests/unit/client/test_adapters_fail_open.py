"""Every adapter with the real framework and a client whose broker is not there: the
agent's run finishes, nothing raises into it, the agent id is the framework's agent
name, a missing session id is generated with one warning, and an error of loopwatch's
own leaves the request unchanged.

No broker is needed: nothing listens at the client's address (the client fails open).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import Agent as OpenAIAgent
from agents import ModelResponse as AgentsModelResponse
from agents import RunConfig, Runner, Usage, function_tool
from agents.models.interface import Model
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from openai.types.responses import ResponseOutputMessage, ResponseOutputText
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from loopwatch.streams.client import HistoryTracker, LoopwatchClient
from loopwatch.streams.client.claude_agent import DEFAULT_AGENT_ID, LoopwatchHooks
from loopwatch.streams.client.langchain import LoopwatchMiddleware, family_of
from loopwatch.streams.client.openai_agents import loopwatch_input_filter
from loopwatch.streams.client.pydantic_ai import LoopwatchCapability
from loopwatch.streams.demo.ports import free_ports

Opened = list[tuple[str, str | None]]


@pytest.fixture
async def client() -> AsyncIterator[LoopwatchClient]:
    """A client with no broker behind it; the circuit opens at its first failure."""
    async with LoopwatchClient(
        bootstrap_servers=f"127.0.0.1:{free_ports()}",
        verdict_timeout=0.05,
        failure_threshold=1,
        log_timeouts=False,
    ) as down:
        yield down


def record_trackers(client: LoopwatchClient) -> Opened:
    """The (session id, agent id) of each `client.tracker` call."""
    opened: Opened = []
    original = client.tracker

    async def tracker(session_id: str, fmt: Any, **options: Any) -> HistoryTracker:
        opened.append((session_id, options.get("agent_id")))
        return await original(session_id, fmt, **options)

    client.tracker = tracker  # type: ignore[method-assign]
    return opened


def broken_trackers(client: LoopwatchClient) -> None:
    async def tracker(*args: Any, **kwargs: Any) -> HistoryTracker:
        raise RuntimeError("loopwatch's own bug")

    client.tracker = tracker  # type: ignore[method-assign]


# -- LangChain -------------------------------------------------------------------------


class FakeModel(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@tool
def search(query: str) -> str:
    """Search for flights."""
    return "no results"


def langchain_agent(client: LoopwatchClient) -> Any:
    call = {"name": "search", "args": {"query": "SFO-JFK"}, "id": "c1"}
    answers = iter([AIMessage("", tool_calls=[call]), AIMessage("none")])
    return create_agent(
        FakeModel(messages=answers),
        [search],
        middleware=[LoopwatchMiddleware(client)],
        name="booker",
    )


async def test_langchain_without_a_thread_id(
    client: LoopwatchClient, caplog: pytest.LogCaptureFixture
) -> None:
    opened = record_trackers(client)
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            state = await langchain_agent(client).ainvoke(
                {"messages": [{"role": "user", "content": "find a flight"}]}
            )
            assert state["messages"][-1].content == "none"
    assert len(opened) == 4 and {agent for _, agent in opened} == {"booker"}
    sessions = [session for session, _ in opened]
    assert sessions[0] == sessions[1] != sessions[2] == sessions[3]  # one per run
    assert all(session.startswith("lc-") for session in sessions)
    no_thread = [r for r in caplog.records if "no thread_id" in r.getMessage()]
    assert len(no_thread) == 2  # once per middleware (one agent each run here)


async def test_langchain_with_loopwatch_broken(client: LoopwatchClient) -> None:
    broken_trackers(client)
    state = await langchain_agent(client).ainvoke(
        {"messages": [{"role": "user", "content": "find a flight"}]},
        {"configurable": {"thread_id": "t"}},
    )
    assert state["messages"][-1].content == "none"


def test_langchain_families() -> None:
    assert family_of(ChatAnthropic(model_name="claude-sonnet-4-5", api_key="x")) == "anthropic"
    assert family_of(ChatOpenAI(model="gpt-4o", api_key="x")) == "openai"
    assert family_of(FakeModel(messages=iter([]))) == "openai"  # unknown: as OpenAI


# -- OpenAI Agents SDK -----------------------------------------------------------------


class AnswerModel(Model):
    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        text = ResponseOutputText(type="output_text", text="none", annotations=[])
        message = ResponseOutputMessage(
            id="m", type="message", role="assistant", status="completed", content=[text]
        )
        return AgentsModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@function_tool
def lookup(query: str) -> str:
    """Look up."""
    return "none"


async def test_openai_agents_without_a_session_id(
    client: LoopwatchClient, caplog: pytest.LogCaptureFixture
) -> None:
    opened = record_trackers(client)
    agent = OpenAIAgent(name="booker", model=AnswerModel(), tools=[lookup])
    config = RunConfig(
        call_model_input_filter=loopwatch_input_filter(client), tracing_disabled=True
    )
    with caplog.at_level(logging.WARNING):
        result = await Runner.run(agent, "find a flight", run_config=config)
    assert result.final_output == "none"
    assert len(opened) == 1 and opened[0][0].startswith("oa-") and opened[0][1] == "booker"
    assert len([r for r in caplog.records if "no session_id" in r.getMessage()]) == 1
    broken_trackers(client)
    result = await Runner.run(agent, "find a flight", run_config=config)
    assert result.final_output == "none"


# -- Pydantic AI -----------------------------------------------------------------------


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("none")])


async def test_pydantic_ai_names_the_agent_and_survives_loopwatch(
    client: LoopwatchClient,
) -> None:
    opened = record_trackers(client)
    agent = Agent(FunctionModel(answer), name="booker", capabilities=[LoopwatchCapability(client)])
    result = await agent.run("find a flight")
    assert result.output == "none" and opened[0][1] == "booker"
    broken_trackers(client)
    assert (await agent.run("find a flight")).output == "none"


# -- Claude Agent SDK ------------------------------------------------------------------


async def test_claude_hooks_name_the_agent_and_never_raise(client: LoopwatchClient) -> None:
    hooks = LoopwatchHooks(client)
    hook_input: Any = {
        "session_id": "claude-s",
        "transcript_path": "",
        "cwd": "/",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "ls"},
        "tool_response": {"stdout": ""},
        "tool_use_id": "toolu_1",
    }
    assert await hooks.post_tool_use(hook_input, None, {"signal": None}) == {}
    session = await client.session("claude-s")
    assert session.agent_id == DEFAULT_AGENT_ID
    assert await hooks.post_tool_use({"no": "session"}, None, {"signal": None}) == {}  # type: ignore[arg-type]
