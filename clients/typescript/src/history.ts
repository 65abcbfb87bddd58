/**
 * A model API's message history as loopwatch events (docs/contract.md §6), pure. A port
 * of `loopwatch.streams.client.history`: the same events for the same history.
 *
 * Messages that are placed warnings (text starting with `[loopwatch] `) are skipped.
 */

import type { Call } from "./encoding.js";
import { type Json, parseJson, plainJson } from "./json.js";
import { MARKER, type Message } from "./placement.js";

export type Format = "openai" | "anthropic" | "responses";
export const FORMATS: readonly Format[] = ["openai", "anthropic", "responses"];

export type EventKind = "user_message" | "system_message" | "assistant_message" | "tool_result";

/** Given a tool result (Chat `tool` message, Anthropic `tool_result` block or Responses
 * `function_call_output` item), its error text, or null when it succeeded. */
export type ToolError = (result: Message) => string | null;

const NAMES_REMEMBERED = 1024;
const MODEL_OUTPUT_ITEMS = new Set(["reasoning", "function_call"]);

/** One event of a history, before it gets a session, `seq` and time. */
export interface HistoryEvent {
  kind: EventKind;
  /** Index of the history message it comes from (a warning is placed after it). */
  messageIndex: number;
  text: string | null;
  calls: Call[];
  callId: string | null;
  toolName: string | null;
  result: Json;
  error: string | null;
}

function event(kind: EventKind, messageIndex: number, fields: Partial<HistoryEvent> = {}): HistoryEvent {
  return {
    kind,
    messageIndex,
    text: null,
    calls: [],
    callId: null,
    toolName: null,
    result: null,
    error: null,
    ...fields,
  };
}

/** An Anthropic `tool_result` block with `is_error: true` failed with its text. */
export function anthropicToolError(block: Message): string | null {
  return block.is_error ? (plainText(block.content) ?? "") : null;
}

/** Chat and Responses results carry no error flag: every result counts as a success. */
export function noToolError(): string | null {
  return null;
}

const str = (v: unknown, fallback = ""): string => (typeof v === "string" ? v : fallback);

/** Turns consecutive parts of one history into events; remembers call names. */
export class HistoryReader {
  private readonly toolError: ToolError;
  private readonly names = new Map<string, string>();

  constructor(
    readonly format: Format,
    toolError?: ToolError,
  ) {
    if (!FORMATS.includes(format)) {
      throw new Error(`unknown history format ${JSON.stringify(format)}; expected one of ${FORMATS.join(", ")}`);
    }
    this.toolError = toolError ?? (format === "anthropic" ? anthropicToolError : noToolError);
  }

  /** The events of `messages.slice(start)`; message indexes count from 0 in `messages`. */
  events(messages: readonly Message[], start = 0): HistoryEvent[] {
    if (this.format === "openai") return this.chat(messages, start);
    if (this.format === "anthropic") return this.anthropic(messages, start);
    return this.responses(messages, start);
  }

  /** Anthropic's top-level system prompt, as an event placed before everything. */
  systemPrompt(text: string): HistoryEvent {
    return event("system_message", -1, { text });
  }

  private chat(messages: readonly Message[], start: number): HistoryEvent[] {
    const events: HistoryEvent[] = [];
    for (let index = start; index < messages.length; index++) {
      const message = messages[index] as Message;
      const role = message.role;
      const text = plainText(message.content);
      if (role === "system" || role === "developer" || role === "user") {
        if (!isWarning(text)) {
          events.push(event(role === "user" ? "user_message" : "system_message", index, { text }));
        }
      } else if (role === "assistant") {
        const calls = asList(message.tool_calls).map((c): Call => {
          const fn = (c.function ?? {}) as Message;
          return { id: str(c.id), name: str(fn.name), arguments: callArguments(fn) };
        });
        events.push(this.assistant(index, text, calls));
      } else if (role === "tool") {
        events.push(this.result(index, str(message.tool_call_id), message));
      }
    }
    return events;
  }

  private anthropic(messages: readonly Message[], start: number): HistoryEvent[] {
    const events: HistoryEvent[] = [];
    for (let index = start; index < messages.length; index++) {
      const message = messages[index] as Message;
      const blocks = contentBlocks(message.content);
      if (message.role === "assistant") {
        const calls = blocks
          .filter((b) => b.type === "tool_use")
          .map((b): Call => ({ id: str(b.id), name: str(b.name), arguments: b.input === undefined ? {} : b.input }));
        const texts = blocks.filter((b) => b.type === "text").map((b) => str(b.text));
        events.push(this.assistant(index, texts.join("\n") || null, calls));
        continue;
      }
      const others: Message[] = [];
      for (const block of blocks) {
        if (block.type === "tool_result") {
          events.push(this.result(index, str(block.tool_use_id), block));
        } else if (!(block.type === "text" && isWarning(block.text))) {
          others.push(block);
        }
      }
      if (others.length > 0 || blocks.length === 0) {
        const text = others
          .filter((b) => b.type === "text")
          .map((b) => str(b.text))
          .join("\n");
        events.push(event("user_message", index, { text: text || null }));
      }
    }
    return events;
  }

  private responses(items: readonly Message[], start: number): HistoryEvent[] {
    const events: HistoryEvent[] = [];
    let turnTexts: string[] = [];
    let turnCalls: Call[] = [];
    for (let index = start; index < items.length; index++) {
      const item = items[index] as Message;
      const kind = item.type ?? "message";
      const role = item.role;
      if (kind === "function_call") {
        turnCalls.push({ id: str(item.call_id), name: str(item.name), arguments: callArguments(item) });
      } else if (kind === "message" && role === "assistant") {
        turnTexts.push(plainText(item.content) ?? "");
      } else if (kind === "function_call_output") {
        events.push(this.result(index, str(item.call_id), item));
      } else if (kind === "message" && (role === "system" || role === "developer" || role === "user")) {
        const text = plainText(item.content);
        if (!isWarning(text)) {
          events.push(event(role === "user" ? "user_message" : "system_message", index, { text }));
        }
      } else if (!MODEL_OUTPUT_ITEMS.has(kind as string)) {
        continue; // built-in tool calls and the like: not part of the seed contract
      }
      // One model turn is one assistant event, anchored to the turn's last item.
      const following = index + 1 < items.length ? items[index + 1] : undefined;
      const inTurn = MODEL_OUTPUT_ITEMS.has(kind as string) || (kind === "message" && role === "assistant");
      if (inTurn && (following === undefined || !isModelOutput(following))) {
        const text = turnTexts.filter((t) => t).join("\n") || null;
        events.push(this.assistant(index, text, turnCalls));
        turnTexts = [];
        turnCalls = [];
      }
    }
    return events;
  }

  private assistant(index: number, text: string | null, calls: Call[]): HistoryEvent {
    for (const call of calls) {
      this.names.delete(call.id);
      this.names.set(call.id, call.name);
      while (this.names.size > NAMES_REMEMBERED) {
        this.names.delete(this.names.keys().next().value as string);
      }
    }
    return event("assistant_message", index, { text, calls });
  }

  private result(index: number, callId: string, message: Message): HistoryEvent {
    const content = this.format === "responses" ? message.output : message.content;
    const name = this.names.get(callId) ?? (str(message.name) || "unknown");
    return event("tool_result", index, {
      callId,
      toolName: name,
      result: resultValue(content),
      error: this.toolError(message),
    });
  }
}

/** The events of a whole history, in order (pure). */
export function historyEvents(messages: readonly Message[], format: Format, toolError?: ToolError): HistoryEvent[] {
  return new HistoryReader(format, toolError).events(messages);
}

function isModelOutput(item: Message): boolean {
  const kind = item.type ?? "message";
  return MODEL_OUTPUT_ITEMS.has(kind as string) || (kind === "message" && item.role === "assistant");
}

function isWarning(text: unknown): boolean {
  return typeof text === "string" && text.startsWith(MARKER);
}

function isObject(value: unknown): value is Message {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function asList(value: unknown): Message[] {
  return Array.isArray(value) ? value.filter(isObject) : [];
}

function contentBlocks(content: unknown): Message[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return asList(content);
}

/** The text of a message's content: a string, or the text parts of a part list. */
export function plainText(content: unknown): string | null {
  if (content === null || content === undefined) return null;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return null;
  const texts = content.filter(isObject).flatMap((b) => (typeof b.text === "string" ? [b.text] : []));
  return texts.length > 0 ? texts.join("\n") : null;
}

/** Call arguments: Chat and Responses send them as a JSON string (parsed keeping 1.0). */
function callArguments(fn: Message): unknown {
  const raw = fn.arguments;
  if (typeof raw !== "string") return raw === undefined || raw === null ? {} : raw;
  try {
    return parseJson(raw);
  } catch {
    return raw; // not JSON: fingerprinted as the string it is
  }
}

/** A result's content as JSON: text parts joined, anything else as plain JSON. */
function resultValue(content: unknown): Json {
  const value = Array.isArray(content) ? plainText(content) : content;
  return plainJson(value);
}
