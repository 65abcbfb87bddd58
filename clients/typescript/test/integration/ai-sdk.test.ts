/**
 * The Vercel AI SDK adapter with the real `ai` package, its OpenAI provider pointed at a
 * local stub of the Chat Completions API, and a real broker and worker: an agent looping
 * on the same failing edit gets the warning in its very next model request, and the SDK's
 * own messages never contain it.
 */

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { createOpenAI } from "@ai-sdk/openai";
import { generateText, stepCountIs, tool, wrapLanguageModel } from "ai";
import { z } from "zod";

import { loopwatchMiddleware } from "../../src/adapters/ai-sdk.js";
import { LoopwatchClient } from "../../src/index.js";
import { ModelStub } from "../support/model-stub.js";
import { BOOTSTRAP, brokerUnavailable, Worker } from "../support/worker.js";

const skip = await brokerUnavailable();
let worker: Worker | undefined;
before(async () => {
  if (skip === null) worker = await Worker.start();
});
after(async () => {
  await worker?.stop();
});

test("ai-sdk: the warning reaches the very next request, never the stored messages", { skip: skip ?? false }, async () => {
  const stub = new ModelStub(4);
  const baseURL = await stub.start();
  const client = new LoopwatchClient({
    bootstrapServers: BOOTSTRAP,
    eventsTopic: (worker as Worker).env.eventsTopic,
    verdictsTopic: (worker as Worker).env.verdictsTopic,
    verdictTimeoutMs: 10_000,
  });
  try {
    const openai = createOpenAI({ baseURL, apiKey: "test-key" });
    const model = wrapLanguageModel({
      model: openai.chat("stub-model"),
      middleware: loopwatchMiddleware({ client, sessionId: `ai-sdk-${Date.now()}` }),
    });
    let edits = 0;
    const result = await generateText({
      model,
      system: "You are a coding agent.",
      prompt: "Change x to 2 in src/app.py.",
      tools: {
        edit_file: tool({
          description: "Replace text in a file",
          inputSchema: z.object({ path: z.string(), old: z.string(), new: z.string() }),
          execute: async (): Promise<string> => {
            edits++;
            throw new Error("old_string not found in src/app.py");
          },
        }),
      },
      stopWhen: stepCountIs(10),
    });
    assert.equal(edits, 4);
    assert.equal(stub.requests.length, 5);
    // Requests 0 and 1: no loop yet (one failure is not a loop).
    assert.deepEqual(stub.warnings(0), []);
    assert.deepEqual(stub.warnings(1), []);
    // Request 2 follows the second identical failure: the warning is in it, right after
    // the failing tool result, i.e. as its last message.
    const third = stub.warnings(2);
    assert.equal(third.length, 1, JSON.stringify(stub.requests[2]));
    assert.match(third[0]!.text, /edit_file/);
    const messages = stub.requests[2]!.messages;
    assert.equal(third[0]!.at, messages.length - 1);
    assert.equal(messages[third[0]!.at - 1]!.role, "tool");
    // Later requests keep it in place (a stable prefix) and append new ones.
    const fourth = stub.warnings(3);
    assert.ok(fourth.length > third.length);
    assert.deepEqual(stub.requests[3]!.messages.slice(0, messages.length), messages);
    // The SDK's own history never holds a warning.
    assert.ok(result.response.messages.length >= 8);
    assert.ok(!JSON.stringify(result.response.messages).includes("[loopwatch]"));
    assert.ok(result.steps.every((s) => !JSON.stringify(s.response.messages).includes("[loopwatch]")));
    assert.equal(client.stats().timeouts, 0);
  } finally {
    await client.close();
    await stub.stop();
  }
});
