/**
 * Warnings into a model prompt (docs/contract.md §6): OpenAI Chat, Anthropic Messages and
 * OpenAI Responses API input items. Pure: the caller's history is never modified (every
 * message is copied). A port of `loopwatch.streams.client.placement`.
 */

export const MARKER = "[loopwatch] ";

export type Message = Readonly<Record<string, unknown>>;
/** Index of a history message -> the warning texts of the events it produced, in order. */
export type WarningsByMessage = ReadonlyMap<number, readonly string[]>;

/** The text of one placed warning (the marker is not added twice). */
export function warningText(message: string): string {
  return message.startsWith(MARKER) ? message : MARKER + message;
}

/** A deep copy of arrays and plain objects; anything else (class instances) is shared. */
function copy<T>(value: T): T {
  if (Array.isArray(value)) return value.map((item: unknown) => copy(item)) as T;
  if (value !== null && typeof value === "object") {
    const proto = Object.getPrototypeOf(value) as unknown;
    if (proto === Object.prototype || proto === null) {
      const out: Record<string, unknown> = {};
      for (const [key, item] of Object.entries(value)) out[key] = copy(item);
      return out as T;
    }
  }
  return value;
}

/** The prompt for OpenAI Chat: each warning as a `system` message after its point. */
export function placeOpenai(messages: readonly Message[], warnings: WarningsByMessage): Record<string, unknown>[] {
  return insert(messages, openaiPoints(messages, warnings), (text) => ({ role: "system", content: text }));
}

/** The input for the OpenAI Responses API: each warning as a `system` message item. */
export function placeResponses(items: readonly Message[], warnings: WarningsByMessage): Record<string, unknown>[] {
  return insert(items, responsesPoints(items, warnings), (text) => ({
    type: "message",
    role: "system",
    content: text,
  }));
}

/** Where warnings go in an OpenAI Chat history: index to insert after -> placed texts. */
export function openaiPoints(messages: readonly Message[], warnings: WarningsByMessage): Map<number, string[]> {
  return points(messages, warnings, openaiPoint);
}

/** Where warnings go among Responses API input items: index to insert after -> texts. */
export function responsesPoints(items: readonly Message[], warnings: WarningsByMessage): Map<number, string[]> {
  return points(items, warnings, responsesPoint);
}

function points(
  messages: readonly Message[],
  warnings: WarningsByMessage,
  pointOf: (messages: readonly Message[], index: number) => number,
): Map<number, string[]> {
  checkIndexes(warnings, messages.length);
  const pending = new Map<number, string[]>();
  for (const index of [...warnings.keys()].sort((a, b) => a - b)) {
    const at = pointOf(messages, index);
    const list = pending.get(at) ?? [];
    list.push(...(warnings.get(index) ?? []).map(warningText));
    pending.set(at, list);
  }
  return pending;
}

function insert(
  messages: readonly Message[],
  at: ReadonlyMap<number, readonly string[]>,
  make: (text: string) => Record<string, unknown>,
): Record<string, unknown>[] {
  const prompt: Record<string, unknown>[] = [];
  messages.forEach((message, index) => {
    prompt.push(copy({ ...message }));
    for (const text of at.get(index) ?? []) prompt.push(make(text));
  });
  return prompt;
}

function openaiPoint(messages: readonly Message[], index: number): number {
  const message = messages[index] as Message;
  const calls = message.tool_calls;
  const hasCalls = Array.isArray(calls) ? calls.length > 0 : Boolean(calls);
  if (message.role === "tool" || (message.role === "assistant" && hasCalls)) {
    while (index + 1 < messages.length && messages[index + 1]?.role === "tool") index++;
  }
  return index;
}

function responsesPoint(items: readonly Message[], index: number): number {
  const kinds = ["function_call", "function_call_output"];
  const kind = items[index]?.type;
  const from = kinds.indexOf(kind as string);
  if (from < 0) return index;
  for (const skipped of kinds.slice(from)) {
    while (index + 1 < items.length && items[index + 1]?.type === skipped) index++;
  }
  return index;
}

/** The prompt for Anthropic Messages: each warning as a text block in a user turn. */
export function placeAnthropic(messages: readonly Message[], warnings: WarningsByMessage): Record<string, unknown>[] {
  checkIndexes(warnings, messages.length);
  const leading = new Map<number, string[]>();
  const trailing = new Map<number, string[]>();
  const add = (map: Map<number, string[]>, key: number, texts: string[]): void => {
    map.set(key, [...(map.get(key) ?? []), ...texts]);
  };
  for (const index of [...warnings.keys()].sort((a, b) => a - b)) {
    const texts = (warnings.get(index) ?? []).map(warningText);
    if (messages[index]?.role === "user") add(trailing, index, texts);
    else add(leading, index + 1, texts);
  }
  const prompt: Record<string, unknown>[] = [];
  messages.forEach((message, index) => {
    if (leading.has(index) || trailing.has(index)) {
      prompt.push(withWarnings(message, leading.get(index) ?? [], trailing.get(index) ?? []));
    } else {
      prompt.push(copy({ ...message }));
    }
  });
  const last = leading.get(messages.length);
  if (last !== undefined) prompt.push({ role: "user", content: textBlocks(last) });
  return prompt;
}

function withWarnings(message: Message, leading: string[], trailing: string[]): Record<string, unknown> {
  if (message.role !== "user") {
    throw new Error("an Anthropic history must alternate user and assistant messages");
  }
  const content = message.content;
  const blocks: unknown[] =
    typeof content === "string" ? [{ type: "text", text: content }] : copy([...((content as unknown[]) ?? [])]);
  let results = 0;
  while (results < blocks.length && isToolResult(blocks[results])) results++;
  const rebuilt = [...blocks.slice(0, results), ...textBlocks(leading), ...blocks.slice(results), ...textBlocks(trailing)];
  const copied = copy(Object.fromEntries(Object.entries(message).filter(([key]) => key !== "content")));
  copied.content = rebuilt;
  return copied;
}

function isToolResult(block: unknown): boolean {
  return typeof block === "object" && block !== null && (block as Record<string, unknown>).type === "tool_result";
}

function textBlocks(texts: readonly string[]): Record<string, unknown>[] {
  return texts.map((text) => ({ type: "text", text }));
}

function checkIndexes(warnings: WarningsByMessage, length: number): void {
  for (const index of warnings.keys()) {
    if (!(index >= 0 && index < length)) {
      throw new RangeError(`warning for message ${index}, but the history has ${length}`);
    }
  }
}
