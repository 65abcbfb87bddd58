/**
 * `LoopwatchClient`: one per process, shared by its sessions.
 *
 *     const client = LoopwatchClient.shared({ bootstrapServers: "broker:9092" });
 *     const prompt = await client.tracker("s-42", "openai").prompt(messages);
 *
 * Connects lazily, in the background, on the first event. Publishing never blocks and
 * never throws for broker trouble; a verdict wait gives up at its deadline (fail-open),
 * and after `failureThreshold` consecutive failures the circuit opens and waits stop
 * waiting (README.md, "Circuit breaker").
 */

import type { KafkaConfig } from "kafkajs";

import { CircuitBreaker } from "./breaker.js";
import { EventEncoder } from "./encoding.js";
import type { Format, ToolError } from "./history.js";
import { Session } from "./session.js";
import { ClientStats, type StatsSnapshot } from "./stats.js";
import { HistoryTracker } from "./tracker.js";
import { KafkaTransport, type Logger } from "./transport.js";

export interface ClientOptions {
  /** `host:port` list, or a comma-separated string (default: KAFKA_BOOTSTRAP_SERVERS, else localhost:9092). */
  bootstrapServers?: string | string[];
  /** Default: LOOPWATCH_EVENTS_TOPIC, else `agent-events`. */
  eventsTopic?: string;
  /** Default: LOOPWATCH_VERDICTS_TOPIC, else `loop-verdicts`. */
  verdictsTopic?: string;
  agentId?: string | null;
  /** Send fingerprints instead of raw content (docs/contract.md §3). */
  localFingerprints?: boolean;
  /** The verdict wait before each model call, ms (default 1000). */
  verdictTimeoutMs?: number;
  /** Consecutive failures that open the circuit (K, default 3). */
  failureThreshold?: number;
  /** Retry period for connecting and delivering, and the circuit's least open time, ms (default 2000). */
  probeIntervalMs?: number;
  /** Events buffered for delivery at most; the oldest are dropped beyond (default 10000). */
  maxBuffered?: number;
  /** How long `close()` keeps delivering buffered events, ms (default 2000). */
  closeTimeoutMs?: number;
  /** Log each verdict wait that gives up (default true; they are counted either way). */
  logTimeouts?: boolean;
  clientId?: string;
  groupIdPrefix?: string;
  /** Extra KafkaJS settings (ssl, sasl, ...). */
  kafka?: Partial<KafkaConfig>;
  /** Where the client's few log lines go (default: console.warn with a `loopwatch:` prefix). */
  logger?: Logger;
  /** The clock of event timestamps (tests). */
  clock?: () => Date;
}

const defaultLogger: Logger = { warn: (message) => console.warn(`loopwatch: ${message}`) };

export class LoopwatchClient {
  private static sharedClient: LoopwatchClient | null = null;

  readonly eventsTopic: string;
  readonly verdictsTopic: string;
  readonly agentId: string | null;
  readonly localFingerprints: boolean;
  readonly verdictTimeoutMs: number;
  private readonly logTimeouts: boolean;
  private readonly counters = new ClientStats();
  private readonly breaker: CircuitBreaker;
  private readonly transport: KafkaTransport;
  private readonly logger: Logger;
  private readonly clock: () => Date;
  private readonly sessions = new Map<string, Session>();
  private readonly trackers = new Map<string, HistoryTracker>();
  private closed = false;

  constructor(options: ClientOptions = {}) {
    const env = process.env;
    const servers = options.bootstrapServers ?? env.KAFKA_BOOTSTRAP_SERVERS ?? "localhost:9092";
    this.eventsTopic = options.eventsTopic ?? env.LOOPWATCH_EVENTS_TOPIC ?? "agent-events";
    this.verdictsTopic = options.verdictsTopic ?? env.LOOPWATCH_VERDICTS_TOPIC ?? "loop-verdicts";
    this.agentId = options.agentId ?? null;
    this.localFingerprints = options.localFingerprints ?? false;
    this.verdictTimeoutMs = options.verdictTimeoutMs ?? 1000;
    this.logTimeouts = options.logTimeouts ?? true;
    this.logger = options.logger ?? defaultLogger;
    this.clock = options.clock ?? (() => new Date());
    const probeIntervalMs = options.probeIntervalMs ?? 2000;
    this.breaker = new CircuitBreaker(options.failureThreshold ?? 3, probeIntervalMs, (m) => this.logger.warn(m));
    this.transport = new KafkaTransport(
      {
        brokers: (Array.isArray(servers) ? servers : servers.split(",")).map((s) => s.trim()).filter((s) => s),
        eventsTopic: this.eventsTopic,
        verdictsTopic: this.verdictsTopic,
        clientId: options.clientId ?? "loopwatch-ts",
        groupIdPrefix: options.groupIdPrefix ?? "loopwatch-client",
        probeIntervalMs,
        maxBuffered: options.maxBuffered ?? 10_000,
        closeTimeoutMs: options.closeTimeoutMs ?? 2000,
        kafka: options.kafka ?? {},
      },
      this.counters,
      this.breaker,
      this.logger,
    );
  }

  /** The process-wide client, created on first call (later options are ignored). */
  static shared(options: ClientOptions = {}): LoopwatchClient {
    if (LoopwatchClient.sharedClient === null || LoopwatchClient.sharedClient.closed) {
      LoopwatchClient.sharedClient = new LoopwatchClient(options);
    }
    return LoopwatchClient.sharedClient;
  }

  /** Start connecting now instead of at the first event (never waits, never throws). */
  connect(): this {
    this.transport.start();
    return this;
  }

  /** Open a session: its verdicts are delivered from now on. `firstSeq`: where a resumed
   * session continues (above its last published seq). */
  openSession(sessionId: string, options: { agentId?: string | null; firstSeq?: number } = {}): Session {
    if (this.closed) throw new Error("the loopwatch client is closed");
    const encoder = new EventEncoder(sessionId, options.agentId ?? this.agentId, this.localFingerprints);
    const session = new Session({
      sessionId,
      encoder,
      send: (id, record) => this.transport.send(id, record),
      onClose: (s) => this.forget(s),
      stats: this.counters,
      breaker: this.breaker,
      clock: this.clock,
      defaultTimeoutMs: this.verdictTimeoutMs,
      firstSeq: options.firstSeq ?? 0,
      logTimeouts: this.logTimeouts,
      warn: (m) => this.logger.warn(m),
    });
    this.transport.watch(sessionId, (verdict) => session.onVerdict(verdict));
    this.sessions.set(sessionId, session);
    this.transport.start();
    return session;
  }

  /** The open session with this id, opened now if there is none. */
  session(sessionId: string, options: { agentId?: string | null; firstSeq?: number } = {}): Session {
    return this.sessions.get(sessionId) ?? this.openSession(sessionId, options);
  }

  /** The history tracker of a session in one API's format, opening the session on first use. */
  tracker(
    sessionId: string,
    format: Format,
    options: { toolError?: ToolError; agentId?: string | null; firstSeq?: number; timeoutMs?: number } = {},
  ): HistoryTracker {
    let tracker = this.trackers.get(sessionId);
    if (tracker === undefined) {
      const sessionOptions = {
        ...(options.agentId !== undefined ? { agentId: options.agentId } : {}),
        ...(options.firstSeq !== undefined ? { firstSeq: options.firstSeq } : {}),
      };
      const trackerOptions = {
        ...(options.toolError !== undefined ? { toolError: options.toolError } : {}),
        ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      };
      tracker = new HistoryTracker(this.session(sessionId, sessionOptions), format, trackerOptions);
      this.trackers.set(sessionId, tracker);
    }
    return tracker;
  }

  /** Publish `session_end` for a session opened here (no-op if unknown). */
  endSession(sessionId: string): void {
    this.sessions.get(sessionId)?.end();
  }

  /** Counters and the circuit's state, as of now. */
  stats(): StatsSnapshot {
    const c = this.counters;
    return {
      published: c.published,
      publishErrors: c.publishErrors,
      dropped: c.dropped,
      buffered: this.transport.buffered,
      waits: c.waits,
      timeouts: c.timeouts,
      skippedWaits: c.skippedWaits,
      badRecords: c.badRecords,
      warnings: Object.fromEntries(c.warnings),
      connected: this.transport.connected,
      circuit: this.breaker.snapshot(),
    };
  }

  /** The `fraction` quantile of recent verdict waits, ms. */
  waitPercentile(fraction: number): number | null {
    return this.counters.waitPercentile(fraction);
  }

  /** Deliver what is buffered (bounded by `closeTimeoutMs`; not at all while the circuit
   * is open), then disconnect. Never throws. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const session of [...this.sessions.values()]) session.close();
    await this.transport.close();
  }

  private forget(session: Session): void {
    this.sessions.delete(session.sessionId);
    this.trackers.delete(session.sessionId);
    this.transport.unwatch(session.sessionId);
  }
}
