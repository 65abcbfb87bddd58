/** One conversation as the runtime sees it: publish its events, wait for its verdicts. */

import type { CircuitBreaker } from "./breaker.js";
import type { Call, EventEncoder } from "./encoding.js";
import { Ledger, type PlacedWarning } from "./ledger.js";
import type { ClientStats } from "./stats.js";
import type { LoopVerdict } from "./verdict.js";

/** The outcome of waiting for a session's verdicts. */
export interface VerdictWait {
  /** The seq waited for (null: the session had published nothing). */
  throughSeq: number | null;
  /** True when the verdict of `throughSeq` had arrived; false after a timeout or a skip. */
  complete: boolean;
  /** True when the circuit was open and the wait did not wait at all. */
  skipped: boolean;
  /** How long the wait took, ms. */
  waitedMs: number;
  /** Every warning of the session received so far, anchored to history messages. */
  warnings: PlacedWarning[];
}

export interface SessionDeps {
  sessionId: string;
  encoder: EventEncoder;
  send: (sessionId: string, record: string) => void;
  onClose: (session: Session) => void;
  stats: ClientStats;
  breaker: CircuitBreaker;
  clock: () => Date;
  defaultTimeoutMs: number;
  firstSeq: number;
  logTimeouts: boolean;
  warn: (message: string) => void;
}

export interface PublishOptions {
  /** Index (number) of the message in the runtime's history this event comes from. */
  messageIndex?: number;
}

interface Waiter {
  target: number;
  resolve: () => void;
}

/**
 * Assigns `seq`, publishes events keyed by the session id, collects verdicts. Publishing
 * returns the event's seq at once: the record is queued for the background sender.
 */
export class Session {
  readonly sessionId: string;
  private nextSeq: number;
  private readonly ledger = new Ledger();
  private waiters: Waiter[] = [];
  closed = false;

  constructor(private readonly deps: SessionDeps) {
    this.sessionId = deps.sessionId;
    this.nextSeq = deps.firstSeq;
  }

  user(text: string | null = null, options: PublishOptions = {}): number {
    const seq = this.takeSeq(options);
    return this.emit(seq, () => this.deps.encoder.user(seq, this.deps.clock(), text));
  }

  system(text: string | null = null, options: PublishOptions = {}): number {
    const seq = this.takeSeq(options);
    return this.emit(seq, () => this.deps.encoder.system(seq, this.deps.clock(), text));
  }

  assistant(text: string | null = null, toolCalls: readonly Call[] = [], options: PublishOptions = {}): number {
    const seq = this.takeSeq(options);
    return this.emit(seq, () => this.deps.encoder.assistant(seq, this.deps.clock(), text, toolCalls));
  }

  toolResult(
    callId: string,
    toolName: string,
    result: unknown = null,
    error: string | null = null,
    options: PublishOptions = {},
  ): number {
    const seq = this.takeSeq(options);
    return this.emit(seq, () =>
      this.deps.encoder.toolResult(seq, this.deps.clock(), callId, toolName, result, error),
    );
  }

  /** Publish `context_condensed` (contract 1.3): this runtime just condensed the
   * session's history to fit the context (the summary itself is not sent). Needs 1.3
   * workers: a 1.2 worker dead-letters it. */
  condensed(options: PublishOptions = {}): number {
    const seq = this.takeSeq(options);
    return this.emit(seq, () => this.deps.encoder.condensed(seq, this.deps.clock()));
  }

  /** Publish `session_end` and stop reading this session's verdicts. */
  end(): number {
    const seq = this.takeSeq({});
    this.emit(seq, () => this.deps.encoder.end(seq, this.deps.clock()));
    this.close();
    return seq;
  }

  /** Stop reading verdicts without ending the session (another process may go on). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.deps.onClose(this);
    for (const waiter of this.waiters) waiter.resolve();
    this.waiters = [];
  }

  /** The seq of the newest published event. */
  get lastSeq(): number | null {
    return this.ledger.lastSeq;
  }

  private takeSeq(options: PublishOptions): number {
    if (this.closed) throw new Error(`session ${JSON.stringify(this.sessionId)} is closed`);
    const seq = this.nextSeq;
    this.nextSeq += 1;
    this.ledger.published(seq, options.messageIndex ?? null);
    return seq;
  }

  private emit(seq: number, encode: () => string): number {
    let record: string;
    try {
      record = encode();
    } catch (error) {
      // A value that is not JSON (NaN, a cycle): the event is skipped, the turn goes on.
      this.deps.stats.dropped += 1;
      this.deps.warn(
        `event ${seq} of session ${this.sessionId} not encodable (${error instanceof Error ? error.name : typeof error}); skipped`,
      );
      return seq;
    }
    this.deps.send(this.sessionId, record);
    return seq;
  }

  /** Called by the reader for each verdict of this session. */
  onVerdict(verdict: LoopVerdict): void {
    if (!this.ledger.received(verdict)) return;
    if (verdict.warning !== null) this.deps.stats.warning(verdict.warning.rule);
    const still: Waiter[] = [];
    for (const waiter of this.waiters) {
      if (this.ledger.hasVerdict(waiter.target)) waiter.resolve();
      else still.push(waiter);
    }
    this.waiters = still;
  }

  /**
   * Wait until the verdict of `throughSeq` (default: the newest event) has arrived, at
   * most `timeoutMs` (default: the client's); then return what has arrived. Fail-open:
   * never throws. With the circuit open it returns at once.
   */
  async verdicts(options: { throughSeq?: number; timeoutMs?: number } = {}): Promise<VerdictWait> {
    const target = options.throughSeq ?? this.ledger.lastSeq;
    const timeoutMs = options.timeoutMs ?? this.deps.defaultTimeoutMs;
    const started = performance.now();
    let complete = target === null || this.ledger.hasVerdict(target);
    let skipped = false;
    if (!complete && target !== null && !this.closed) {
      if (this.deps.breaker.isOpen) {
        skipped = true;
      } else {
        await this.waitFor(target, timeoutMs);
        complete = this.ledger.hasVerdict(target);
        if (complete) this.deps.breaker.success();
        else if (!this.closed) {
          if (this.deps.logTimeouts) {
            this.deps.warn(
              `no verdict for session ${this.sessionId} seq ${target} within ${timeoutMs} ms; going on without it`,
            );
          }
          this.deps.breaker.failure("verdict_timeout");
        }
      }
    } else if (complete && target !== null) {
      this.deps.breaker.success();
    }
    const waitedMs = performance.now() - started;
    this.deps.stats.recordWait(waitedMs, complete, skipped);
    return { throughSeq: target, complete, skipped, waitedMs, warnings: this.ledger.warnings() };
  }

  private waitFor(target: number, timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const waiter: Waiter = {
        target,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        resolve();
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /** Received warnings keyed by history message index, for `placement`. */
  warningsByMessage(): Map<number, string[]> {
    return this.ledger.warningsByMessage();
  }
}
