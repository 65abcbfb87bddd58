/**
 * The pure parts against the Python client's: history -> events, and warning placement at
 * every message of the conformance histories, compared as canonical JSON text (so 1 and
 * 1.0 must match too). Needs the Python venv (not the broker); skips without it unless
 * CI=true.
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

import {
  canonicalJson,
  type Format,
  type HistoryEvent,
  historyEvents,
  type Message,
  parseJson,
  placeAnthropic,
  placeOpenai,
  placeResponses,
  type ToolError,
} from "../../src/index.js";
import { havePython, PACKAGE_ROOT, pythonPath, REPO_ROOT } from "../support/paths.js";

const FIXTURE = join(PACKAGE_ROOT, "test", "fixtures", "conformance.json");
const PLACE = { openai: placeOpenai, anthropic: placeAnthropic, responses: placeResponses };
const toolError: ToolError = (m) =>
  typeof m.content === "string" && m.content.startsWith("Error") ? m.content : null;

if (!havePython() && process.env.CI === "true") throw new Error(`CI=true: no Python at ${pythonPath()}`);

function body(e: HistoryEvent): Record<string, unknown> {
  if (e.kind === "assistant_message") {
    return { text: e.text, tool_calls: e.calls.map((c) => ({ id: c.id, name: c.name, arguments: c.arguments ?? {} })) };
  }
  if (e.kind === "tool_result") return { call_id: e.callId, tool_name: e.toolName, result: e.result, error: e.error };
  return { text: e.text };
}

test("history events and placements equal the Python client's", { skip: havePython() ? false : "no Python venv" }, () => {
  const run = spawnSync(pythonPath(), [join(PACKAGE_ROOT, "test", "support", "pure_python.py"), FIXTURE], {
    cwd: REPO_ROOT,
    encoding: "utf8",
  });
  assert.equal(run.status, 0, run.stderr);
  const expected = JSON.parse(run.stdout) as { events: string[]; single: string[]; every: string }[];
  // Parsed like the Python side reads it: 1.0 stays a float.
  const fixture = parseJson(readFileSync(FIXTURE, "utf8")) as unknown as {
    histories: { format: Format; messages: Message[] }[];
  };
  assert.equal(expected.length, fixture.histories.length);
  fixture.histories.forEach((history, n) => {
    const want = expected[n]!;
    const events = historyEvents(history.messages, history.format, history.format === "openai" ? toolError : undefined);
    const got = events.map((e) => canonicalJson({ kind: e.kind, message_index: e.messageIndex, ...body(e) }));
    assert.deepEqual(got, want.events, `history ${n}: events`);
    const place = PLACE[history.format];
    history.messages.forEach((_, i) => {
      const placed = canonicalJson(place(history.messages, new Map([[i, [`w${i}`, "again"]]])));
      assert.equal(placed, want.single[i], `history ${n}: a warning at message ${i}`);
    });
    const all = new Map(history.messages.map((_, i) => [i, [`w${i}`]]));
    assert.equal(canonicalJson(place(history.messages, all)), want.every, `history ${n}: warnings everywhere`);
  });
});
