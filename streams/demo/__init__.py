"""`loopwatch demo`: a worker and a simulated agent fleet (no model, no network)."""
