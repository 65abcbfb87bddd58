/**
 * Fingerprints of tool calls and results (docs/contract.md §3), byte for byte those of
 * `loopwatch.models.fingerprints`. Values follow `json.ts`'s number model: an integral
 * `number` or a `bigint` is an integer, other numbers and `JsonFloat` are floats.
 */

import { createHash } from "node:crypto";

import { canonicalJson, JsonFloat } from "./json.js";

export const CALL_DROPPED_KEYS: ReadonlySet<string> = new Set(["human_intent", "output"]);
export const RESULT_DROPPED_KEYS: ReadonlySet<string> = new Set([
  "created_at",
  "duration_ms",
  "elapsed_ms",
  "request_id",
  "time_ms",
  "timestamp",
  "updated_at",
]);
export const FINGERPRINT_PREFIX = "sha256:";
export const FINGERPRINT_PATTERN = /^sha256:[0-9a-f]{64}$/;

/** Python's `str.isspace` set (what `str.strip` / `rstrip` remove). */
function isPySpace(code: number): boolean {
  return (
    (code >= 0x09 && code <= 0x0d) ||
    (code >= 0x1c && code <= 0x20) ||
    code === 0x85 ||
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000
  );
}

function rstrip(text: string): string {
  let end = text.length;
  while (end > 0 && isPySpace(text.charCodeAt(end - 1))) end--;
  return text.slice(0, end);
}

function strip(text: string): string {
  let start = 0;
  while (start < text.length && isPySpace(text.charCodeAt(start))) start++;
  return rstrip(text.slice(start));
}

/** Unify line endings, strip trailing whitespace from each line, then trim. */
export function normaliseText(text: string): string {
  const unified = text.replace(/\r\n/g, "\n").replace(/\r/g, "\n");
  return strip(unified.split("\n").map(rstrip).join("\n"));
}

/** A JSON value normalised: dropped keys removed at every depth, strings normalised. */
export function normalise(value: unknown, dropped: ReadonlySet<string> = new Set()): unknown {
  if (typeof value === "string") return normaliseText(value);
  if (value === null || value === undefined) return null;
  if (Array.isArray(value)) return value.map((item) => normalise(item, dropped));
  if (value instanceof JsonFloat || typeof value !== "object") return value;
  const withJson = value as { toJSON?: () => unknown };
  if (typeof withJson.toJSON === "function") return normalise(withJson.toJSON(), dropped);
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (dropped.has(key) || item === undefined) continue;
    if (key === "__proto__") {
      Object.defineProperty(out, key, {
        value: normalise(item, dropped),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    } else {
      out[key] = normalise(item, dropped);
    }
  }
  return out;
}

/** `sha256:<hex>` of the canonical JSON of an already-normalised value. */
export function digest(value: unknown): string {
  return FINGERPRINT_PREFIX + createHash("sha256").update(canonicalJson(value), "utf8").digest("hex");
}

/** The exact text that `callFingerprint` hashes. */
export function callCanonical(toolName: string, args: unknown): string {
  return canonicalJson({
    tool_name: normaliseText(toolName),
    arguments: normalise(args, CALL_DROPPED_KEYS),
  });
}

/** The exact text that `resultFingerprint` hashes. */
export function resultCanonical(toolName: string, result: unknown, error: string | null): string {
  return canonicalJson({
    tool_name: normaliseText(toolName),
    success: error === null,
    result: normalise(result, RESULT_DROPPED_KEYS),
    error: error === null ? null : normaliseText(error),
    connection_required: null,
  });
}

function sha(text: string): string {
  return FINGERPRINT_PREFIX + createHash("sha256").update(text, "utf8").digest("hex");
}

/** Fingerprint of a tool call; `human_intent` and `output` arguments do not count. */
export function callFingerprint(toolName: string, args: unknown): string {
  return sha(callCanonical(toolName, args));
}

/** Fingerprint of a tool result (error null: success); volatile keys do not count. */
export function resultFingerprint(toolName: string, result: unknown, error: string | null): string {
  return sha(resultCanonical(toolName, result, error));
}

/** The exact text that `textFingerprint` hashes. */
export function textCanonical(text: string): string {
  return canonicalJson({ text: normaliseText(text) });
}

/** Fingerprint of an assistant message's text (contract 1.3, §9.14): what a runtime sends
 * as `text_fingerprint` instead of the text. */
export function textFingerprint(text: string): string {
  return sha(textCanonical(text));
}
