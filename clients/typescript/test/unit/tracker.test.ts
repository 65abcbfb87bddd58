/** The tracker and session without Kafka: what gets published, and where warnings land. */
import assert from "node:assert/strict";
import { test } from "node:test";

import { CircuitBreaker, EventEncoder, HistoryTracker, type LoopVerdict, type Message, Session } from "../../src/index.js";
import { ClientStats } from "../../src/stats.js";

function setup(): { session: Session; sent: Record<string, unknown>[]; tracker: HistoryTracker } {
  const sent: Record<string, unknown>[] = [];
  const session = new Session({
    sessionId: "s",
    encoder: new EventEncoder("s", null, false),
    send: (_id, record) => sent.push(JSON.parse(record) as Record<string, unknown>),
    onClose: () => undefined,
    stats: new ClientStats(),
    breaker: new CircuitBreaker(3, 0, () => undefined),
    clock: () => new Date(Date.UTC(2026, 0, 1)),
    defaultTimeoutMs: 50,
    firstSeq: 0,
    logTimeouts: false,
    warn: () => undefined,
  });
  return { session, sent, tracker: new HistoryTracker(session, "openai") };
}

function verdict(seq: number, message: string | null): LoopVerdict {
  return {
    v: 1,
    type: "loop_verdict",
    session_id: "s",
    seq,
    agent_id: null,
    event_ts: "2026-01-01T00:00:00+00:00",
    evaluated_at: "2026-01-01T00:00:00+00:00",
    warning: message === null ? null : { rule: "repeated_result", tool_names: ["bash"], count: 3, threshold: 3, message },
  };
}

const call = (id: string): Message => ({
  role: "assistant",
  content: null,
  tool_calls: [{ id, type: "function", function: { name: "bash", arguments: '{"cmd": "make"}' } }],
});
const result = (id: string): Message => ({ role: "tool", tool_call_id: id, content: "exit 2" });

test("each message is published once; trimmed histories keep their numbers", async () => {
  const { session, sent, tracker } = setup();
  const history: Message[] = [{ role: "user", content: "go" }, call("a"), result("a")];
  tracker.publish(history);
  tracker.publish(history);
  assert.deepEqual(sent.map((e) => e.type), ["user_message", "assistant_message", "tool_result"]);
  assert.equal(sent[2]!.tool_name, "bash");
  // The verdict of the tool result warns; it is placed after the tool message.
  for (const seq of [0, 1]) session.onVerdict(verdict(seq, null));
  session.onVerdict(verdict(2, "Same result 3 times."));
  const prompt = await tracker.prompt(history);
  assert.deepEqual(prompt.at(-1), { role: "system", content: "[loopwatch] Same result 3 times." });
  // The runtime trims the first message and appends two: only those two are new.
  const trimmed = [...history.slice(1), call("b"), result("b")];
  const wait = tracker.prompt(trimmed);
  assert.equal(sent.length, 5);
  session.onVerdict(verdict(4, null));
  const second = await wait;
  assert.equal(tracker.lastWait?.complete, true);
  // The warning stays after the same tool message (now at index 1 of the trimmed history).
  assert.deepEqual(second[2], { role: "system", content: "[loopwatch] Same result 3 times." });
  assert.ok(trimmed.every((m) => m.role !== "system"), "the history itself is untouched");
});

test("a wait without its verdict gives up at its deadline and reports it", async () => {
  const { tracker } = setup();
  const started = performance.now();
  const prompt = await tracker.prompt([{ role: "user", content: "go" }]);
  const waited = performance.now() - started;
  assert.equal(tracker.lastWait?.complete, false);
  assert.ok(waited >= 45 && waited < 1000, `${waited}`);
  assert.deepEqual(prompt, [{ role: "user", content: "go" }]);
});
