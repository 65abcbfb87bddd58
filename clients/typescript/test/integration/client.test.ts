/**
 * The TypeScript client against the real broker and a real `loopwatch worker`: an agent
 * looping on the same failing edit gets its warning placed in the next prompt; the wait
 * with a closed circuit returns as soon as the verdict is there.
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import kafkajs from "kafkajs";

import { LoopwatchClient, MARKER, type Message } from "../../src/index.js";
import { MemoryLogger } from "../support/log.js";
import { BOOTSTRAP, brokerUnavailable, Worker } from "../support/worker.js";

const skip = await brokerUnavailable();
let worker: Worker | undefined;
let client: LoopwatchClient | undefined;
const logger = new MemoryLogger();

before(async () => {
  if (skip !== null) return;
  worker = await Worker.start();
  client = new LoopwatchClient({
    bootstrapServers: process.env.KAFKA_BOOTSTRAP_SERVERS ?? "127.0.0.1:9092",
    eventsTopic: worker.env.eventsTopic,
    verdictsTopic: worker.env.verdictsTopic,
    verdictTimeoutMs: 10_000, // generous on a loaded 2-core machine; the wait returns at the verdict
    logger,
  });
});

after(async () => {
  await client?.close();
  await worker?.stop();
});

/** One turn of an agent that keeps making the same failing edit (OpenAI Chat format). */
function failingEditTurn(history: Message[], turn: number): void {
  const id = `call_${turn}`;
  history.push({
    role: "assistant",
    content: null,
    tool_calls: [
      { id, type: "function", function: { name: "edit_file", arguments: '{"path": "src/app.py", "old": "x = 1", "new": "x = 2"}' } },
    ],
  });
  history.push({ role: "tool", tool_call_id: id, content: "Error: old_string not found in src/app.py" });
}

test("a looping agent gets its warning placed in the next prompt, never in its history", { skip: skip ?? false }, async () => {
  const c = client as LoopwatchClient;
  const tracker = c.tracker(`ts-loop-${Date.now()}`, "openai", {
    // Chat tool messages carry no error flag: this runtime marks failures by their text.
    toolError: (m) => (typeof m.content === "string" && m.content.startsWith("Error:") ? m.content : null),
  });
  const history: Message[] = [
    { role: "system", content: "You are a coding agent." },
    { role: "user", content: "Make the test pass." },
  ];
  const prompts: Record<string, unknown>[][] = [];
  prompts.push(await tracker.prompt(history));
  for (let turn = 0; turn < 3; turn++) {
    failingEditTurn(history, turn);
    prompts.push(await tracker.prompt(history));
    assert.equal(tracker.lastWait?.complete, true, `turn ${turn}: the verdict arrived`);
  }
  const warningsIn = (p: Record<string, unknown>[]): string[] =>
    p.filter((m) => m.role === "system" && String(m.content).startsWith(MARKER)).map((m) => String(m.content));
  assert.deepEqual(warningsIn(prompts[0]!), []);
  assert.deepEqual(warningsIn(prompts[1]!), [], "one failure is not a loop");
  // Second identical failure: rule 1 (repeated_failed_mutation, threshold 2) in the very next prompt.
  const second = warningsIn(prompts[2]!);
  assert.equal(second.length, 1, JSON.stringify(prompts[2]));
  assert.match(second[0]!, /edit_file/);
  // Placed right after the failing tool result, i.e. last in this prompt.
  assert.equal(prompts[2]!.at(-1)!.content, second[0]);
  // The third prompt keeps the earlier warning where it was and appends the new ones (the
  // rule still matches at the repeated call and again at its failed result).
  const third = warningsIn(prompts[3]!);
  assert.equal(third.length, 3);
  assert.deepEqual(prompts[3]!.slice(0, prompts[2]!.length), prompts[2]);
  // The stored history never holds a warning.
  assert.ok(history.every((m) => !String(m.content ?? "").startsWith(MARKER)));
  const stats = c.stats();
  assert.equal(stats.circuit.state, "closed");
  assert.equal(stats.timeouts, 0);
  assert.ok(stats.published >= 8, JSON.stringify(stats));
  assert.equal(stats.warnings.repeated_failed_mutation, 3);
});

test("bad records on the verdicts topic are skipped and counted, never thrown", { skip: skip ?? false }, async () => {
  const c = client as LoopwatchClient;
  const id = `ts-bad-${Date.now()}`;
  const session = c.openSession(id);
  session.user("hello", { messageIndex: 0 });
  assert.equal((await session.verdicts()).complete, true); // connected and reading
  const before = c.stats().badRecords;
  const kafka = new kafkajs.Kafka({ brokers: BOOTSTRAP.split(","), logLevel: kafkajs.logLevel.NOTHING });
  const producer = kafka.producer();
  await producer.connect();
  await producer.send({
    topic: (worker as Worker).env.verdictsTopic,
    messages: [
      { key: id, value: "not json {" },
      { key: id, value: JSON.stringify({ type: "loop_verdict", session_id: id, seq: "1" }) },
    ],
  });
  await producer.disconnect();
  // The session's next event still gets its verdict, after the bad records were read.
  session.user("again", { messageIndex: 1 });
  const wait = await session.verdicts();
  assert.equal(wait.complete, true);
  assert.equal(c.stats().badRecords - before, 2);
  assert.ok(logger.lines.some((l) => l.startsWith("verdict reader: undecodable verdict at offset")));
  assert.ok(logger.lines.every((l) => !l.includes("not json")), "no record content in the log");
  session.end();
});

test("measured: the wait a model call adds with the circuit closed (real worker)", { skip: skip ?? false }, async () => {
  const c = client as LoopwatchClient;
  const tracker = c.tracker(`ts-measure-${Date.now()}`, "openai");
  const history: Message[] = [{ role: "user", content: "go" }];
  const waits: number[] = [];
  for (let i = 0; i < 30; i++) {
    history.push({
      role: "assistant",
      content: null,
      tool_calls: [{ id: `m${i}`, type: "function", function: { name: "read_file", arguments: JSON.stringify({ path: `f${i}.py` }) } }],
    });
    history.push({ role: "tool", tool_call_id: `m${i}`, content: `contents of f${i}` });
    await tracker.prompt(history);
    assert.equal(tracker.lastWait?.complete, true);
    waits.push(tracker.lastWait!.waitedMs);
  }
  const sorted = [...waits].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  console.log(
    `# circuit closed, real worker: ${waits.length} model calls (2 events each), verdict wait ` +
      `p50 ${at(0.5).toFixed(1)} ms, p95 ${at(0.95).toFixed(1)} ms, max ${sorted.at(-1)!.toFixed(1)} ms`,
  );
  assert.equal(c.stats().circuit.state, "closed");
});
