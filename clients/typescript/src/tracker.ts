/**
 * `HistoryTracker`: from "the history I am about to send" to a prompt with warnings, one
 * call before each model call. A port of `loopwatch.streams.client.tracker`:
 *
 *     const tracker = client.tracker("session-42", "openai");
 *     const prompt = await tracker.prompt(messages); // publish what is new, wait, place
 *
 * Only messages not published yet are published, so calling it again with the same or a
 * longer history is idempotent. Messages get numbers when first seen and warnings are
 * anchored to numbers: when the runtime trims or summarises old messages, the ones still
 * present are recognised by content (a digest) and keep their numbers.
 */

import { createHash } from "node:crypto";

import { canonicalJson, plainJson } from "./json.js";
import { type Format, type HistoryEvent, HistoryReader, type ToolError } from "./history.js";
import { type Message, placeAnthropic, placeOpenai, placeResponses, type WarningsByMessage } from "./placement.js";
import type { Session, VerdictWait } from "./session.js";

const PLACE = { openai: placeOpenai, anthropic: placeAnthropic, responses: placeResponses } as const;

export interface TrackerOptions {
  /** Tells a failed tool result from a good one (default: Anthropic's `is_error`). */
  toolError?: ToolError;
  /** The verdict wait, ms (default: the client's). */
  timeoutMs?: number;
}

export class HistoryTracker {
  private readonly reader: HistoryReader;
  private window: [number, string][] = [];
  private digests = new WeakMap<object, string>();
  private nextNumber = 0;
  private systemDigest: string | null = null;
  /** The outcome of the latest verdict wait. */
  lastWait: VerdictWait | null = null;

  constructor(
    readonly session: Session,
    readonly format: Format,
    private readonly options: TrackerOptions = {},
  ) {
    this.reader = new HistoryReader(format, options.toolError);
  }

  /** Publish the messages not published yet, without waiting. `system`: Anthropic's
   * top-level system prompt, published when it first appears or changes. */
  publish(messages: readonly Message[], system?: string): void {
    this.publishNew(messages, system);
  }

  /** Publish the new messages, wait for their verdicts (fail-open), and return the
   * warning texts keyed by index in `messages`. */
  async warnings(messages: readonly Message[], system?: string): Promise<Map<number, string[]>> {
    const numbers = this.publishNew(messages, system);
    const wait = await this.session.verdicts(
      this.options.timeoutMs !== undefined ? { timeoutMs: this.options.timeoutMs } : {},
    );
    this.lastWait = wait;
    const indexOf = new Map(numbers.map((number, index) => [number, index]));
    const byIndex = new Map<number, string[]>();
    for (const placed of wait.warnings) {
      const index = placed.messageIndex === null ? undefined : indexOf.get(placed.messageIndex);
      if (index !== undefined) byIndex.set(index, [...(byIndex.get(index) ?? []), placed.warning.message]);
    }
    return byIndex;
  }

  /** `warnings()`, then the history with them placed (a new list; `messages` untouched). */
  async prompt(messages: readonly Message[], system?: string): Promise<Record<string, unknown>[]> {
    const placed: WarningsByMessage = await this.warnings(messages, system);
    return PLACE[this.format](messages, placed);
  }

  private publishNew(messages: readonly Message[], system: string | undefined): number[] {
    const [numbers, firstNew] = this.align(this.digestsOf(messages));
    if (system !== undefined && digestOf(system) !== this.systemDigest) {
      this.systemDigest = digestOf(system);
      this.session.system(system);
    }
    for (const event of this.reader.events(messages, firstNew)) {
      this.publishEvent(event, numbers[event.messageIndex] as number);
    }
    return numbers;
  }

  private digestsOf(messages: readonly Message[]): string[] {
    const known = this.digests;
    const next = new WeakMap<object, string>();
    const out = messages.map((message) => {
      const digest = known.get(message) ?? digestOf(message);
      next.set(message, digest);
      return digest;
    });
    this.digests = next;
    return out;
  }

  private align(digests: string[]): [number[], number] {
    const known = this.window.map(([, d]) => d);
    let start: number;
    let numbers: number[];
    let firstNew: number;
    if (startsWith(digests, known)) {
      [start, numbers, firstNew] = [0, this.window.map(([n]) => n), known.length];
    } else if (startsWith(known, digests)) {
      [start, numbers, firstNew] = [0, this.window.slice(0, digests.length).map(([n]) => n), digests.length];
    } else {
      [start, numbers, firstNew] = this.realign(known, digests);
    }
    numbers = [...this.fresh(start), ...numbers];
    numbers = [...numbers, ...this.fresh(digests.length - numbers.length)];
    this.window = numbers.map((n, i) => [n, digests[i] as string]);
    return [numbers, firstNew];
  }

  private realign(known: string[], digests: string[]): [number, number[], number] {
    for (let drop = 1; drop < known.length; drop++) {
      const tail = known.slice(drop);
      for (let at = 0; at + tail.length <= digests.length; at++) {
        if (tail.every((d, i) => digests[at + i] === d)) {
          return [at, this.window.slice(drop).map(([n]) => n), at + tail.length];
        }
      }
    }
    return [digests.length, [], digests.length];
  }

  private fresh(count: number): number[] {
    const out: number[] = [];
    for (let i = 0; i < count; i++) out.push(this.nextNumber++);
    return out;
  }

  private publishEvent(event: HistoryEvent, number: number): void {
    const options = { messageIndex: number };
    const s = this.session;
    if (event.kind === "user_message") s.user(event.text, options);
    else if (event.kind === "system_message") s.system(event.text, options);
    else if (event.kind === "assistant_message") s.assistant(event.text, event.calls, options);
    else s.toolResult(event.callId ?? "", event.toolName ?? "unknown", event.result, event.error, options);
  }
}

function startsWith(list: string[], prefix: string[]): boolean {
  return prefix.length <= list.length && prefix.every((d, i) => list[i] === d);
}

function digestOf(message: unknown): string {
  let text: string;
  try {
    text = canonicalJson(plainJson(message));
  } catch {
    text = String(message);
  }
  return createHash("sha256").update(text, "utf8").digest("hex");
}
