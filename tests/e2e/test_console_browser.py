"""The web console in a real headless Chromium (Debian's ``chromium`` and
``chromium-driver``, driven by selenium), served by ``sessionwire console`` as a real
process on a store with something of everything (console_scenario).

Screenshots are looked at: the sequence diagram's region must be drawn (participant
boxes, arrows, text), not blank. An accessibility check runs in the page on every view:
landmarks, one h1, a label for each control, a name for each image, and WCAG AA
contrast (4.5:1) for every piece of text, from the computed styles.

Without Chromium the tests skip with the reason, except under CI=true, where they fail
(.ci/run installs it).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from console_scenario import OPS, SECRET, TOKEN, Recorded, record_scenario
from png_pixels import colours, png_pixels

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")

if not (CHROMIUM and CHROMEDRIVER):
    if os.environ.get("CI") == "true":
        pytest.fail(
            "CI needs chromium and chromium-driver for the console's browser tests "
            "(apt-get install -y chromium chromium-driver)",
            pytrace=False,
        )
    pytest.skip(
        "the console's browser tests need Debian's chromium and chromium-driver "
        "(apt-get install -y chromium chromium-driver)",
        allow_module_level=True,
    )

from selenium import webdriver  # noqa: E402 (only once Chromium is known to be there)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.wait import WebDriverWait  # noqa: E402

# What a screen-reader or low-vision user would trip over, checked in the page.
A11Y_CHECK = (Path(__file__).parent / "a11y_check.js").read_text(encoding="utf-8")


def follow(browser: Any, element: Any) -> None:
    """Click ``element`` and wait until the page it leads to has replaced this one (the
    old page's elements go stale): finding elements right after a click could read the
    page being left."""
    page = browser.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(browser, 60).until(expected_conditions.staleness_of(page))


@pytest.fixture(scope="module")
def console_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Recorded]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('console')}/store.db"
    recorded = asyncio.run(record_scenario(url))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sessionwire.adapters.cli.main",
            "--store",
            url,
            "console",
            "--port",
            "0",
        ],
        env={**os.environ, "SESSIONWIRE_TOKEN": TOKEN},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # "sessionwire: console for … on http://…/console/"
        assert " on http://" in line, line
        yield line.rsplit(" on ", 1)[1].strip(), recorded
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1280,1000")
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def logged_in(browser: Any, console_url: tuple[str, Recorded]) -> tuple[Any, str, Recorded]:
    base, recorded = console_url
    browser.get(base)
    assert browser.current_url.endswith("/console/login"), "the console asks for a token"
    assert accessibility_problems(browser) == []
    browser.find_element(By.ID, "token").send_keys(TOKEN)
    follow(browser, browser.find_element(By.CSS_SELECTOR, "form button[type=submit]"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Sessions"
    return browser, base, recorded


def accessibility_problems(browser: Any) -> list[str]:
    return list(browser.execute_script(A11Y_CHECK))


def test_sessions_page_pages_and_searches(logged_in: tuple[Any, str, Recorded]) -> None:
    browser, base, _ = logged_in
    browser.get(base)
    rows = browser.find_elements(By.CSS_SELECTOR, "table.sessions tbody tr")
    assert len(rows) == 50
    # The stylesheet is served and applied (the header's dark band).
    header = browser.find_element(By.TAG_NAME, "header")
    assert header.value_of_css_property("background-color") == "rgba(16, 42, 67, 1)"
    assert accessibility_problems(browser) == []
    follow(browser, browser.find_element(By.CSS_SELECTOR, "a[rel=next]"))
    more = browser.find_elements(By.CSS_SELECTOR, "table.sessions tbody tr")
    assert 0 < len(more) <= 50
    search = browser.find_element(By.ID, "q")
    search.send_keys("group:ops")
    follow(browser, browser.find_element(By.CSS_SELECTOR, "form.filters button"))
    keys = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "table.sessions tbody a")]
    assert keys == [OPS]


def test_transcript_shows_provenance_masked(logged_in: tuple[Any, str, Recorded]) -> None:
    browser, base, recorded = logged_in
    browser.get(f"{base}sessions/{OPS}")
    text = browser.find_element(By.TAG_NAME, "main").text
    assert SECRET not in browser.page_source
    assert "[redacted:api-key]" in text
    assert f"trace {recorded.trace_id[:8]}" in text
    assert accessibility_problems(browser) == []


def test_exchange_diagram_is_drawn(logged_in: tuple[Any, str, Recorded], tmp_path: Path) -> None:
    browser, base, _ = logged_in
    browser.get(f"{base}sessions/{OPS}")
    follow(browser, browser.find_element(By.CSS_SELECTOR, "a[href*='/console/exchanges/']"))
    svg = browser.find_element(By.CSS_SELECTOR, "figure#sequence svg")
    assert svg.size["width"] > 400
    assert svg.size["height"] > 300
    arrows = browser.find_elements(By.CSS_SELECTOR, "svg g.arrow")
    assert len(arrows) >= 6
    assert accessibility_problems(browser) == []
    # The screenshot of the diagram's region: drawn, not blank.
    shot = svg.screenshot_as_png
    (tmp_path / "sequence.png").write_bytes(shot)
    width, height, _ = png_pixels(shot)
    assert (width, height) != (0, 0)
    seen = colours(shot)
    assert len(seen) > 20, "a blank or single-colour region"
    total = sum(seen.values())
    assert seen[(255, 255, 255)] < 0.97 * total, "almost all white"
    assert seen[(0xE4, 0xEC, 0xF7)] > 500, "the participant boxes are drawn"
    dark = sum(n for (r, g, b), n in seen.items() if r + g + b < 200)
    assert dark > 200, "lines and text are drawn"
    page = browser.get_screenshot_as_png()
    assert len(colours(page)) > 20


def test_trace_runs_refusals_and_store(logged_in: tuple[Any, str, Recorded]) -> None:
    browser, base, recorded = logged_in
    browser.get(f"{base}traces/{recorded.spawn_trace_id}")
    nodes = browser.find_elements(By.CSS_SELECTOR, "#tree li.node")
    assert nodes[0].get_attribute("class") == "node spawn"
    assert accessibility_problems(browser) == []
    for page, expected in (
        ("runs", "subagent_announce"),
        ("refusals", "sessions_history"),
        ("store", "Verify the store now"),
    ):
        browser.get(f"{base}{page}")
        assert expected in browser.find_element(By.TAG_NAME, "main").text
        assert accessibility_problems(browser) == [], page
    follow(browser, browser.find_element(By.LINK_TEXT, "Verify the store now"))
    assert "Clean:" in browser.find_element(By.CSS_SELECTOR, ".verdict").text


def test_the_accessibility_check_finds_what_it_looks_for(browser: Any) -> None:
    """The check itself can fail: a page with faint text, no landmarks, an unlabelled
    field and a nameless image."""
    browser.get(
        "data:text/html,<html><head><title>bad</title></head><body>"
        "<p style='color:%23bbbbbb'>faint text</p><input id='x'><svg></svg></body></html>"
    )
    problems = accessibility_problems(browser)
    assert "html has no lang" in problems
    assert "no main landmark" in problems
    assert "not exactly one h1" in problems
    assert any(p.startswith("control without a label") for p in problems)
    assert "svg without role=img and a name" in problems
    assert any(p.startswith("contrast 1.") and "faint text" in p for p in problems)
