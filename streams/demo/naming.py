"""The demo's own names: an app id and topics of its own on whatever broker it uses, so a
demo never publishes into a deployment's topics nor joins its consumer group."""

from __future__ import annotations

import uuid

from loopwatch.streams.settings import ENVIRONMENT, Settings

DEMO_PREFIX = "loopwatch-demo-"


def new_run_prefix() -> str:
    """`loopwatch-demo-<8 hex>`: unique per run."""
    return f"{DEMO_PREFIX}{uuid.uuid4().hex[:8]}"


def demo_names(prefix: str) -> dict[str, str]:
    """Environment entries that give the app id and every topic the run's prefix.

    Derived from the settings' own fields, so a topic added to the settings is renamed
    here too."""
    names = {ENVIRONMENT["app_id"][0]: prefix}
    for field, (variable, _parse) in ENVIRONMENT.items():
        if field.endswith("_topic"):
            default = Settings.model_fields[field].default
            names[variable] = f"{prefix}.{default}"
    return names
