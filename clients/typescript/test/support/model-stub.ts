/**
 * A local HTTP stand-in for the OpenAI Chat Completions API (non-streaming), for the
 * adapter tests: the "model" keeps making the same failing edit until it has seen
 * `loops` tool results, then answers in text. Every request body is kept.
 */

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface ChatRequest {
  model: string;
  messages: { role: string; content?: unknown; tool_calls?: unknown[]; tool_call_id?: string }[];
}

export class ModelStub {
  readonly requests: ChatRequest[] = [];
  private server: Server | null = null;
  constructor(
    private readonly loops: number,
    private readonly call = { name: "edit_file", arguments: { path: "src/app.py", old: "x = 1", new: "x = 2" } },
  ) {}

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      let body = "";
      req.on("data", (chunk: Buffer) => (body += chunk.toString("utf8")));
      req.on("end", () => {
        if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
          res.writeHead(404).end();
          return;
        }
        const request = JSON.parse(body) as ChatRequest;
        this.requests.push(request);
        const results = request.messages.filter((m) => m.role === "tool").length;
        const n = this.requests.length;
        const message =
          results < this.loops
            ? {
                role: "assistant",
                content: null,
                tool_calls: [
                  { id: `call_${n}`, type: "function", function: { name: this.call.name, arguments: JSON.stringify(this.call.arguments) } },
                ],
              }
            : { role: "assistant", content: "I could not make the edit; the file does not contain that text." };
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            id: `chatcmpl-${n}`,
            object: "chat.completion",
            created: Math.floor(Date.now() / 1000),
            model: request.model,
            choices: [{ index: 0, message, finish_reason: results < this.loops ? "tool_calls" : "stop" }],
            usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}/v1`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  /** The `[loopwatch] ` system messages of request `i`, with their positions. */
  warnings(i: number): { at: number; text: string }[] {
    const messages = this.requests[i]?.messages ?? [];
    return messages.flatMap((m, at) =>
      m.role === "system" && typeof m.content === "string" && m.content.startsWith("[loopwatch] ") ? [{ at, text: m.content }] : [],
    );
  }
}
