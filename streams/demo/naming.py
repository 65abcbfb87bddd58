"""The demo's own names: an app id and topics of its own on whatever broker it uses, so a
demo never publishes into a deployment's topics nor joins its consumer group."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

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


def isolated_env(
    bootstrap: str, prefix: str, partitions: int, web_port: int, data_dir: Path
) -> dict[str, str]:
    """A worker's whole environment for a run of its own on a shared broker (a test's, a
    bench's): this process's environment without its `LOOPWATCH_` variables, the app id
    and every topic named after `prefix` (`demo_names`), and the other settings given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPWATCH_")}
    env.update(
        demo_names(prefix),
        KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        LOOPWATCH_PARTITIONS=str(partitions),
        LOOPWATCH_WEB_PORT=str(web_port),
        LOOPWATCH_DATA_DIR=str(data_dir),
    )
    return env
