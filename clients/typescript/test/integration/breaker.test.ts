/**
 * Fail-open and the circuit breaker for real: with no broker at all, an agent runs to
 * completion, and once the circuit opens its model calls wait for nothing; with the
 * broker up but no worker, the circuit opens, and it closes again once a real worker
 * starts and its verdicts flow.
 */

import assert from "node:assert/strict";
import { test } from "node:test";

import { LoopwatchClient, type Message } from "../../src/index.js";
import { MemoryLogger } from "../support/log.js";
import { until } from "../support/until.js";
import { BOOTSTRAP, brokerUnavailable, freePort, Worker, WorkerEnv } from "../support/worker.js";

const TIMEOUT_MS = 300;
const K = 3;

function turn(history: Message[], i: number): void {
  history.push({
    role: "assistant",
    content: null,
    tool_calls: [{ id: `c${i}`, type: "function", function: { name: "edit_file", arguments: '{"path":"a.py"}' } }],
  });
  history.push({ role: "tool", tool_call_id: `c${i}`, content: "Error: old_string not found" });
}

test("broker down: K waits time out, then the circuit opens and calls add no wait", async () => {
  const logger = new MemoryLogger();
  const client = new LoopwatchClient({
    bootstrapServers: `127.0.0.1:${await freePort()}`,
    eventsTopic: "unused-events",
    verdictsTopic: "unused-verdicts",
    verdictTimeoutMs: TIMEOUT_MS,
    failureThreshold: K,
    probeIntervalMs: 200,
    maxBuffered: 10,
    logTimeouts: false,
    logger,
  });
  const tracker = client.tracker("down-1", "openai");
  const history: Message[] = [{ role: "user", content: "fix it" }];
  const durations: number[] = [];
  for (let i = 0; i < 20; i++) {
    turn(history, i);
    const started = performance.now();
    const prompt = await tracker.prompt(history);
    durations.push(performance.now() - started);
    assert.equal(prompt.length, history.length, "no verdicts, no warnings: the prompt is the history");
  }
  const stats = client.stats();
  assert.equal(stats.circuit.state, "open");
  assert.equal(stats.circuit.opens, 1);
  assert.equal(stats.connected, false);
  // Connection failures count too, so the circuit may open before the K-th wait.
  assert.ok(stats.timeouts >= 1 && stats.timeouts <= K, JSON.stringify(stats));
  assert.equal(stats.timeouts + stats.skippedWaits, 20);
  const waited = durations.slice(0, stats.timeouts);
  const open = durations.slice(stats.timeouts);
  for (const d of waited) assert.ok(d >= TIMEOUT_MS - 5, `a closed-circuit wait lasts its timeout: ${d}`);
  for (const d of open) assert.ok(d < 50, `an open-circuit call adds no wait: ${d.toFixed(2)} ms`);
  // Bounded buffer: 1 + 40 events queued, 10 kept, the oldest dropped and counted.
  assert.equal(stats.buffered, 10);
  assert.equal(stats.dropped, 41 - 10);
  assert.equal(logger.lines.filter((l) => l.startsWith("circuit open")).length, 1, logger.lines.join("\n"));
  assert.equal(logger.lines.filter((l) => l.startsWith("cannot connect")).length, 1, logger.lines.join("\n"));
  const mean = open.reduce((a, b) => a + b, 0) / open.length;
  console.log(
    `# broker down: ${waited.length} waits of ~${TIMEOUT_MS} ms, then ${open.length} calls with the circuit open: ` +
      `mean ${mean.toFixed(3)} ms, max ${Math.max(...open).toFixed(3)} ms added per call`,
  );
  const closing = performance.now();
  await client.close();
  const closeMs = performance.now() - closing;
  assert.ok(closeMs < 3000, `close() with the broker down is bounded: ${closeMs}`);
});

const skip = await brokerUnavailable();

test("worker down: the circuit opens; a real worker starts, verdicts flow, it closes", { skip: skip ?? false }, async () => {
  // Topics first (as the worker would), so the client connects; the worker comes later.
  const env = new WorkerEnv(await freePort());
  const { spawnSync } = await import("node:child_process");
  const { loopwatchCli, REPO_ROOT } = await import("../support/paths.js");
  const created = spawnSync(loopwatchCli(), ["topics", "create"], { env: env.env(), cwd: REPO_ROOT, encoding: "utf8" });
  assert.equal(created.status, 0, created.stderr);
  const logger = new MemoryLogger();
  const client = new LoopwatchClient({
    bootstrapServers: BOOTSTRAP,
    eventsTopic: env.eventsTopic,
    verdictsTopic: env.verdictsTopic,
    verdictTimeoutMs: TIMEOUT_MS,
    failureThreshold: K,
    probeIntervalMs: 200,
    logTimeouts: false,
    logger,
  });
  let worker: Worker | undefined;
  try {
    const session = client.openSession(`recover-${Date.now()}`);
    for (let i = 0; i < K + 2; i++) {
      session.user(`turn ${i}`, { messageIndex: i });
      await session.verdicts();
    }
    assert.equal(client.stats().circuit.state, "open");
    // Published means acknowledged by the broker, which may come after the waits gave up
    // (the client's first connection to just-created topics).
    await until(
      () => client.stats().published >= K + 2,
      30_000,
      () => `events are still published with the circuit open: ${JSON.stringify(client.stats())}`,
    );
    assert.equal(client.stats().circuit.state, "open", "published events alone do not close it");
    worker = await Worker.startWith(env);
    // The worker works through the backlog; its verdicts close the circuit.
    await logger.waitFor("circuit closed", 60_000);
    const i = K + 2;
    assert.equal(client.stats().circuit.state, "closed", logger.lines.join("\n"));
    session.user("after recovery", { messageIndex: i });
    const wait = await session.verdicts({ timeoutMs: 10_000 });
    assert.equal(wait.complete, true, "waits resume and get their verdicts");
    const stats = client.stats();
    assert.equal(stats.circuit.opens, 1);
    assert.equal(stats.circuit.closes, 1);
    assert.equal(logger.lines.filter((l) => l.startsWith("circuit closed")).length, 1);
  } finally {
    await client.close();
    if (worker !== undefined) await worker.stop();
    else {
      const { deleteTopics } = await import("../support/worker.js");
      await deleteTopics(env.prefix);
    }
  }
});
