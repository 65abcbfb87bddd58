/** Verdict records (docs/contract.md §5, §9.8) and their validation on read. */

export interface LoopWarning {
  rule: string;
  tool_names: string[];
  count: number;
  threshold: number;
  message: string;
  /** Escalation (§9.13, with `escalation` on): 1 warn, 2 insist, 3 stop advised. */
  level?: 1 | 2 | 3;
}

export interface LoopVerdict {
  v: 1;
  type: "loop_verdict";
  session_id: string;
  seq: number;
  agent_id: string | null;
  event_ts: string;
  evaluated_at: string;
  warning: LoopWarning | null;
  policy?: { key: string; version: number };
  /** Contract 1.2 (§8.5): present, as true, when the session's state was reset as idle
   * just before this event. */
  state_reset?: true;
}

const isInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v);
const isStr = (v: unknown): v is string => typeof v === "string";

function isWarning(w: unknown): w is LoopWarning {
  if (w === null || typeof w !== "object") return false;
  const o = w as Record<string, unknown>;
  return (
    isStr(o.rule) &&
    Array.isArray(o.tool_names) &&
    o.tool_names.every(isStr) &&
    isInt(o.count) &&
    isInt(o.threshold) &&
    isStr(o.message) &&
    (o.level === undefined || (isInt(o.level) && o.level >= 1 && o.level <= 3))
  );
}

/** The verdict in a record's value, or null when it is not one (bad records are skipped). */
export function parseVerdict(value: Buffer | string): LoopVerdict | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(typeof value === "string" ? value : value.toString("utf8"));
  } catch {
    return null;
  }
  if (parsed === null || typeof parsed !== "object") return null;
  const o = parsed as Record<string, unknown>;
  const ok =
    (o.v === undefined || o.v === 1) &&
    o.type === "loop_verdict" &&
    isStr(o.session_id) &&
    isInt(o.seq) &&
    o.seq >= 0 &&
    (o.agent_id === undefined || o.agent_id === null || isStr(o.agent_id)) &&
    isStr(o.event_ts) &&
    isStr(o.evaluated_at) &&
    (o.warning === null || o.warning === undefined || isWarning(o.warning)) &&
    (o.state_reset === undefined || o.state_reset === true);
  if (!ok) return null;
  return {
    ...(o as unknown as LoopVerdict),
    v: 1,
    agent_id: (o.agent_id as string | null | undefined) ?? null,
    warning: (o.warning as LoopWarning | null | undefined) ?? null,
  };
}
