/** Where the shared contract files live, relative to this package (clients/typescript). */
import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
/** clients/typescript (this file is at dist/test/support/). */
export const PACKAGE_ROOT = resolve(here, "..", "..", "..");
/** The repository root. */
export const REPO_ROOT = resolve(PACKAGE_ROOT, "..", "..");
export const VECTORS = resolve(REPO_ROOT, "models", "fingerprint_vectors.json");

/** The venv's python (override: LOOPWATCH_PYTHON). */
export function pythonPath(): string {
  return process.env.LOOPWATCH_PYTHON ?? resolve(REPO_ROOT, ".venv", "bin", "python");
}

/** The `loopwatch` command next to that python (override: LOOPWATCH_CLI). */
export function loopwatchCli(): string {
  return process.env.LOOPWATCH_CLI ?? resolve(dirname(pythonPath()), "loopwatch");
}

export function havePython(): boolean {
  return existsSync(pythonPath());
}
