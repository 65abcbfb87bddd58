"""The faust wing's workarounds are written against exact faust/aiokafka/mode versions."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from loopwatch.streams.kafka.faust_ext import PINNED


@pytest.mark.parametrize("distribution", sorted(PINNED))
def test_installed_versions_are_the_pinned_ones(distribution: str) -> None:
    installed = version(distribution)
    assert installed == PINNED[distribution], (
        f"{distribution} {installed} is installed, but streams/kafka/faust_ext was written "
        f"against {PINNED[distribution]}: re-check every private API listed in "
        f"streams/kafka/faust_ext/__init__.py, then update PINNED and pyproject.toml together"
    )
