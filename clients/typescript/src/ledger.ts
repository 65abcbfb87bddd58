/**
 * What one session has published and which verdicts came back (pure, no I/O). A port of
 * `loopwatch.streams.client.ledger`: a verdict that arrives after its message was already
 * handed out in a prompt is anchored to the newest message instead, so it only appends.
 */

import type { LoopVerdict, LoopWarning } from "./verdict.js";

/** A warning with the history message it is placed after. */
export interface PlacedWarning {
  /** The seq of the event that produced it. */
  seq: number;
  /** Index (number) of the message in the runtime's history; null when the event had none. */
  messageIndex: number | null;
  warning: LoopWarning;
}

export class Ledger {
  /** The seq of the newest published event. */
  lastSeq: number | null = null;
  /** The highest seq whose verdict has arrived. */
  receivedThrough: number | null = null;
  private readonly messageOf = new Map<number, number>();
  private newestMessage: number | null = null;
  private unplaced: [LoopVerdict, number | null][] = [];
  private readonly placed: PlacedWarning[] = [];
  private handedThrough: number | null = null;

  published(seq: number, messageIndex: number | null): void {
    this.lastSeq = seq;
    if (messageIndex !== null) {
      this.messageOf.set(seq, messageIndex);
      this.newestMessage = Math.max(messageIndex, this.newestMessage ?? 0);
    }
  }

  /** Record a verdict; false for one already seen (redelivered). */
  received(verdict: LoopVerdict): boolean {
    if (this.receivedThrough !== null && verdict.seq <= this.receivedThrough) return false;
    this.receivedThrough = verdict.seq;
    const anchor = this.messageOf.get(verdict.seq) ?? null;
    for (const seq of [...this.messageOf.keys()]) {
      if (seq > verdict.seq) break;
      this.messageOf.delete(seq);
    }
    if (verdict.warning !== null) this.unplaced.push([verdict, anchor]);
    return true;
  }

  hasVerdict(throughSeq: number): boolean {
    return this.receivedThrough !== null && this.receivedThrough >= throughSeq;
  }

  /** Every warning received so far, anchored; call it when building a prompt. */
  warnings(): PlacedWarning[] {
    for (const [verdict, ownMessage] of this.unplaced) {
      let anchor = ownMessage;
      const late = this.handedThrough !== null && verdict.seq <= this.handedThrough;
      if (late && ownMessage !== null && this.newestMessage !== null) anchor = this.newestMessage;
      this.placed.push({ seq: verdict.seq, messageIndex: anchor, warning: verdict.warning as LoopWarning });
    }
    this.unplaced = [];
    this.handedThrough = this.lastSeq;
    return [...this.placed];
  }

  /** Warning texts keyed by history message index, as `placement` takes them. */
  warningsByMessage(): Map<number, string[]> {
    const byMessage = new Map<number, string[]>();
    for (const placed of this.warnings()) {
      if (placed.messageIndex !== null) {
        const list = byMessage.get(placed.messageIndex) ?? [];
        list.push(placed.warning.message);
        byMessage.set(placed.messageIndex, list);
      }
    }
    return byMessage;
  }
}
