/**
 * OpenAI Agents SDK for JS (`@openai/agents`): a `callModelInputFilter` that places
 * loopwatch warnings into each model call.
 *
 *     import { run } from "@openai/agents";
 *     import { loopwatchInputFilter } from "@loopwatch/client/openai-agents";
 *
 *     await run(agent, "fix the build", {
 *       callModelInputFilter: loopwatchInputFilter({ client, sessionId: "s-42" }),
 *     });
 *
 * The filter sees the input items about to be sent: it publishes the new ones
 * (docs/contract.md §6, Responses API items), waits for their verdicts (fail-open; no wait
 * with the circuit open) and returns a copy of the input with each warning as a `system`
 * message item at its place. The run's own history (`result.history`) never contains a
 * warning.
 *
 * Function outputs carry no error flag. A tool that threw is answered by the SDK's default
 * error function with a fixed text, which `sdkToolError` recognises, so rule 1 works with
 * the SDK's defaults; a tool with its own `errorFunction` needs a `toolError` of its own.
 */

import type { LoopwatchClient } from "../client.js";
import type { ToolError } from "../history.js";
import { type Message, responsesPoints } from "../placement.js";

/** What the SDK returns to the model for a tool that threw (its default; fixed text). */
export const SDK_TOOL_ERROR_TEXT = "An error occurred while running the tool. Please try again.";

/** A function output with the SDK's default failure text failed with it. */
export const sdkToolError: ToolError = (item) => (item.output === SDK_TOOL_ERROR_TEXT ? SDK_TOOL_ERROR_TEXT : null);

type Item = Record<string, unknown>;
interface FilterArgs {
  modelData: { input: Item[]; instructions?: string };
}

export interface AgentsOptions<A extends FilterArgs> {
  client: LoopwatchClient;
  /** The session (conversation) id, or a function of the filter's arguments. */
  sessionId: string | ((args: A) => string);
  agentId?: string | null;
  /** Which function outputs are failures (default: the SDK's default failure text). */
  toolError?: ToolError;
  /** The verdict wait, ms (default: the client's). */
  timeoutMs?: number;
}

/** A `RunConfig.callModelInputFilter` for one session (or one per call of `sessionId(args)`). */
export function loopwatchInputFilter<A extends FilterArgs>(
  options: AgentsOptions<A>,
): (args: A) => Promise<A["modelData"]> {
  return async (args) => {
    try {
      return await placeWarnings(options, args);
    } catch (error) {
      console.warn(`loopwatch: agents input filter skipped (${error instanceof Error ? error.name : typeof error})`);
      return args.modelData;
    }
  };
}

async function placeWarnings<A extends FilterArgs>(options: AgentsOptions<A>, args: A): Promise<A["modelData"]> {
  const sessionId = typeof options.sessionId === "string" ? options.sessionId : options.sessionId(args);
  const tracker = options.client.tracker(sessionId, "responses", {
    toolError: options.toolError ?? sdkToolError,
    ...(options.agentId !== undefined ? { agentId: options.agentId } : {}),
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
  });
  const input = args.modelData.input;
  const items = input.map(asResponsesItem);
  const warnings = await tracker.warnings(items);
  if (warnings.size === 0) return args.modelData;
  const points = responsesPoints(items, warnings);
  const placed: Item[] = [];
  input.forEach((item, index) => {
    placed.push(item);
    for (const text of points.get(index) ?? []) placed.push({ type: "message", role: "system", content: text });
  });
  return { ...args.modelData, input: placed };
}

/** An Agents SDK input item as a Responses API input item (what the tracker reads). */
export function asResponsesItem(item: Item): Message {
  const type = (item.type as string | undefined) ?? "message";
  if (type === "function_call") {
    return { type, call_id: item.callId ?? item.call_id ?? "", name: item.name ?? "", arguments: item.arguments ?? "{}" };
  }
  if (type === "function_call_result" || type === "function_call_output") {
    return {
      type: "function_call_output",
      call_id: item.callId ?? item.call_id ?? "",
      name: item.name,
      output: outputText(item.output),
    };
  }
  if (type === "message") return { type, role: item.role, content: item.content };
  return { type };
}

function outputText(output: unknown): unknown {
  if (typeof output === "string") return output;
  if (output !== null && typeof output === "object") {
    const o = output as Item;
    if (o.type === "text" && typeof o.text === "string") return o.text;
    if (Array.isArray(output)) return output;
  }
  return output ?? null;
}
