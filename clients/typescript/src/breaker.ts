/**
 * The client's circuit breaker (README.md, "Circuit breaker", is the specification).
 *
 *   closed --(K consecutive failures)--> open --(a verdict arrives)--> closed
 *
 * A failure is a verdict wait that ended without its verdict, or a failed delivery
 * attempt (connecting, or a send the producer gave up on). A verdict wait that got its
 * verdict resets the count. While open, verdict waits do not wait at all; events are
 * still published best-effort, and the first verdict that arrives for any session of
 * the client once the circuit has been open for `minOpenMs` closes it (a verdict that
 * merely arrives late, right after the opening, does not). Each transition is logged once.
 */

export type CircuitState = "closed" | "open";
export type FailureKind = "verdict_timeout" | "delivery" | "connect";

export interface BreakerSnapshot {
  state: CircuitState;
  /** Failures in a row while closed (0 after a verdict wait that got its verdict). */
  consecutiveFailures: number;
  /** The K that opens the circuit. */
  failureThreshold: number;
  /** Times the circuit opened / closed since the client started. */
  opens: number;
  closes: number;
  /** The kind of the failure that opened it last (null before the first opening). */
  lastOpenedBy: FailureKind | null;
  /** When the state last changed (ms since the epoch; null: never). */
  changedAt: number | null;
}

export type Log = (message: string) => void;

export class CircuitBreaker {
  private stateValue: CircuitState = "closed";
  private failures = 0;
  private opens = 0;
  private closes = 0;
  private lastOpenedBy: FailureKind | null = null;
  private changedAt: number | null = null;

  constructor(
    readonly failureThreshold: number,
    readonly minOpenMs: number,
    private readonly log: Log,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isInteger(failureThreshold) || failureThreshold < 1) {
      throw new RangeError(`failureThreshold must be an integer >= 1, got ${failureThreshold}`);
    }
  }

  get state(): CircuitState {
    return this.stateValue;
  }

  get isOpen(): boolean {
    return this.stateValue === "open";
  }

  /** A verdict wait timed out, or a delivery attempt failed. */
  failure(kind: FailureKind): void {
    if (this.stateValue === "open") return;
    this.failures += 1;
    if (this.failures >= this.failureThreshold) {
      this.stateValue = "open";
      this.opens += 1;
      this.lastOpenedBy = kind;
      this.changedAt = this.now();
      this.log(
        `circuit open after ${this.failures} consecutive failures (last: ${kind}); ` +
          "verdict waits are skipped, events are still published best-effort",
      );
    }
  }

  /** A verdict wait got its verdict in time. */
  success(): void {
    if (this.stateValue === "closed") this.failures = 0;
  }

  /** A verdict arrived (any session of the client): while open, verdicts flow again. */
  verdictReceived(): void {
    if (this.stateValue !== "open") return;
    if (this.now() - (this.changedAt ?? 0) < this.minOpenMs) return;
    this.stateValue = "closed";
    this.failures = 0;
    this.closes += 1;
    this.changedAt = this.now();
    this.log("circuit closed: verdicts flow again; verdict waits resume");
  }

  snapshot(): BreakerSnapshot {
    return {
      state: this.stateValue,
      consecutiveFailures: this.failures,
      failureThreshold: this.failureThreshold,
      opens: this.opens,
      closes: this.closes,
      lastOpenedBy: this.lastOpenedBy,
      changedAt: this.changedAt,
    };
  }
}
