/**
 * Vercel AI SDK (`ai`, v6: LanguageModelV3): a language model middleware that places
 * loopwatch warnings into each model call.
 *
 *     import { wrapLanguageModel, generateText } from "ai";
 *     import { loopwatchMiddleware } from "@loopwatch/client/ai-sdk";
 *
 *     const model = wrapLanguageModel({
 *       model: openai.chat("gpt-4.1"),
 *       middleware: loopwatchMiddleware({ client, sessionId: "s-42" }),
 *     });
 *     await generateText({ model, tools, prompt, stopWhen: stepCountIs(20) });
 *
 * Before every call (each step of a multi-step run) `transformParams` sees the exact
 * prompt about to be sent: it publishes the messages not published yet (docs/contract.md
 * §6), waits for their verdicts (fail-open; no wait with the circuit open) and returns
 * params whose prompt carries each warning as a `system` message at its place (OpenAI
 * Chat rules: after the run of tool results). The SDK's own messages (`response.messages`,
 * `steps`) never contain a warning: only this call's params are changed.
 *
 * A tool result is failed when its output is `error-text` / `error-json` (the SDK's
 * answer to a tool that threw), so rule 1 works with the SDK's defaults.
 *
 * `placeAs: "user"` places warnings as user text messages instead, for providers that
 * accept system messages only at the start (Anthropic: the provider merges them into the
 * user turn after the tool results).
 */

import type { LoopwatchClient } from "../client.js";
import { type Message, openaiPoints } from "../placement.js";

/** The parts of LanguageModelV3's prompt this adapter reads (structural, no import). */
interface PromptPart {
  type: string;
  text?: string;
  toolCallId?: string;
  toolName?: string;
  input?: unknown;
  output?: { type: string; value?: unknown; reason?: string };
}
interface PromptMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string | PromptPart[];
}
interface CallParams {
  prompt: PromptMessage[];
}

export interface AiSdkOptions<P extends CallParams> {
  client: LoopwatchClient;
  /** The session (conversation) id, or a function of the call's params. */
  sessionId: string | ((params: P) => string);
  agentId?: string | null;
  /** How a warning enters the prompt (default "system"). */
  placeAs?: "system" | "user";
  /** The verdict wait, ms (default: the client's). */
  timeoutMs?: number;
}

/** A `LanguageModelV3Middleware` (pass it to `wrapLanguageModel`). */
export function loopwatchMiddleware<P extends CallParams>(
  options: AiSdkOptions<P>,
): { specificationVersion: "v3"; transformParams: (o: { params: P }) => Promise<P> } {
  return {
    specificationVersion: "v3",
    transformParams: async ({ params }) => {
      try {
        return await placeWarnings(options, params);
      } catch (error) {
        // Never into the agent's call path: the call goes on without warnings.
        console.warn(`loopwatch: ai-sdk middleware skipped (${error instanceof Error ? error.name : typeof error})`);
        return params;
      }
    },
  };
}

async function placeWarnings<P extends CallParams>(options: AiSdkOptions<P>, params: P): Promise<P> {
  const sessionId = typeof options.sessionId === "string" ? options.sessionId : options.sessionId(params);
  const tracker = options.client.tracker(sessionId, "openai", {
    toolError: (m) => (typeof m.loopwatch_error === "string" ? m.loopwatch_error : null),
    ...(options.agentId !== undefined ? { agentId: options.agentId } : {}),
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
  });
  const { chat, origin } = asChat(params.prompt);
  const warnings = await tracker.warnings(chat);
  if (warnings.size === 0) return params;
  const after = new Map<number, string[]>(); // prompt index -> warning texts
  for (const [chatIndex, texts] of openaiPoints(chat, warnings)) {
    const at = origin[chatIndex] as number;
    after.set(at, [...(after.get(at) ?? []), ...texts]);
  }
  const prompt: PromptMessage[] = [];
  params.prompt.forEach((message, index) => {
    prompt.push(message);
    for (const text of after.get(index) ?? []) {
      prompt.push(
        options.placeAs === "user"
          ? { role: "user", content: [{ type: "text", text }] }
          : { role: "system", content: text },
      );
    }
  });
  return { ...params, prompt };
}

/** The prompt as OpenAI Chat messages, and for each the index of its prompt message. */
export function asChat(prompt: readonly PromptMessage[]): { chat: Message[]; origin: number[] } {
  const chat: Message[] = [];
  const origin: number[] = [];
  const push = (message: Message, index: number): void => {
    chat.push(message);
    origin.push(index);
  };
  prompt.forEach((message, index) => {
    const parts = typeof message.content === "string" ? [{ type: "text", text: message.content }] : message.content;
    const text = parts
      .filter((p) => p.type === "text" && typeof p.text === "string")
      .map((p) => p.text as string)
      .join("\n");
    if (message.role === "system" || message.role === "user") {
      push({ role: message.role, content: text || null }, index);
    } else if (message.role === "assistant") {
      const calls = parts
        .filter((p) => p.type === "tool-call")
        .map((p) => ({
          id: p.toolCallId ?? "",
          type: "function",
          function: { name: p.toolName ?? "", arguments: p.input ?? {} },
        }));
      push({ role: "assistant", content: text || null, ...(calls.length > 0 ? { tool_calls: calls } : {}) }, index);
    } else if (message.role === "tool") {
      for (const part of parts) {
        if (part.type !== "tool-result") continue;
        const { content, error } = resultOf(part.output);
        push(
          {
            role: "tool",
            tool_call_id: part.toolCallId ?? "",
            name: part.toolName ?? "unknown",
            content,
            ...(error !== null ? { loopwatch_error: error } : {}),
          },
          index,
        );
      }
    }
  });
  return { chat, origin };
}

function resultOf(output: PromptPart["output"]): { content: unknown; error: string | null } {
  if (output === undefined) return { content: null, error: null };
  switch (output.type) {
    case "error-text":
      return { content: output.value ?? null, error: String(output.value ?? "") };
    case "error-json":
      return { content: output.value ?? null, error: JSON.stringify(output.value ?? null) };
    case "execution-denied":
      return { content: null, error: output.reason ?? "execution denied" };
    case "content": {
      const parts = Array.isArray(output.value) ? (output.value as PromptPart[]) : [];
      return { content: parts.filter((p) => p.type === "text"), error: null };
    }
    default:
      return { content: output.value ?? null, error: null };
  }
}
