/**
 * `@loopwatch/client`: what a TypeScript agent runtime imports to publish events, await
 * verdicts and place warnings (docs/contract.md). The framework adapters are separate
 * entry points: `@loopwatch/client/ai-sdk`, `@loopwatch/client/openai-agents`.
 */

export { CircuitBreaker, type BreakerSnapshot, type CircuitState, type FailureKind } from "./breaker.js";
export { LoopwatchClient, type ClientOptions } from "./client.js";
export { EventEncoder, isoTimestamp, WITHHELD_ERROR, type Call } from "./encoding.js";
export {
  CALL_DROPPED_KEYS,
  callCanonical,
  callFingerprint,
  normalise,
  normaliseText,
  RESULT_DROPPED_KEYS,
  resultCanonical,
  resultFingerprint,
} from "./fingerprints.js";
export {
  anthropicToolError,
  FORMATS,
  HistoryReader,
  historyEvents,
  noToolError,
  type EventKind,
  type Format,
  type HistoryEvent,
  type ToolError,
} from "./history.js";
export { canonicalJson, JsonFloat, parseJson, plainJson, pyFloatRepr, pythonJson, type Json } from "./json.js";
export { Ledger, type PlacedWarning } from "./ledger.js";
export {
  MARKER,
  openaiPoints,
  placeAnthropic,
  placeOpenai,
  placeResponses,
  responsesPoints,
  warningText,
  type Message,
  type WarningsByMessage,
} from "./placement.js";
export { Session, type PublishOptions, type VerdictWait } from "./session.js";
export type { StatsSnapshot } from "./stats.js";
export { HistoryTracker, type TrackerOptions } from "./tracker.js";
export type { Logger } from "./transport.js";
export { parseVerdict, type LoopVerdict, type LoopWarning } from "./verdict.js";
