import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  CALL_DROPPED_KEYS,
  callCanonical,
  callFingerprint,
  RESULT_DROPPED_KEYS,
  resultCanonical,
  resultFingerprint,
  textCanonical,
  textFingerprint,
} from "../../src/fingerprints.js";
import { JsonFloat, parseJson, pyFloatRepr } from "../../src/index.js";
import { VECTORS } from "../support/paths.js";

interface CallVector {
  name: string;
  tool_name: string;
  arguments: unknown;
  canonical: string;
  fingerprint: string;
}
interface ResultVector {
  name: string;
  tool_name: string;
  result: unknown;
  error: string | null;
  canonical: string;
  fingerprint: string;
}
interface TextVector {
  name: string;
  text: string;
  canonical: string;
  fingerprint: string;
}
interface Vectors {
  call_dropped_keys: string[];
  result_dropped_keys: string[];
  calls: CallVector[];
  results: ResultVector[];
  texts: TextVector[];
}

// Read with the lossless parser: the file says 1 and 1.0 differ and big integers are exact.
const vectors = parseJson(readFileSync(VECTORS, "utf8")) as unknown as Vectors;

test("the vectors file is the shared one and has vectors", () => {
  assert.ok(vectors.calls.length >= 10);
  assert.ok(vectors.results.length >= 5);
  assert.deepEqual([...CALL_DROPPED_KEYS].sort(), [...vectors.call_dropped_keys].sort());
  assert.deepEqual([...RESULT_DROPPED_KEYS].sort(), [...vectors.result_dropped_keys].sort());
});

for (const v of vectors.calls) {
  test(`call vector: ${v.name}`, () => {
    assert.equal(callCanonical(v.tool_name, v.arguments), v.canonical);
    assert.equal(callFingerprint(v.tool_name, v.arguments), v.fingerprint);
  });
}

for (const v of vectors.results) {
  test(`result vector: ${v.name}`, () => {
    assert.equal(resultCanonical(v.tool_name, v.result, v.error), v.canonical);
    assert.equal(resultFingerprint(v.tool_name, v.result, v.error), v.fingerprint);
  });
}

for (const v of vectors.texts) {
  test(`text vector: ${v.name}`, () => {
    assert.equal(textCanonical(v.text), v.canonical);
    assert.equal(textFingerprint(v.text), v.fingerprint);
  });
}

test("1 and 1.0 differ; JSON.parse would lose that, parseJson keeps it", () => {
  const asInt = callFingerprint("read_file", parseJson('{"offset": 1}'));
  const asFloat = callFingerprint("read_file", parseJson('{"offset": 1.0}'));
  assert.notEqual(asInt, asFloat);
  assert.equal(callFingerprint("read_file", { offset: new JsonFloat(1) }), asFloat);
  assert.equal(callFingerprint("read_file", JSON.parse('{"offset": 1.0}')), asInt);
});

test("float text is Python's repr", () => {
  const cases: [number, string][] = [
    [0.1, "0.1"],
    [1e16, "1e+16"],
    [1e15, "1000000000000000.0"],
    [0.0001, "0.0001"],
    [0.00001, "1e-05"],
    [-2.5e-7, "-2.5e-07"],
    [1.5e300, "1.5e+300"],
    [123.456, "123.456"],
    [-0, "-0.0"],
    [5e-324, "5e-324"],
  ];
  for (const [x, text] of cases) assert.equal(pyFloatRepr(x), text, String(x));
  assert.throws(() => callFingerprint("t", { x: Number.NaN }));
});
