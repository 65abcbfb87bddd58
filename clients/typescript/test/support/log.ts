/** A logger that keeps the client's log lines for assertions, and can await one. */
import type { Logger } from "../../src/index.js";

export class MemoryLogger implements Logger {
  readonly lines: string[] = [];
  private waiters: { prefix: string; resolve: () => void }[] = [];

  warn(message: string): void {
    this.lines.push(message);
    this.waiters = this.waiters.filter((w) => {
      if (!message.startsWith(w.prefix)) return true;
      w.resolve();
      return false;
    });
  }

  /** Resolves when a line starting with `prefix` is logged; rejects at the deadline. */
  waitFor(prefix: string, deadlineMs: number): Promise<void> {
    if (this.lines.some((l) => l.startsWith(prefix))) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no log line "${prefix}..." within ${deadlineMs} ms:\n${this.lines.join("\n")}`)), deadlineMs);
      this.waiters.push({
        prefix,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      });
    });
  }
}
