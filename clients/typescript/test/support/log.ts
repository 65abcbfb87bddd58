/** A logger that keeps the client's log lines for assertions. */
import type { Logger } from "../../src/index.js";

export class MemoryLogger implements Logger {
  readonly lines: string[] = [];
  warn(message: string): void {
    this.lines.push(message);
  }
}
