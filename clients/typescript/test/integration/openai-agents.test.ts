/**
 * The OpenAI Agents SDK adapter with the real `@openai/agents` package, its Chat
 * Completions model pointed at a local stub of the API, and a real broker and worker: an
 * agent looping on the same failing edit gets the warning in its very next model request,
 * and the run's history never contains it.
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { Agent, OpenAIChatCompletionsModel, run, setTracingDisabled, tool } from "@openai/agents";
import OpenAI from "openai";
import { z } from "zod";

import { loopwatchInputFilter } from "../../src/adapters/openai-agents.js";
import { LoopwatchClient } from "../../src/index.js";
import { ModelStub } from "../support/model-stub.js";
import { BOOTSTRAP, brokerUnavailable, Worker } from "../support/worker.js";

setTracingDisabled(true); // no trace export: nothing leaves this machine

const skip = await brokerUnavailable();
let worker: Worker | undefined;
before(async () => {
  if (skip === null) worker = await Worker.start();
});
after(async () => {
  await worker?.stop();
});

test("openai-agents: the warning reaches the very next request, never the run's history", { skip: skip ?? false }, async () => {
  const stub = new ModelStub(4);
  const baseURL = await stub.start();
  const client = new LoopwatchClient({
    bootstrapServers: BOOTSTRAP,
    eventsTopic: (worker as Worker).env.eventsTopic,
    verdictsTopic: (worker as Worker).env.verdictsTopic,
    verdictTimeoutMs: 10_000,
  });
  try {
    let edits = 0;
    const editFile = tool({
      name: "edit_file",
      description: "Replace text in a file",
      parameters: z.object({ path: z.string(), old: z.string(), new: z.string() }),
      execute: async (): Promise<string> => {
        edits++;
        throw new Error("old_string not found in src/app.py");
      },
    });
    const agent = new Agent({
      name: "coder",
      instructions: "You are a coding agent.",
      model: new OpenAIChatCompletionsModel(new OpenAI({ baseURL, apiKey: "test-key" }), "stub-model"),
      tools: [editFile],
    });
    const result = await run(agent, "Change x to 2 in src/app.py.", {
      maxTurns: 10,
      callModelInputFilter: loopwatchInputFilter({ client, sessionId: `agents-${Date.now()}` }),
    });
    assert.equal(edits, 4);
    assert.equal(stub.requests.length, 5);
    assert.deepEqual(stub.warnings(0), []);
    assert.deepEqual(stub.warnings(1), [], "one failure is not a loop");
    const third = stub.warnings(2);
    assert.equal(third.length, 1, JSON.stringify(stub.requests[2]));
    assert.match(third[0]!.text, /edit_file/);
    const messages = stub.requests[2]!.messages;
    assert.equal(third[0]!.at, messages.length - 1, "right after the failing tool result");
    assert.equal(messages[third[0]!.at - 1]!.role, "tool");
    assert.ok(stub.warnings(3).length > third.length);
    assert.deepEqual(stub.requests[3]!.messages.slice(0, messages.length), messages, "a stable prefix");
    assert.ok(result.history.length >= 9);
    assert.ok(!JSON.stringify(result.history).includes("[loopwatch]"), "the run's history holds no warning");
    assert.equal(client.stats().timeouts, 0);
  } finally {
    await client.close();
    await stub.stop();
  }
});
