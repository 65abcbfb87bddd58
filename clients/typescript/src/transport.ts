/**
 * The Kafka side of the client (KafkaJS): a bounded outbox of event records drained by
 * one sender, and a verdict reader. Connects lazily, in the background, and keeps
 * retrying; nothing here ever throws into a caller.
 *
 * Reading verdicts: KafkaJS has no group-less assignment, so each client joins a consumer
 * group of its own (a random id; nothing shared with other processes), subscribed to the
 * whole verdicts topic. Before anything is sent, the end offsets of every verdict
 * partition are taken and the consumer is sought there, so no verdict of an event this
 * client publishes can be missed, however long the group join takes. Records of other
 * processes' sessions are skipped by key before decoding.
 *
 * Sending: one batch in flight at a time (one request in flight per connection), so a
 * session's events keep their order. A batch the producer gives up on goes back to the
 * front of the outbox and is sent again after `probeIntervalMs`; the worker skips an
 * event whose seq it has already processed (docs/contract.md §2), so a re-sent batch
 * that had partly arrived changes nothing.
 */

import { randomUUID } from "node:crypto";

import kafkajs from "kafkajs";
import type { Admin, Consumer, Kafka, KafkaConfig, Producer } from "kafkajs";

import type { CircuitBreaker } from "./breaker.js";
import type { ClientStats } from "./stats.js";
import { type LoopVerdict, parseVerdict } from "./verdict.js";

const { Kafka: KafkaClass, logLevel } = kafkajs;

export type OnVerdict = (verdict: LoopVerdict) => void;
export type Logger = { warn(message: string): void };

export interface TransportOptions {
  brokers: string[];
  eventsTopic: string;
  verdictsTopic: string;
  clientId: string;
  /** The reader's consumer group is `<prefix>-<random uuid>`. */
  groupIdPrefix: string;
  /** Backoff between connection and delivery attempts, and the breaker's probe period. */
  probeIntervalMs: number;
  /** Events held for delivery at most; beyond, the oldest are dropped (counted). */
  maxBuffered: number;
  /** How long `close()` keeps delivering what is buffered. */
  closeTimeoutMs: number;
  /** Extra KafkaJS client settings (ssl, sasl, ...). */
  kafka: Partial<KafkaConfig>;
}

interface Outgoing {
  key: string;
  value: string;
}

const BATCH = 500;

export class KafkaTransport {
  private readonly kafka: Kafka;
  private producer: Producer | null = null;
  private consumer: Consumer | null = null;
  private readonly outbox: Outgoing[] = [];
  private readonly handlers = new Map<string, OnVerdict>();
  private started = false;
  private ready = false;
  private stopping = false;
  private pumping = false;
  private connecting: Promise<void> | null = null;
  private connectFailedLogged = false;
  private wake: (() => void) | null = null;

  constructor(
    private readonly options: TransportOptions,
    private readonly stats: ClientStats,
    private readonly breaker: CircuitBreaker,
    private readonly logger: Logger,
  ) {
    this.kafka = new KafkaClass({
      clientId: options.clientId,
      brokers: options.brokers,
      connectionTimeout: 1000,
      requestTimeout: 5000,
      logLevel: logLevel.NOTHING,
      retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 },
      ...options.kafka,
    });
  }

  get connected(): boolean {
    return this.ready;
  }

  get buffered(): number {
    return this.outbox.length;
  }

  /** Start connecting in the background (idempotent). */
  start(): void {
    if (this.started || this.stopping) return;
    this.started = true;
    this.connecting = this.connectLoop();
  }

  watch(sessionId: string, handler: OnVerdict): void {
    if (this.handlers.has(sessionId)) throw new Error(`session ${JSON.stringify(sessionId)} is already open in this client`);
    this.handlers.set(sessionId, handler);
  }

  unwatch(sessionId: string): void {
    this.handlers.delete(sessionId);
  }

  /** Queue one record; never blocks, never throws. */
  send(sessionId: string, record: string): void {
    if (this.stopping) {
      this.stats.dropped += 1;
      return;
    }
    this.outbox.push({ key: sessionId, value: record });
    this.trim();
    this.start();
    void this.pump();
  }

  /** Deliver what is buffered (at most `closeTimeoutMs`), then disconnect. */
  async close(): Promise<void> {
    const deadline = Date.now() + this.options.closeTimeoutMs;
    if (this.ready) {
      while (this.outbox.length > 0 && Date.now() < deadline && this.breaker.state === "closed") {
        await Promise.race([this.pump(), sleep(Math.max(0, deadline - Date.now()))]);
        if (this.outbox.length > 0) await sleep(Math.min(50, Math.max(0, deadline - Date.now())));
      }
    }
    this.stopping = true;
    this.wake?.();
    if (this.outbox.length > 0) {
      this.stats.dropped += this.outbox.length;
      this.logger.warn(`closing with ${this.outbox.length} events not delivered`);
      this.outbox.length = 0;
    }
    const quiet = async (what: Promise<unknown> | undefined): Promise<void> => {
      try {
        await Promise.race([what, sleep(Math.max(1000, deadline - Date.now()))]);
      } catch {
        // closing: nothing to report
      }
    };
    await quiet(this.connecting ?? undefined);
    await quiet(this.consumer?.disconnect());
    await quiet(this.producer?.disconnect());
    this.ready = false;
  }

  private trim(): void {
    while (this.outbox.length > this.options.maxBuffered) {
      this.outbox.shift();
      this.stats.dropped += 1;
    }
  }

  private async connectLoop(): Promise<void> {
    while (!this.stopping) {
      try {
        await this.connectOnce();
        this.ready = true;
        if (this.connectFailedLogged) this.logger.warn("connected to Kafka");
        this.connectFailedLogged = false;
        void this.pump();
        return;
      } catch (error) {
        this.breaker.failure("connect");
        if (!this.connectFailedLogged) {
          this.connectFailedLogged = true;
          this.logger.warn(`cannot connect to Kafka (${errorName(error)}); retrying every ${this.options.probeIntervalMs} ms`);
        }
        await this.disconnectQuietly();
        await this.pause(this.options.probeIntervalMs);
      }
    }
  }

  private async connectOnce(): Promise<void> {
    const topic = this.options.verdictsTopic;
    const admin: Admin = this.kafka.admin();
    let ends: { partition: number; offset: string }[];
    await admin.connect();
    try {
      ends = await admin.fetchTopicOffsets(topic);
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
    if (this.stopping) return;
    const consumer = this.kafka.consumer({
      groupId: `${this.options.groupIdPrefix}-${randomUUID()}`,
      maxWaitTimeInMs: 50,
      readUncommitted: false,
      allowAutoTopicCreation: false,
    });
    this.consumer = consumer;
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: false });
    await consumer.run({
      autoCommit: true,
      autoCommitInterval: 1000,
      eachBatchAutoResolve: true,
      eachBatch: async ({ batch }) => {
        for (const message of batch.messages) this.deliver(message.key, message.value, message.offset);
      },
    });
    // Applied before the first fetch of each partition, whenever the join completes.
    for (const end of ends) consumer.seek({ topic, partition: end.partition, offset: end.offset });
    const producer = this.kafka.producer({
      allowAutoTopicCreation: false,
      idempotent: false,
      maxInFlightRequests: 1,
    });
    this.producer = producer;
    await producer.connect();
  }

  private async disconnectQuietly(): Promise<void> {
    const consumer = this.consumer;
    const producer = this.producer;
    this.consumer = null;
    this.producer = null;
    await consumer?.disconnect().catch(() => undefined);
    await producer?.disconnect().catch(() => undefined);
  }

  private deliver(key: Buffer | null, value: Buffer | null, offset: string): void {
    if (key === null || value === null) return;
    const handler = this.handlers.get(key.toString("utf8"));
    if (handler === undefined) return; // another process's session
    const verdict = parseVerdict(value);
    if (verdict === null) {
      this.stats.badRecords += 1;
      this.logger.warn(`verdict reader: undecodable verdict at offset ${offset}; skipped`);
      return;
    }
    this.breaker.verdictReceived();
    try {
      handler(verdict);
    } catch (error) {
      this.logger.warn(`verdict handler failed (${errorName(error)})`);
    }
  }

  private async pump(): Promise<void> {
    if (this.pumping || !this.ready || this.producer === null) return;
    this.pumping = true;
    try {
      while (this.outbox.length > 0 && !this.stopping) {
        const batch = this.outbox.splice(0, BATCH);
        try {
          await this.producer.send({
            topic: this.options.eventsTopic,
            acks: -1,
            messages: batch.map((r) => ({ key: r.key, value: r.value })),
          });
          this.stats.published += batch.length;
        } catch (error) {
          this.stats.publishErrors += 1;
          this.breaker.failure("delivery");
          this.logger.warn(`${batch.length} events not delivered (${errorName(error)}); retrying in ${this.options.probeIntervalMs} ms`);
          this.outbox.unshift(...batch);
          this.trim();
          await this.pause(this.options.probeIntervalMs);
        }
      }
    } finally {
      this.pumping = false;
    }
  }

  /** A sleep that `close()` cuts short; its timer never keeps the process alive. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      const wake = (): void => done();
      this.wake = wake;
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
    });
  }
}

/** A plain sleep; `close()` uses it, and its caller awaits `close()`. */
function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** An error's class name only: broker errors may quote request content. */
export function errorName(error: unknown): string {
  if (error instanceof Error) return error.name || "Error";
  return typeof error;
}
