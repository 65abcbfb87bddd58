"""Agents instrumented to the GenAI conventions to the letter (issue 32): conversation and
agent ids only on the invoke_agent and chat spans, model calls named generate_content or
text_completion. With `ConversationSpanProcessor` in the agent, a conversation of several
traces is one session and its loop across the traces is found."""

from __future__ import annotations

import pytest

from loopwatch.streams.otel.conversation import ConversationSpanProcessor
from loopwatch.streams.otel.mapping import CONVERSATION_ID, span_kind
from loopwatch.streams.otel.spans import decode_spans
from ops.bench.otel_agent import Style
from tests.support.otel_spans import (
    LOOPING,
    InstrumentedAgent,
    bridge_events,
    encode_request,
    export_records,
    raw_session,
    rules,
)


def strict_agent(style: Style, *, processor: bool) -> InstrumentedAgent:
    processors = (ConversationSpanProcessor(),) if processor else ()
    agent = InstrumentedAgent(style=style, strict=True, processors=processors)
    for first in range(0, len(LOOPING), 3):  # three traces, e.g. one per user message
        agent.run("conv-1", LOOPING[first : first + 3])
    return agent


@pytest.mark.parametrize("style", ["sibling", "child"])
def test_spans_to_the_letter_give_one_session_per_conversation(style: Style) -> None:
    agent = strict_agent(style, processor=True)
    tools = [s for s in agent.spans() if s.name.startswith("execute_tool")]
    assert tools and all(s.attributes.get("gen_ai.agent.id") == "coder" for s in tools)
    events = bridge_events(export_records(agent.spans(), batch=4, shuffle=2))
    assert {event.session_id for event in events} == {"conv-1"}
    assert {event.agent_id for event in events} == {"coder"}
    assert rules(events) == rules(raw_session(LOOPING))  # the loop across the traces


def test_without_the_processor_each_trace_is_a_session_of_its_own() -> None:
    # What the processor is for: the tool spans fall back to their trace id.
    agent = strict_agent("sibling", processor=False)
    events = bridge_events(export_records(agent.spans()))
    tool_sessions = {e.session_id for e in events if e.type == "tool_result"}
    assert len(tool_sessions) == 3 and "conv-1" not in tool_sessions


def test_ids_set_on_the_span_itself_win_over_the_copied_ones() -> None:
    agent = InstrumentedAgent(processors=(ConversationSpanProcessor(),))
    agent.run("conv-1", [LOOPING[0]])
    assert {s.attributes.get(CONVERSATION_ID) for s in agent.spans()} == {"conv-1"}
    other = InstrumentedAgent(processors=(ConversationSpanProcessor(),))
    tracer = other._tracer
    with (
        tracer.start_as_current_span("invoke_agent a", attributes={CONVERSATION_ID: "outer"}),
        tracer.start_as_current_span("chat m", attributes={CONVERSATION_ID: "inner"}),
        tracer.start_as_current_span("execute_tool t"),
    ):
        pass  # entered in order: each span the parent of the next
    ids = {s.name: s.attributes.get(CONVERSATION_ID) for s in other.spans()}
    assert ids == {"invoke_agent a": "outer", "chat m": "inner", "execute_tool t": "inner"}


@pytest.mark.parametrize("operation", ["generate_content", "text_completion"])
def test_other_model_call_operations_are_chat_spans(operation: str) -> None:
    agent = InstrumentedAgent(operation=operation)
    agent.run("conv-1", LOOPING)
    spans = decode_spans(encode_request(agent.spans()), "otlp_proto")
    assert {span_kind(s) for s in spans if s.name.startswith(operation)} == {"chat"}
    events = bridge_events(export_records(agent.spans()))
    chat_agent = InstrumentedAgent()
    chat_agent.run("conv-1", LOOPING)
    assert events == bridge_events(export_records(chat_agent.spans()))  # as for `chat`
