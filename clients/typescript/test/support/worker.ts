/**
 * A real `loopwatch worker` (the Python stream processor) as a subprocess, with topics
 * and an app id of its own, against the broker at KAFKA_BOOTSTRAP_SERVERS.
 *
 * Under CI=true a missing broker or Python venv fails the test; elsewhere it skips.
 */

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createWriteStream, mkdtempSync, readFileSync } from "node:fs";
import { createServer, Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

import kafkajs from "kafkajs";

import { havePython, loopwatchCli, REPO_ROOT } from "./paths.js";

export const BOOTSTRAP = process.env.KAFKA_BOOTSTRAP_SERVERS ?? "127.0.0.1:9092";

/** Why the broker tests cannot run here (null: they can). Throws under CI=true. */
export async function brokerUnavailable(): Promise<string | null> {
  let reason: string | null = null;
  if (!havePython()) reason = `no Python venv at ${loopwatchCli()} (run make venv, or set LOOPWATCH_PYTHON)`;
  else if (!(await reachable(BOOTSTRAP))) reason = `no Kafka broker at ${BOOTSTRAP}`;
  if (reason !== null && process.env.CI === "true") throw new Error(`CI=true: ${reason}`);
  return reason;
}

function reachable(bootstrap: string): Promise<boolean> {
  const [host, port] = (bootstrap.split(",")[0] as string).split(":") as [string, string];
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(2000, () => done(false));
    socket.once("error", () => done(false));
    socket.connect(Number(port), host, () => done(true));
  });
}

/** A TCP port nothing listens on (taken from the OS, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export class WorkerEnv {
  readonly prefix = `lw-ts-${randomUUID().slice(0, 10)}`;
  constructor(readonly webPort: number) {}

  get eventsTopic(): string {
    return `${this.prefix}-events`;
  }
  get verdictsTopic(): string {
    return `${this.prefix}-verdicts`;
  }

  env(extra: Record<string, string> = {}): Record<string, string> {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) {
      if (v !== undefined && !k.startsWith("LOOPWATCH_")) env[k] = v;
    }
    return {
      ...env,
      KAFKA_BOOTSTRAP_SERVERS: BOOTSTRAP,
      LOOPWATCH_APP_ID: this.prefix,
      LOOPWATCH_EVENTS_TOPIC: this.eventsTopic,
      LOOPWATCH_VERDICTS_TOPIC: this.verdictsTopic,
      LOOPWATCH_WARNINGS_TOPIC: `${this.prefix}-warnings`,
      LOOPWATCH_DLQ_TOPIC: `${this.prefix}-dlq`,
      LOOPWATCH_EPISODES_TOPIC: `${this.prefix}-episodes`,
      LOOPWATCH_CONFIG_TOPIC: `${this.prefix}-config`,
      LOOPWATCH_PARTITIONS: "3",
      LOOPWATCH_WEB_PORT: String(this.webPort),
      LOOPWATCH_DATA_DIR: join(tmpdir(), this.prefix),
      ...extra,
    };
  }
}

export class Worker {
  private constructor(
    readonly env: WorkerEnv,
    private readonly proc: ChildProcess,
    readonly logPath: string,
  ) {}

  /** Create the topics (`loopwatch topics create`), start the worker, wait until ready. */
  static async start(deadlineMs = 120_000): Promise<Worker> {
    const env = new WorkerEnv(await freePort());
    const created = spawnSync(loopwatchCli(), ["topics", "create"], {
      env: env.env(),
      cwd: REPO_ROOT,
      encoding: "utf8",
      timeout: 60_000,
    });
    if (created.status !== 0) throw new Error(`loopwatch topics create failed: ${created.stderr}`);
    return Worker.startWith(env, deadlineMs);
  }

  /** Start a worker on an environment whose topics exist. */
  static async startWith(env: WorkerEnv, deadlineMs = 120_000): Promise<Worker> {
    const dir = mkdtempSync(join(tmpdir(), "lw-ts-worker-"));
    const logPath = join(dir, "worker.log");
    const log = createWriteStream(logPath);
    const proc = spawn(loopwatchCli(), ["worker", "--loglevel", "warning"], {
      env: env.env(),
      cwd: REPO_ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    proc.stdout?.pipe(log);
    proc.stderr?.pipe(log);
    const worker = new Worker(env, proc, logPath);
    await worker.waitReady(deadlineMs);
    return worker;
  }

  /** Poll `/ready` on the worker's web port until it answers 200, within a deadline. */
  private async waitReady(deadlineMs: number): Promise<void> {
    const end = Date.now() + deadlineMs;
    while (Date.now() < end) {
      if (this.proc.exitCode !== null) break;
      try {
        const response = await fetch(`http://127.0.0.1:${this.env.webPort}/ready`, {
          signal: AbortSignal.timeout(2000),
        });
        if (response.status === 200) return;
      } catch {
        // not listening yet
      }
      await new Promise((resolve) => setTimeout(resolve, 200)); // polling a probe against a deadline
    }
    const log = this.log().slice(-3000);
    await this.stop();
    throw new Error(`worker not ready within ${deadlineMs} ms; log:\n${log}`);
  }

  log(): string {
    try {
      return readFileSync(this.logPath, "utf8");
    } catch {
      return "";
    }
  }

  /** Stop the worker (SIGTERM, then SIGKILL after 30 s) and delete its topics. */
  async stop(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      const exited = new Promise((resolve) => this.proc.once("exit", resolve));
      this.proc.kill("SIGTERM");
      const timer = setTimeout(() => this.proc.kill("SIGKILL"), 30_000);
      await exited;
      clearTimeout(timer);
    }
    await deleteTopics(this.env.prefix);
  }
}

/** Delete every topic whose name starts with `prefix` (best-effort). */
export async function deleteTopics(prefix: string): Promise<void> {
  const kafka = new kafkajs.Kafka({ brokers: BOOTSTRAP.split(","), logLevel: kafkajs.logLevel.NOTHING });
  const admin = kafka.admin();
  try {
    await admin.connect();
    const topics = (await admin.listTopics()).filter((t) => t.startsWith(prefix));
    if (topics.length > 0) await admin.deleteTopics({ topics, timeout: 30_000 });
  } catch {
    // best-effort cleanup
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/** Every record of a topic from the beginning until `count` arrived or the deadline. */
export async function readTopic(
  topic: string,
  count: number,
  deadlineMs = 60_000,
): Promise<{ key: string; value: string; partition: number }[]> {
  const kafka = new kafkajs.Kafka({ brokers: BOOTSTRAP.split(","), logLevel: kafkajs.logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `lw-ts-read-${randomUUID()}`, maxWaitTimeInMs: 100 });
  const out: { key: string; value: string; partition: number }[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${out.length} of ${count} records of ${topic} within ${deadlineMs} ms`)),
        deadlineMs,
      );
      void consumer.run({
        eachMessage: async ({ message, partition }) => {
          out.push({ key: message.key?.toString("utf8") ?? "", value: message.value?.toString("utf8") ?? "", partition });
          if (out.length >= count) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
  } finally {
    await consumer.disconnect().catch(() => undefined);
  }
  return out;
}
