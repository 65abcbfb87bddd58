"""`ConversationSpanProcessor`: an OpenTelemetry SDK span processor for the agent's process
that copies the conversation and agent ids down to every span started under a span that
has them, so that `execute_tool` spans carry them too.

The GenAI semantic conventions put `gen_ai.conversation.id` and `gen_ai.agent.*` on the
`invoke_agent` and inference (`chat`) spans, not on `execute_tool` spans. The bridge
keys a span by its own attributes (docs/contract.md §10.3), so a tool span without them
falls back to its trace id: one session per trace, and a loop that spans several traces
(one per user message, say) is never seen whole. Guessing the conversation on the bridge
from other spans of the trace would depend on which records arrive first and would make
a replay key a span under another session; copying the ids where the parent span is
known (in the process, at the span's start) is exact.

    from opentelemetry.sdk.trace import TracerProvider
    from loopwatch.streams.otel.conversation import ConversationSpanProcessor

    provider = TracerProvider()
    provider.add_span_processor(ConversationSpanProcessor())  # before the exporter's
    ...

Needs the OpenTelemetry SDK (the `otel` extra, or the agent's own). Ids set on the span
itself, at its start or later, win over the copied ones. Parents in another process
(a remote span context) carry no attributes: nothing is copied from them.
"""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from loopwatch.streams.otel.mapping import AGENT_ID, AGENT_NAME, CONVERSATION_ID

COPIED = (CONVERSATION_ID, AGENT_ID, AGENT_NAME)
"""The attributes copied from the parent span when the new span has none of its own."""


class ConversationSpanProcessor(SpanProcessor):
    """Copies `gen_ai.conversation.id`, `gen_ai.agent.id` and `gen_ai.agent.name` from
    the parent span (in this process) to each span started under it that lacks them.

    Every descendant gets them, not only GenAI spans: a framework's own spans between the
    agent span and a tool span pass them on."""

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        parent = trace.get_current_span(parent_context)
        inherited = getattr(parent, "attributes", None)  # SDK spans only; none when remote
        if not inherited:
            return
        own = span.attributes or {}
        for key in COPIED:
            value = inherited.get(key)
            if value is not None and key not in own:
                span.set_attribute(key, value)

    def on_end(self, span: ReadableSpan) -> None:
        return None

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
