/**
 * JSON as the Python side writes it (docs/contract.md §3): integers and floats kept apart,
 * big integers exact, floats written as Python's `repr`, keys sorted by Unicode code point.
 *
 * JavaScript has one number type, so the distinction is carried by the values:
 * - a `number` that is an integer is an integer (`1`); any other finite `number` is a float;
 * - a `bigint` is an integer (exact, any size);
 * - a `JsonFloat` is a float whose value is integral (`1.0`, `1e+100`, `-0.0`).
 * `parseJson` produces exactly these from JSON text, so `1.0` read from a model's
 * arguments string fingerprints as Python's `json.loads("1.0")` does.
 */

/** A float whose value happens to be integral (`1.0`), which must not encode as `1`. */
export class JsonFloat {
  constructor(readonly value: number) {}
  toJSON(): number {
    return this.value;
  }
}

/** A JSON value in this module's model (see the file comment). */
export type Json =
  | null
  | boolean
  | number
  | bigint
  | string
  | JsonFloat
  | Json[]
  | { [key: string]: Json };

export class JsonError extends Error {}

/** Python's `repr(float)`: shortest round-trip digits, fixed or exponent form as CPython. */
export function pyFloatRepr(x: number): string {
  if (!Number.isFinite(x)) throw new JsonError("NaN and infinities are not JSON");
  if (x === 0) return Object.is(x, -0) ? "-0.0" : "0.0";
  const sign = x < 0 ? "-" : "";
  const [mantissa, expText] = Math.abs(x).toExponential().split("e") as [string, string];
  const digits = mantissa.replace(".", "");
  const exp = Number(expText);
  const decpt = exp + 1; // value = 0.DIGITS x 10^decpt
  if (decpt > 16 || decpt < -3) {
    const rest = digits.slice(1);
    const e = Math.abs(exp).toString().padStart(2, "0");
    return `${sign}${digits[0]}${rest ? "." + rest : ""}e${exp < 0 ? "-" : "+"}${e}`;
  }
  if (decpt <= 0) return `${sign}0.${"0".repeat(-decpt)}${digits}`;
  if (decpt >= digits.length) return `${sign}${digits}${"0".repeat(decpt - digits.length)}.0`;
  return `${sign}${digits.slice(0, decpt)}.${digits.slice(decpt)}`;
}

function numberText(value: number): string {
  if (!Number.isFinite(value)) throw new JsonError("NaN and infinities are not JSON");
  if (Number.isInteger(value)) return BigInt(value).toString();
  return pyFloatRepr(value);
}

/** Compare two strings by Unicode code point (Python's `str` order), not UTF-16 units. */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Only a surrogate against U+E000..U+FFFF orders differently from code units.
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object") return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

function encode(value: unknown, sortKeys: boolean, itemSep: string, keySep: string): string {
  if (value === null || value === undefined) return "null";
  switch (typeof value) {
    case "string":
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "number":
      return numberText(value);
    case "bigint":
      return value.toString();
    default:
      break;
  }
  if (value instanceof JsonFloat) return pyFloatRepr(value.value);
  if (Array.isArray(value)) {
    return "[" + value.map((v) => encode(v, sortKeys, itemSep, keySep)).join(itemSep) + "]";
  }
  if (typeof value === "object") {
    const source = isPlainObject(value) ? value : toPlain(value);
    if (!isPlainObject(source)) return encode(source, sortKeys, itemSep, keySep);
    let keys = Object.keys(source).filter((k) => source[k] !== undefined);
    if (sortKeys) keys = keys.sort(compareCodePoints);
    const parts = keys.map(
      (k) => JSON.stringify(k) + keySep + encode(source[k], sortKeys, itemSep, keySep),
    );
    return "{" + parts.join(itemSep) + "}";
  }
  throw new JsonError(`not JSON: ${typeof value}`);
}

function toPlain(value: object): unknown {
  const withJson = value as { toJSON?: () => unknown };
  if (typeof withJson.toJSON === "function") return withJson.toJSON();
  return String(value);
}

/** Compact JSON, keys sorted by code point, non-ASCII as is: the bytes fingerprints hash. */
export function canonicalJson(value: unknown): string {
  return encode(value, true, ",", ":");
}

/** What Python's `json.dumps(value, ensure_ascii=False)` writes (", " and ": ",
 * keys in insertion order): the event records of the Python client, byte for byte. */
export function pythonJson(value: unknown): string {
  return encode(value, false, ", ", ": ");
}

/** A value as plain JSON of this module's model: objects with `toJSON` converted, other
 * non-JSON objects as their string (Python's `default=str`), undefined object fields
 * dropped, undefined array items as null. */
export function plainJson(value: unknown): Json {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case "string":
    case "boolean":
    case "bigint":
      return value;
    case "number":
      return Number.isFinite(value) ? value : null;
    case "function":
    case "symbol":
      return null;
    default:
      break;
  }
  if (value instanceof JsonFloat) return value;
  if (Array.isArray(value)) return value.map((v) => plainJson(v));
  if (isPlainObject(value)) {
    const out: { [key: string]: Json } = {};
    for (const [k, v] of Object.entries(value)) {
      if (v !== undefined && typeof v !== "function") setKey(out, k, plainJson(v));
    }
    return out;
  }
  return plainJson(toPlain(value as object));
}

function setKey(target: { [key: string]: Json }, key: string, value: Json): void {
  if (key === "__proto__") {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

/**
 * Parse JSON text keeping what `JSON.parse` loses: `1.0` stays a float (`JsonFloat`),
 * integers beyond 2^53 stay exact (`bigint`). Rejects what Python's `json.loads` would
 * reject for a record (NaN, Infinity, trailing garbage).
 */
export function parseJson(text: string): Json {
  let at = 0;
  const fail = (what: string): never => {
    throw new JsonError(`${what} at position ${at}`);
  };
  const ws = (): void => {
    while (at < text.length) {
      const c = text.charCodeAt(at);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) at++;
      else break;
    }
  };
  const value = (): Json => {
    ws();
    const c = text[at];
    if (c === "{") {
      at++;
      const out: { [key: string]: Json } = {};
      ws();
      if (text[at] === "}") {
        at++;
        return out;
      }
      for (;;) {
        ws();
        if (text[at] !== '"') fail("expected a key");
        const key = string();
        ws();
        if (text[at] !== ":") fail("expected ':'");
        at++;
        setKey(out, key, value());
        ws();
        if (text[at] === ",") {
          at++;
          continue;
        }
        if (text[at] === "}") {
          at++;
          return out;
        }
        fail("expected ',' or '}'");
      }
    }
    if (c === "[") {
      at++;
      const out: Json[] = [];
      ws();
      if (text[at] === "]") {
        at++;
        return out;
      }
      for (;;) {
        out.push(value());
        ws();
        if (text[at] === ",") {
          at++;
          continue;
        }
        if (text[at] === "]") {
          at++;
          return out;
        }
        fail("expected ',' or ']'");
      }
    }
    if (c === '"') return string();
    if (text.startsWith("true", at)) {
      at += 4;
      return true;
    }
    if (text.startsWith("false", at)) {
      at += 5;
      return false;
    }
    if (text.startsWith("null", at)) {
      at += 4;
      return null;
    }
    return number();
  };
  const string = (): string => {
    const start = at;
    at++;
    let simple = true;
    while (at < text.length) {
      const c = text[at];
      if (c === '"') break;
      if (c === "\\") {
        simple = false;
        at += 2;
        continue;
      }
      if (text.charCodeAt(at) < 0x20) fail("control character in string");
      at++;
    }
    if (at >= text.length) fail("unterminated string");
    at++;
    const raw = text.slice(start, at);
    return simple ? raw.slice(1, -1) : (JSON.parse(raw) as string);
  };
  const number = (): Json => {
    const match = /^-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(at, at + 400));
    if (match === null) return fail("unexpected character");
    const raw = match[0];
    at += raw.length;
    if (match[1] === undefined && match[2] === undefined) {
      const n = Number(raw);
      return Number.isSafeInteger(n) ? n : BigInt(raw);
    }
    const f = Number(raw);
    if (!Number.isFinite(f)) fail("number out of range");
    return Number.isInteger(f) ? new JsonFloat(f) : f;
  };
  const out = value();
  ws();
  if (at !== text.length) fail("extra data");
  return out;
}
