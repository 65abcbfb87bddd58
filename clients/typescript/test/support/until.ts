/** Waiting for a condition that no event announces (a counter of the client's stats). */

/** Resolves once `condition()` holds, checked every 20 ms; rejects at the deadline with
 * `what()` (the state that was still wrong). */
export async function until(condition: () => boolean, deadlineMs: number, what: () => string): Promise<void> {
  const end = Date.now() + deadlineMs;
  while (!condition()) {
    if (Date.now() > end) throw new Error(`not within ${deadlineMs} ms: ${what()}`);
    await new Promise((resolve) => setTimeout(resolve, 20)); // polling a counter against a deadline
  }
}
