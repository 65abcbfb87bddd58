/** Records of contract 1.3 written by the TypeScript encoder byte for byte as the Python
 * client's `EventEncoder` writes them: `context_condensed`, and an assistant's text sent
 * as its `text_fingerprint` under local fingerprints. Needs the Python venv; skips without
 * it unless CI=true. */

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";

import { EventEncoder } from "../../src/index.js";
import { havePython, pythonPath, REPO_ROOT } from "../support/paths.js";

if (!havePython() && process.env.CI === "true") throw new Error(`CI=true: no Python at ${pythonPath()}`);

const TS = new Date(Date.UTC(2026, 11, 5, 8, 0, 0, 123));
const PYTHON = `
from datetime import datetime, timezone
from loopwatch.streams.client.encoding import EventEncoder
ts = datetime(2026, 12, 5, 8, 0, 0, 123000, tzinfo=timezone.utc)
enc = EventEncoder(session_id="s-1", agent_id="a", local_fingerprints=True)
print(enc.condensed(3, ts).decode())
print(enc.assistant(4, ts, "  I am stuck.\\r\\n", []).decode())
`;

test("context_condensed and a fingerprinted text equal the Python client's records", { skip: havePython() ? false : "no Python venv" }, () => {
  const run = spawnSync(pythonPath(), ["-c", PYTHON], { cwd: REPO_ROOT, encoding: "utf8" });
  assert.equal(run.status, 0, run.stderr);
  const enc = new EventEncoder("s-1", "a", true);
  const ours = [enc.condensed(3, TS), enc.assistant(4, TS, "  I am stuck.\r\n", [])];
  assert.deepEqual(ours, run.stdout.trimEnd().split("\n"));
  assert.ok(!ours.join("").includes("stuck"));
});
