/** Verdict records as contract §5 defines them, read by `parseVerdict`: the optional
 * fields of later contract versions (`state_reset`, 1.2; a warning's `level`, §9.13) are
 * kept, and a record that breaks their shape is not a verdict. */

import assert from "node:assert/strict";
import { test } from "node:test";

import { parseVerdict } from "../../src/verdict.js";

const BASE = {
  v: 1,
  type: "loop_verdict",
  session_id: "s-1",
  seq: 7,
  agent_id: null,
  event_ts: "2026-12-05T08:00:00+00:00",
  evaluated_at: "2026-12-05T08:00:00.010000+00:00",
  warning: null,
};
const WARNING = {
  rule: "repeated_result",
  tool_names: ["read_file"],
  count: 3,
  threshold: 3,
  message: "You have called read_file 3 times with the same result.",
};

const parse = (record: object) => parseVerdict(JSON.stringify(record));

test("a verdict of contract 1.0 has no state_reset and its warning no level", () => {
  const verdict = parse({ ...BASE, warning: WARNING });
  assert.ok(verdict);
  assert.equal(verdict.state_reset, undefined);
  assert.equal(verdict.warning?.level, undefined);
});

test("state_reset (contract 1.2) is kept when true", () => {
  assert.equal(parse({ ...BASE, state_reset: true })?.state_reset, true);
});

test("state_reset other than true is not a verdict", () => {
  for (const value of [false, "true", 1, null]) {
    assert.equal(parse({ ...BASE, state_reset: value }), null, String(value));
  }
});

test("a warning's escalation level 1-3 is kept; any other is not a verdict", () => {
  for (const level of [1, 2, 3] as const) {
    assert.equal(parse({ ...BASE, warning: { ...WARNING, level } })?.warning?.level, level);
  }
  for (const level of [0, 4, 2.5, "3", null]) {
    assert.equal(parse({ ...BASE, warning: { ...WARNING, level } }), null, String(level));
  }
});
