import assert from "node:assert/strict";
import { test } from "node:test";

import { CircuitBreaker } from "../../src/index.js";

function breaker(k = 3, minOpenMs = 1000): { b: CircuitBreaker; log: string[]; clock: { now: number } } {
  const log: string[] = [];
  const clock = { now: 10_000 };
  return { b: new CircuitBreaker(k, minOpenMs, (m) => log.push(m), () => clock.now), log, clock };
}

test("K consecutive failures open the circuit; a success in between resets the count", () => {
  const { b, log } = breaker();
  b.failure("verdict_timeout");
  b.failure("verdict_timeout");
  b.success();
  b.failure("delivery");
  b.failure("verdict_timeout");
  assert.equal(b.state, "closed");
  assert.equal(b.snapshot().consecutiveFailures, 2);
  b.failure("verdict_timeout");
  assert.equal(b.state, "open");
  assert.equal(b.snapshot().lastOpenedBy, "verdict_timeout");
  b.failure("verdict_timeout"); // more failures while open: no new transition, no new log
  assert.equal(b.snapshot().opens, 1);
  assert.equal(log.length, 1);
  assert.match(log[0]!, /^circuit open after 3 consecutive failures/);
});

test("a verdict closes an open circuit only after the least open time; logged once", () => {
  const { b, log, clock } = breaker(1, 1000);
  b.verdictReceived(); // closed: nothing happens
  b.failure("connect");
  assert.equal(b.state, "open");
  clock.now += 999;
  b.verdictReceived(); // a late verdict right after the opening does not close it
  assert.equal(b.state, "open");
  clock.now += 1;
  b.verdictReceived();
  b.verdictReceived();
  assert.equal(b.state, "closed");
  assert.deepEqual(b.snapshot(), {
    state: "closed",
    consecutiveFailures: 0,
    failureThreshold: 1,
    opens: 1,
    closes: 1,
    lastOpenedBy: "connect",
    changedAt: clock.now,
  });
  assert.equal(log.filter((l) => l.startsWith("circuit closed")).length, 1);
});

test("late verdicts do not reset the count while closed (slow verdicts still open it)", () => {
  const { b } = breaker(2);
  b.failure("verdict_timeout");
  b.verdictReceived();
  b.failure("verdict_timeout");
  assert.equal(b.state, "open");
});

test("the threshold must be an integer >= 1", () => {
  assert.throws(() => new CircuitBreaker(0, 0, () => undefined), RangeError);
  assert.throws(() => new CircuitBreaker(1.5, 0, () => undefined), RangeError);
});
