/**
 * Event records as a runtime sends them (docs/contract.md §2), byte for byte what the
 * Python client's `EventEncoder` writes for the same events and times (Python's
 * `json.dumps` layout), optionally with local fingerprints (§3: raw arguments, results,
 * error and message texts never leave the runtime).
 */

import { callFingerprint, resultFingerprint, textFingerprint } from "./fingerprints.js";
import { pythonJson } from "./json.js";

/** `error` of a failed result sent with local fingerprints (the Python client's text). */
export const WITHHELD_ERROR = "(error text withheld by the runtime)";

const CALLS_REMEMBERED = 1024;

/** One tool call of an assistant message. */
export interface Call {
  id: string;
  name: string;
  /** Any JSON (default `{}`); see json.ts for integers against floats. */
  arguments?: unknown;
}

/** `datetime.isoformat()` of an aware UTC time, as the Python client writes `ts`. */
export function isoTimestamp(date: Date): string {
  const iso = date.toISOString(); // 2026-01-02T03:04:05.678Z
  const ms = date.getUTCMilliseconds();
  const base = iso.slice(0, 19);
  return ms === 0 ? `${base}+00:00` : `${base}.${String(ms * 1000).padStart(6, "0")}+00:00`;
}

/** Builds one session's event records; remembers call fingerprints for their results. */
export class EventEncoder {
  private readonly callFingerprints = new Map<string, string>();

  constructor(
    readonly sessionId: string,
    readonly agentId: string | null,
    readonly localFingerprints: boolean,
  ) {}

  user(seq: number, ts: Date, text: string | null): string {
    return this.record("user_message", seq, ts, this.text(text));
  }

  system(seq: number, ts: Date, text: string | null): string {
    return this.record("system_message", seq, ts, this.text(text));
  }

  assistant(seq: number, ts: Date, text: string | null, calls: readonly Call[]): string {
    const wireCalls = calls.map((call) => {
      const args = call.arguments === undefined ? {} : call.arguments;
      if (this.localFingerprints) {
        const digest = callFingerprint(call.name, args);
        this.remember(call.id, digest);
        return { id: call.id, name: call.name, fingerprint: digest };
      }
      return { id: call.id, name: call.name, arguments: args };
    });
    // with local fingerprints an assistant's text goes as its digest, for §9.14
    const said = text !== null && this.localFingerprints ? { text_fingerprint: textFingerprint(text) } : this.text(text);
    return this.record("assistant_message", seq, ts, { ...said, tool_calls: wireCalls });
  }

  toolResult(
    seq: number,
    ts: Date,
    callId: string,
    toolName: string,
    result: unknown,
    error: string | null,
  ): string {
    const body: Record<string, unknown> = { call_id: callId, tool_name: toolName };
    if (this.localFingerprints) {
      body.result_fingerprint = resultFingerprint(toolName, result ?? null, error);
      body.error = error === null ? null : WITHHELD_ERROR;
      const callDigest = this.callFingerprints.get(callId);
      if (callDigest !== undefined) {
        this.callFingerprints.delete(callId);
        body.call_fingerprint = callDigest;
      }
    } else {
      body.result = result ?? null;
      body.error = error;
    }
    return this.record("tool_result", seq, ts, body);
  }

  end(seq: number, ts: Date): string {
    return this.record("session_end", seq, ts, {});
  }

  /** `context_condensed` (contract 1.3): the runtime condensed the history. */
  condensed(seq: number, ts: Date): string {
    return this.record("context_condensed", seq, ts, {});
  }

  private text(text: string | null): Record<string, unknown> {
    // Only §9.14 reads a text (an assistant's); with local fingerprints none leaves.
    return text === null || this.localFingerprints ? {} : { text };
  }

  private remember(callId: string, digest: string): void {
    this.callFingerprints.delete(callId);
    this.callFingerprints.set(callId, digest);
    while (this.callFingerprints.size > CALLS_REMEMBERED) {
      const oldest = this.callFingerprints.keys().next().value as string;
      this.callFingerprints.delete(oldest);
    }
  }

  private record(kind: string, seq: number, ts: Date, body: Record<string, unknown>): string {
    const record: Record<string, unknown> = {
      v: 1,
      type: kind,
      session_id: this.sessionId,
      seq,
      ts: isoTimestamp(ts),
      ...(this.agentId !== null ? { agent_id: this.agentId } : {}),
      ...body,
    };
    return pythonJson(record);
  }
}
