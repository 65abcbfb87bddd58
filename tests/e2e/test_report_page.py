"""The offline report in a real headless Chromium: over the shared trajectories, its charts
hold the numbers the detector found, and it draws with no network."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopwatch.models import RULES
from loopwatch.streams.cli import main
from tests.support.browser import chart_values, full_page_screenshot, headless_chromium
from tests.support.shared_data import trajectory_files
from tests.unit.fleetview.test_report import embedded


@pytest.mark.shared
def test_the_report_of_the_shared_trajectories_draws_its_numbers(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main(["report", *map(str, trajectory_files()), "--out", str(out)]) == 0
    numbers = embedded(out.read_text("utf-8"))
    assert numbers["totals"]["loops"] >= 1
    with headless_chromium(tmp_path / "chromium-profile") as driver:
        driver.get(out.as_uri())
        assert driver.execute_script("return document.body.dataset.loops") == str(
            numbers["totals"]["loops"]
        )
        assert chart_values(driver, "chart-rules") == {r: numbers["by_rule"][r] for r in RULES}
        assert chart_values(driver, "chart-agents") == dict(numbers["by_agent"])
        assert chart_values(driver, "chart-tools") == dict(numbers["by_tool"])
        sessions = {s["session_id"]: s["loops"] for s in numbers["top_sessions"]}
        assert chart_values(driver, "chart-sessions") == sessions
        repeats = dict(zip(numbers["repeats"]["labels"], numbers["repeats"]["counts"], strict=True))
        assert chart_values(driver, "chart-repeats") == repeats
        position = numbers["start_position"]
        assert chart_values(driver, "chart-position") == dict(
            zip(position["labels"], position["counts"], strict=True)
        )
        # the drill-down: one row per loop, by session, the session as its title
        rows = driver.execute_script(
            "return [...document.querySelectorAll('#loop-list li')].map(li => li.dataset.title)"
        )
        assert rows == [loop["session_id"] for loop in numbers["loop_list"]]
        assert len(rows) == numbers["totals"]["loops"]
        # nothing was fetched: the page is one file
        fetched = driver.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
        assert fetched == []
        shot = full_page_screenshot(driver, tmp_path / "report.png")
    assert shot.stat().st_size > 0
