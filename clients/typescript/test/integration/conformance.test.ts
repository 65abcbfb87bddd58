/**
 * Cross-language conformance: the same sessions published by the Python client and by this
 * one, to the same real broker and worker. The event records must be byte for byte equal
 * (but for the session id), so their fingerprints are too; the worker's verdicts must be
 * the same; and the prompts both clients build must be the same. Every record also fits
 * the JSON Schemas that `loopwatch schema` writes.
 */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import Ajv2020Module from "ajv/dist/2020.js";

import { LoopwatchClient, type Format, type Message, parseJson, type ToolError } from "../../src/index.js";
import { loopwatchCli, PACKAGE_ROOT, pythonPath, REPO_ROOT } from "../support/paths.js";
import { BOOTSTRAP, brokerUnavailable, readTopic, Worker } from "../support/worker.js";

const FIXTURE = join(PACKAGE_ROOT, "test", "fixtures", "conformance.json");
const PUBLISHER = join(PACKAGE_ROOT, "test", "support", "publish_session.py");

interface History {
  format: Format;
  system?: string;
  steps: number[];
  messages: Message[];
}
const fixture = JSON.parse(readFileSync(FIXTURE, "utf8")) as { start: string; histories: History[] };

const skip = await brokerUnavailable();
let worker: Worker | undefined;

before(async () => {
  if (skip === null) worker = await Worker.start();
});
after(async () => {
  await worker?.stop();
});

const toolError: ToolError = (m) =>
  typeof m.content === "string" && m.content.startsWith("Error") ? m.content : null;

function fixedClock(): () => Date {
  const start = Date.parse(fixture.start);
  let tick = 0;
  return () => new Date(start + tick++);
}

async function publishTs(prefix: string, local: boolean): Promise<{ prompts: unknown[][]; complete: boolean[] }> {
  const w = worker as Worker;
  const client = new LoopwatchClient({
    bootstrapServers: BOOTSTRAP,
    eventsTopic: w.env.eventsTopic,
    verdictsTopic: w.env.verdictsTopic,
    localFingerprints: local,
    verdictTimeoutMs: 20_000,
    clock: fixedClock(),
  });
  const out = { prompts: [] as unknown[][], complete: [] as boolean[] };
  try {
    for (const [n, history] of fixture.histories.entries()) {
      const tracker = client.tracker(`${prefix}-${n}`, history.format, history.format === "openai" ? { toolError } : {});
      const prompts: unknown[] = [];
      for (const step of history.steps) {
        prompts.push(await tracker.prompt(history.messages.slice(0, step), history.system));
        out.complete.push(tracker.lastWait?.complete ?? false);
      }
      out.prompts.push(prompts);
    }
  } finally {
    await client.close();
  }
  return out;
}

function publishPy(prefix: string, local: boolean): { prompts: unknown[][]; complete: boolean[] } {
  const w = worker as Worker;
  const run = spawnSync(pythonPath(), [PUBLISHER, FIXTURE, prefix, local ? "1" : "0"], {
    env: w.env.env(),
    cwd: REPO_ROOT,
    encoding: "utf8",
    timeout: 180_000,
  });
  assert.equal(run.status, 0, `python publisher failed: ${run.stderr.slice(-2000)}`);
  return JSON.parse(run.stdout) as { prompts: unknown[][]; complete: boolean[] };
}

function schemas(): { event: (v: unknown) => boolean; verdict: (v: unknown) => boolean } {
  const dir = mkdtempSync(join(tmpdir(), "lw-ts-schema-"));
  const made = spawnSync(loopwatchCli(), ["schema", "--out", dir], { cwd: REPO_ROOT, encoding: "utf8" });
  assert.equal(made.status, 0, made.stderr);
  const Ajv2020 = (Ajv2020Module as unknown as { default: typeof Ajv2020Module }).default ?? Ajv2020Module;
  const ajv = new (Ajv2020 as unknown as new (o: object) => { compile: (s: object) => (v: unknown) => boolean })({
    strict: false,
    validateFormats: false,
  });
  const load = (name: string): object => JSON.parse(readFileSync(join(dir, name), "utf8")) as object;
  return { event: ajv.compile(load("agent-event.schema.json")), verdict: ajv.compile(load("loop-verdict.schema.json")) };
}

for (const local of [false, true]) {
  test(`Python and TypeScript publish the same bytes and get the same verdicts (local fingerprints: ${local})`, { skip: skip ?? false }, async () => {
    const tag = `${Date.now().toString(36)}${local ? "l" : "r"}`;
    // Same length, so the records line up byte for byte once the id is swapped.
    const py = `conf-py-${tag}`;
    const ts = `conf-ts-${tag}`;
    const pyOut = publishPy(py, local);
    const tsOut = await publishTs(ts, local);
    assert.ok(pyOut.complete.every(Boolean) && tsOut.complete.every(Boolean), "every wait got its verdict");
    assert.deepEqual(tsOut.prompts, pyOut.prompts, "the same prompts, warnings placed alike");
    const warned = JSON.stringify(tsOut.prompts).match(/\[loopwatch\] /g) ?? [];
    assert.ok(warned.length >= 3, "the sessions loop: warnings were placed");

    const w = worker as Worker;
    const sessions = fixture.histories.map((_, n) => n);
    // Read back every record of both runs: all events, all verdicts.
    const allEvents = await readAll(w.env.eventsTopic, (key) => key.startsWith(py) || key.startsWith(ts));
    const allVerdicts = await readAll(w.env.verdictsTopic, (key) => key.startsWith(py) || key.startsWith(ts));
    const check = schemas();
    for (const n of sessions) {
      const pyEvents = allEvents.filter((r) => r.key === `${py}-${n}`).map((r) => r.value);
      const tsEvents = allEvents.filter((r) => r.key === `${ts}-${n}`).map((r) => r.value);
      assert.ok(pyEvents.length >= 5, `session ${n}: ${pyEvents.length} events`);
      assert.deepEqual(
        tsEvents,
        pyEvents.map((v) => v.split(`"${py}-${n}"`).join(`"${ts}-${n}"`)),
        `session ${n}: byte-equal event records`,
      );
      for (const value of tsEvents) assert.ok(check.event(parseJson(value) as unknown), `fits agent-event schema: ${value.slice(0, 80)}`);
      const verdictsOf = (id: string): unknown[] =>
        allVerdicts
          .filter((r) => r.key === id)
          .map((r) => JSON.parse(r.value) as Record<string, unknown>)
          .map((v) => {
            assert.ok(check.verdict(v), "fits loop-verdict schema");
            const { session_id: _s, evaluated_at: _e, ...rest } = v;
            return rest;
          });
      const pyVerdicts = verdictsOf(`${py}-${n}`);
      assert.equal(pyVerdicts.length, pyEvents.length, "one verdict per event");
      assert.deepEqual(verdictsOf(`${ts}-${n}`), pyVerdicts, `session ${n}: the same verdicts`);
    }
    if (local) {
      const withDigests = allEvents.filter((r) => r.key.startsWith(ts) && r.value.includes('"fingerprint": "sha256:'));
      assert.ok(withDigests.length >= 3, "local fingerprints were sent");
      assert.ok(allEvents.every((r) => !r.value.includes("permission denied")), "no raw content left the runtime");
    }
  });
}

/** Every record of a topic so far whose key passes `keep` (reads to the end offsets). */
async function readAll(topic: string, keep: (key: string) => boolean): Promise<{ key: string; value: string }[]> {
  const { default: kafkajs } = await import("kafkajs");
  const kafka = new kafkajs.Kafka({ brokers: BOOTSTRAP.split(","), logLevel: kafkajs.logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  const ends = await admin.fetchTopicOffsets(topic);
  await admin.disconnect();
  const total = ends.reduce((sum, e) => sum + Number(e.offset), 0);
  const records = await readTopic(topic, total, 60_000);
  return records.filter((r) => keep(r.key));
}
