"""A real headless Chromium for page tests, driven through chromedriver (selenium).

Debian's `chromium` and `chromium-driver` (.ci/run installs them). Where they are missing
the test skips, except under CI=true, where that is a failure.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.kafka_broker import in_ci

# Without the background-networking flags a closed network refuses many connections and
# Chromium stalls on them; the page itself needs no network at all.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1440,1200",
)


def chromium_paths() -> tuple[str, str]:
    """(chromium, chromedriver); skips (or fails under CI) when either is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if browser and driver:
        return browser, driver
    reason = "no chromium/chromedriver (apt-get install chromium chromium-driver)"
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@contextmanager
def headless_chromium(profile_dir: Path) -> Iterator[WebDriver]:
    browser, driver_path = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")  # a fresh profile per test
    # an explicit driver path: selenium-manager (which downloads drivers) never runs
    driver = webdriver.Chrome(options=options, service=Service(driver_path))
    try:
        yield driver
    finally:
        driver.quit()


def chart_values(driver: WebDriver, container_id: str) -> dict[str, int]:
    """{bar label: value} of the bars drawn in the chart inside #container_id."""
    pairs: list[list[Any]] = driver.execute_script(
        "return [...document.querySelectorAll(`#${arguments[0]} .bar`)]"
        ".map(b => [b.dataset.label, Number(b.dataset.value)]);",
        container_id,
    )
    return {str(label): int(value) for label, value in pairs}


def full_page_screenshot(driver: WebDriver, path: Path) -> Path:
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1440, max(height + 200, 800))  # the window frame takes some
    assert driver.save_screenshot(str(path)), f"no screenshot written to {path}"
    return path
