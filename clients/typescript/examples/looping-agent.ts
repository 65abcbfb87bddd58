/**
 * A TypeScript agent stuck on the same failing edit, with loopwatch placing its warning
 * into the next model request (OpenAI Chat format; the "model" is scripted here).
 *
 *     node dist/examples/looping-agent.js
 *
 * Broker and topics from KAFKA_BOOTSTRAP_SERVERS, LOOPWATCH_EVENTS_TOPIC and
 * LOOPWATCH_VERDICTS_TOPIC (the worker's settings). With a worker running it prints the
 * warning the model would see; without one (or without a broker) it runs to completion
 * anyway: the first verdict waits time out, the circuit opens, the rest do not wait.
 */

import { LoopwatchClient, MARKER, type Message } from "../src/index.js";

const client = LoopwatchClient.shared({ verdictTimeoutMs: Number(process.env.LOOPWATCH_VERDICT_TIMEOUT_MS ?? 1000) });
const tracker = client.tracker(`example-${Date.now()}`, "openai", {
  // Chat tool messages have no error flag: this agent's tools start failures with "Error:".
  toolError: (m) => (typeof m.content === "string" && m.content.startsWith("Error:") ? m.content : null),
});

const history: Message[] = [{ role: "user", content: "Change x to 2 in src/app.py." }];
for (let turn = 1; turn <= 4; turn++) {
  const started = performance.now();
  const prompt = await tracker.prompt(history); // send this to the model; store `history`
  const waited = performance.now() - started;
  const warnings = prompt.filter((m) => typeof m.content === "string" && m.content.startsWith(MARKER));
  console.log(`model call ${turn}: ${prompt.length} messages, ${warnings.length} warning(s), waited ${waited.toFixed(0)} ms`);
  if (warnings.length > 0) console.log(`  the model reads: ${String(warnings.at(-1)?.content)}`);
  // The scripted model makes the same edit again; the tool fails again.
  const id = `call_${turn}`;
  history.push({
    role: "assistant",
    content: null,
    tool_calls: [{ id, type: "function", function: { name: "edit_file", arguments: '{"path": "src/app.py", "old": "x = 1", "new": "x = 2"}' } }],
  });
  history.push({ role: "tool", tool_call_id: id, content: "Error: old_string not found" });
}
const stats = client.stats();
console.log(
  `done: ${stats.published} events published, ${stats.timeouts} waits timed out, ` +
    `${stats.skippedWaits} skipped with the circuit ${stats.circuit.state}`,
);
await client.close();
