/** Counters of one client (what a runtime reports), with the breaker's state. */

import type { BreakerSnapshot } from "./breaker.js";

const WAITS_KEPT = 10_000;

export class ClientStats {
  /** Events acknowledged by the broker. */
  published = 0;
  /** Failed delivery attempts (a batch the producer gave up on; it is retried). */
  publishErrors = 0;
  /** Events dropped from a full buffer (oldest first) or that could not be encoded. */
  dropped = 0;
  /** Verdict waits (each `verdicts()` call). */
  waits = 0;
  /** Waits that ended without their verdict (fail-open). */
  timeouts = 0;
  /** Waits that did not wait because the circuit was open. */
  skippedWaits = 0;
  /** Records on the verdicts topic that did not decode (skipped). */
  badRecords = 0;
  /** Warnings received, by rule. */
  readonly warnings = new Map<string, number>();
  /** Durations of recent verdict waits, ms. */
  readonly waitMs: number[] = [];

  recordWait(ms: number, complete: boolean, skipped: boolean): void {
    this.waits += 1;
    if (skipped) this.skippedWaits += 1;
    else if (!complete) this.timeouts += 1;
    this.waitMs.push(ms);
    if (this.waitMs.length > WAITS_KEPT) this.waitMs.shift();
  }

  warning(rule: string): void {
    this.warnings.set(rule, (this.warnings.get(rule) ?? 0) + 1);
  }

  /** The `fraction` (0-1) quantile of recent waits (nearest rank), ms; null without any. */
  waitPercentile(fraction: number): number | null {
    if (this.waitMs.length === 0) return null;
    const ordered = [...this.waitMs].sort((a, b) => a - b);
    const rank = Math.min(ordered.length - 1, Math.max(0, Math.round(fraction * ordered.length) - 1));
    return ordered[rank] ?? null;
  }
}

/** A point-in-time copy of the client's counters and breaker (`client.stats()`). */
export interface StatsSnapshot {
  published: number;
  publishErrors: number;
  dropped: number;
  /** Events waiting in the buffer for delivery now. */
  buffered: number;
  waits: number;
  timeouts: number;
  skippedWaits: number;
  badRecords: number;
  warnings: Record<string, number>;
  /** True once the producer and the verdict reader are connected. */
  connected: boolean;
  circuit: BreakerSnapshot;
}
