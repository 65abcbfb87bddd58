"""The loopwatch wire contract (SPEC.md): events, verdicts, config and fingerprints."""
