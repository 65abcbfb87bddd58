"""Adapters with providers: each framework with the provider's real integration class, against
a local stub of the provider's HTTP API (tests/support/provider_stub.py), the real
broker and the real worker.

For every pair: the request the provider receives after the third repeat carries the
warning exactly once, the requests before it none; every request is valid for that
provider (tests/support/prompt_rules.py; Anthropic: one top-level system prompt and no
system role in `messages`); the framework's stored history never holds the warning.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent as OpenAIAgent
from agents import (
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
)
from anthropic import AsyncAnthropic
from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from loopwatch.streams.client import MARKER, LoopwatchClient
from loopwatch.streams.client.langchain import LoopwatchMiddleware
from loopwatch.streams.client.openai_agents import loopwatch_input_filter
from loopwatch.streams.client.pydantic_ai import LoopwatchCapability
from loopwatch.streams.demo.worker_process import WorkerProcess
from loopwatch.streams.settings import Settings
from tests.e2e.frameworks import LOOP_STEPS, VERDICT_TIMEOUT, search_arguments, search_result
from tests.support.prompt_rules import check_anthropic, check_openai, check_responses
from tests.support.provider_stub import ProviderStub, TextTurn, ToolTurn, Turn

pytestmark = pytest.mark.kafka

API_KEY = "test-key-not-used"
# the current Sonnet: the stubs never check it; a retired name would only add a warning
ANTHROPIC_MODEL = "claude-sonnet-4-6"


def looping_script() -> list[Turn]:
    """The same search thrice (repeated_result fires on the third result), then an answer."""
    turns: list[Turn] = [
        ToolTurn("search", search_arguments(n, looping=True)) for n in range(LOOP_STEPS)
    ]
    return [*turns, TextTurn("There is no such flight.")]


def count_warnings(value: Any) -> int:
    return json.dumps(value, default=str).count(MARKER)


def assert_warned_once_at_the_end(bodies: list[dict[str, Any]]) -> None:
    assert len(bodies) == LOOP_STEPS + 1
    assert [count_warnings(b) for b in bodies[:LOOP_STEPS]] == [0] * LOOP_STEPS, bodies
    texts = warning_texts(bodies[LOOP_STEPS])
    assert texts, bodies[LOOP_STEPS]
    assert len(texts) == len(set(texts)), texts  # each warning once
    assert any("repeated_result" in t or "same result" in t for t in texts), texts


def warning_texts(value: Any) -> list[str]:
    text = json.dumps(value, default=str)
    return [part for part in text.split('"') if part.startswith(MARKER)]


def check_chat_body(body: dict[str, Any]) -> None:
    check_openai(body["messages"])
    # the warning is one system message of its own
    placed = [m for m in body["messages"] if MARKER in json.dumps(m)]
    assert all(m["role"] == "system" for m in placed)


def check_anthropic_body(body: dict[str, Any]) -> None:
    messages = body["messages"]
    assert all(m["role"] in ("user", "assistant") for m in messages)
    check_anthropic(messages)
    # the warning is a text block of a user turn, after the turn's tool results
    for message in messages:
        blocks = message["content"] if isinstance(message["content"], list) else []
        for block in blocks:
            if block.get("type") == "text" and MARKER in block.get("text", ""):
                assert message["role"] == "user"


def check_responses_body(body: dict[str, Any]) -> None:
    items = body["input"]
    check_responses(items)


# -- LangChain: ChatOpenAI, ChatAnthropic -------------------------------------------------


async def run_langchain(client: LoopwatchClient, model: Any, thread: str) -> list[Any]:

    @tool
    def search(query: str) -> str:
        """Search for flights."""
        return search_result({"query": query})

    agent = create_agent(
        model,
        [search],
        system_prompt="You book flights.",
        middleware=[LoopwatchMiddleware(client)],
        name="flight-booker",
    )
    request = {"messages": [{"role": "user", "content": "find me a direct flight"}]}
    state = await agent.ainvoke(request, {"configurable": {"thread_id": thread}})
    await client.end_session(thread)
    messages: list[Any] = state["messages"]
    return messages


async def test_langchain_with_openai_and_anthropic(
    worker: WorkerProcess, e2e_settings: Settings
) -> None:

    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        async with ProviderStub(looping_script()) as openai_stub:
            model: Any = ChatOpenAI(
                model="gpt-4o", base_url=openai_stub.openai_base_url, api_key=API_KEY
            )
            openai_stored = await run_langchain(client, model, "lc-openai")
        async with ProviderStub(looping_script()) as anthropic_stub:
            model = ChatAnthropic(
                model_name=ANTHROPIC_MODEL,
                base_url=anthropic_stub.base_url,
                api_key=API_KEY,
                max_retries=0,
            )
            anthropic_stored = await run_langchain(client, model, "lc-anthropic")
        assert client.stats.circuit.state == "closed" and client.stats.timeouts == 0

    chat = openai_stub.bodies("/v1/chat/completions")
    assert_warned_once_at_the_end(chat)
    for body in chat:
        check_chat_body(body)
    messages = anthropic_stub.bodies("/v1/messages")
    assert_warned_once_at_the_end(messages)
    for body in messages:
        check_anthropic_body(body)
        assert body["system"]  # the agent's one system prompt, top-level
    assert count_warnings([m.content for m in openai_stored]) == 0
    assert count_warnings([m.content for m in anthropic_stored]) == 0


# -- OpenAI Agents SDK: OpenAIResponsesModel, OpenAIChatCompletionsModel ------------------


async def run_openai_agents(
    client: LoopwatchClient, model: Any, session: str
) -> list[dict[str, Any]]:
    @function_tool
    def search(query: str) -> str:
        """Search for flights."""
        return search_result({"query": query})

    agent = OpenAIAgent(
        name="flight-booker", instructions="You book flights.", model=model, tools=[search]
    )
    config = RunConfig(
        call_model_input_filter=loopwatch_input_filter(client, session), tracing_disabled=True
    )
    result = await Runner.run(agent, "find me a direct flight", run_config=config)
    await client.end_session(session)
    stored: list[dict[str, Any]] = [dict(item) for item in result.to_input_list()]
    return stored


async def test_openai_agents_with_responses_and_chat_completions(
    worker: WorkerProcess, e2e_settings: Settings
) -> None:

    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        async with (
            ProviderStub(looping_script()) as responses_stub,
            AsyncOpenAI(base_url=responses_stub.openai_base_url, api_key=API_KEY) as openai,
        ):
            responses_stored = await run_openai_agents(
                client, OpenAIResponsesModel("gpt-4o", openai), "oa-responses"
            )
        async with (
            ProviderStub(looping_script()) as chat_stub,
            AsyncOpenAI(base_url=chat_stub.openai_base_url, api_key=API_KEY) as openai,
        ):
            chat_stored = await run_openai_agents(
                client, OpenAIChatCompletionsModel("gpt-4o", openai), "oa-chat"
            )
        assert client.stats.circuit.state == "closed" and client.stats.timeouts == 0

    responses = responses_stub.bodies("/v1/responses")
    assert_warned_once_at_the_end(responses)
    for body in responses:
        check_responses_body(body)
    chat = chat_stub.bodies("/v1/chat/completions")
    assert_warned_once_at_the_end(chat)
    for body in chat:
        check_chat_body(body)
    assert count_warnings(responses_stored) == 0
    assert count_warnings(chat_stored) == 0


# -- Pydantic AI: OpenAIChatModel, AnthropicModel -----------------------------------------


async def run_pydantic_ai(client: LoopwatchClient, model: Any, session: str) -> list[Any]:

    agent = Agent(
        model,
        name="flight-booker",
        instructions="You book flights.",
        capabilities=[LoopwatchCapability(client, session_id=session)],
    )

    @agent.tool_plain
    def search(query: str) -> str:
        """Search for flights."""
        return search_result({"query": query})

    result = await agent.run("find me a direct flight")
    await client.end_session(session)
    return result.all_messages()


# The providers are local stubs, so the model names only pick each provider's code path.
# pydantic-ai warns when a model's provider has announced its retirement (a date that
# passes while the test stays the same); under `filterwarnings = error` that would fail
# the test for a reason outside the adapter, so only that warning class is let through.
@pytest.mark.filterwarnings("ignore::pydantic_ai.exceptions.DeprecatedModelWarning")
async def test_pydantic_ai_with_openai_and_anthropic(
    worker: WorkerProcess, e2e_settings: Settings
) -> None:

    async with LoopwatchClient.from_settings(
        e2e_settings, verdict_timeout=VERDICT_TIMEOUT
    ) as client:
        async with (
            ProviderStub(looping_script()) as openai_stub,
            AsyncOpenAI(base_url=openai_stub.openai_base_url, api_key=API_KEY) as openai,
        ):
            provider = OpenAIProvider(openai_client=openai)
            openai_stored = await run_pydantic_ai(
                client, OpenAIChatModel("gpt-4o", provider=provider), "pai-openai"
            )
        async with (
            ProviderStub(looping_script()) as anthropic_stub,
            AsyncAnthropic(base_url=anthropic_stub.base_url, api_key=API_KEY) as anthropic,
        ):
            model = AnthropicModel(
                ANTHROPIC_MODEL, provider=AnthropicProvider(anthropic_client=anthropic)
            )
            anthropic_stored = await run_pydantic_ai(client, model, "pai-anthropic")
        assert client.stats.circuit.state == "closed" and client.stats.timeouts == 0

    chat = openai_stub.bodies("/v1/chat/completions")
    assert_warned_once_at_the_end(chat)
    for body in chat:
        check_openai(body["messages"])
    messages = anthropic_stub.bodies("/v1/messages")
    assert_warned_once_at_the_end(messages)
    for body in messages:
        check_anthropic_body(body)
    assert count_warnings([m.parts for m in openai_stored]) == 0
    assert count_warnings([m.parts for m in anthropic_stored]) == 0
