"""The dashboard in a real browser: Debian's chromium driven by Playwright, against a real
server (uvicorn on loopback) filled with eight days of generated history.

Every test also proves that the page made no request beyond the test server and raised no
JavaScript error. Screenshots (light and dark) go to tests/artifacts/ (not committed).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright import sync_api
from sqlalchemy import select

from app.config import Settings, TargetsFile
from app.main import create_app
from app.store.db import make_engine, make_sessions
from app.store.migrate import upgrade
from app.store.models import AlertRow
from tests.historyfactory import Filled, Fleet, Server, add_fired_alert, fill, targets_of

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
TOKEN = "browser-test-token"
VIEWPORT = {"width": 1400, "height": 1000}

# The first test also pays for the module's history (eight days, hourly, six series): about a
# minute on two shared cores, more when they are busy.
pytestmark = [pytest.mark.process, pytest.mark.timeout(420)]


def _require_chromium() -> None:
    if CHROMIUM.exists():
        return
    message = f"{CHROMIUM} is missing (apt-get install chromium)"
    if os.environ.get("PHASEWATCH_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{message}; PHASEWATCH_REQUIRE_BROWSER=1 forbids skipping", pytrace=False)
    pytest.skip(message)


class Site:
    def __init__(self, server: Server, filled: Filled, url: str) -> None:
        self.server = server
        self.filled = filled
        self.url = url

    def alert_row(self) -> AlertRow:
        engine = make_engine(self.url)
        try:
            with make_sessions(engine)() as session:
                row = session.scalar(select(AlertRow).where(AlertRow.target == "chat-prod"))
                assert row is not None
                return row
        finally:
            engine.dispose()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    _require_chromium()
    directory = tmp_path_factory.mktemp("browser")
    url = f"sqlite:///{directory / 'phasewatch.db'}"
    upgrade(url)
    fleet = Fleet(now=datetime.now(UTC))
    engine = make_engine(url)
    filled = fill(make_sessions(engine), fleet)
    engine.dispose()
    settings = Settings(
        database_url=url,
        spool_dir=directory / "spool",
        vantage="eu",
        config=directory / "absent.yaml",
        api_token=TOKEN,  # type: ignore[arg-type]
    )
    app = create_app(settings, TargetsFile(targets=targets_of(fleet)))
    with Server(app) as server:
        yield Site(server, filled, url)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    _require_chromium()
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


@pytest.fixture
def expected_errors() -> list[str]:
    """Substrings of errors a test provokes on purpose (a 401 before the token is given)."""
    return []


@pytest.fixture
def page(browser: Any, site: Site, expected_errors: list[str]) -> Iterator[Any]:
    """A fresh page that records every request and every script error, and checks both."""
    context = browser.new_context(viewport=VIEWPORT, color_scheme="light")
    tab = context.new_page()
    requested: list[str] = []
    errors: list[str] = []
    tab.on("request", lambda request: requested.append(request.url))
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    tab.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    yield tab
    context.close()
    expected = urlsplit(site.server.base).netloc
    elsewhere = [url for url in requested if urlsplit(url).netloc != expected]
    assert requested, "the page made no request at all"
    assert elsewhere == [], f"requests left the test server: {elsewhere}"
    unexpected = [e for e in errors if not any(part in e for part in expected_errors)]
    assert unexpected == [], f"script errors: {unexpected}"


def shoot(tab: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    for scheme in ("light", "dark"):
        tab.emulate_media(color_scheme=scheme)
        tab.wait_for_timeout(300)  # charts redraw on a theme change only via the toggle
        tab.screenshot(path=str(ARTIFACTS / f"{name}-{scheme}.png"), full_page=True)
    tab.emulate_media(color_scheme="light")


PAINTED = """
(canvas) => {
  const context = canvas.getContext("2d");
  const {width, height} = canvas;
  if (!width || !height) return {opaque: 0, colours: 0};
  const pixels = context.getImageData(0, 0, width, height).data;
  let opaque = 0;
  const colours = new Set();
  for (let i = 0; i < pixels.length; i += 4) {
    if (pixels[i + 3] === 0) continue;
    opaque += 1;
    if (colours.size < 64) colours.add(pixels[i] << 16 | pixels[i + 1] << 8 | pixels[i + 2]);
  }
  return {opaque, colours: colours.size, width, height};
}
"""


def painted(tab: Any, selector: str) -> dict[str, int]:
    canvas = tab.locator(selector).first
    canvas.wait_for(state="attached", timeout=10_000)
    result: dict[str, int] = canvas.evaluate(PAINTED)
    return result


def assert_drawn(tab: Any, selector: str) -> None:
    found = painted(tab, selector)
    # Several colours over a real share of the canvas: lines, fills and axes, not a blank.
    assert found["colours"] >= 3, (selector, found)
    assert found["opaque"] >= 0.02 * found["width"] * found["height"], (selector, found)


def test_overview_lists_every_target_and_vantage(page: Any, site: Site) -> None:
    page.goto(site.server.base + "/")
    rows = page.locator("#overview-table tbody tr")
    fleet = site.filled.fleet
    assert rows.count() == len(fleet.targets) * len(fleet.vantages)
    for target in fleet.targets:
        for vantage in fleet.vantages:
            row = page.locator(f'tr[data-target="{target}"][data-vantage="{vantage}"]')
            assert row.locator("th a").inner_text() == target
            assert row.locator(".sharebar span").count() >= 3
            assert row.locator("svg.spark path").get_attribute("d")
    assert "firing" in page.locator('tr[data-target="chat-prod"][data-vantage="eu"]').inner_text()
    shoot(page, "overview")


def test_overview_filter_hides_other_rows(page: Any, site: Site) -> None:
    page.goto(site.server.base + "/")
    page.fill("#row-filter", "edge us")
    visible = page.locator("#overview-table tbody tr:visible")
    assert visible.count() == 1
    assert visible.first.get_attribute("data-target") == "chat-edge"


def test_overview_filter_and_pages_come_from_the_server(page: Any, site: Site) -> None:
    # Enter sends the filter to the server: every page of the fleet is filtered, not this one.
    page.goto(site.server.base + "/?per=1")
    page.fill("#row-filter", "edge us")
    page.press("#row-filter", "Enter")
    page.wait_for_url("**/?q=edge+us*")
    rows = page.locator("#overview-table tbody tr")
    assert rows.count() == 1 and rows.first.get_attribute("data-vantage") == "us"
    assert "of 1 matching series" in page.locator("[data-page-count]").inner_text()
    page.goto(site.server.base + "/?per=2")
    first = page.locator("#overview-table tbody tr").first.get_attribute("data-target")
    page.click('nav.pager a[rel="next"]')
    page.wait_for_url("**page=2*")
    assert page.locator("#overview-table tbody tr").count() == 2
    assert page.locator("#overview-table tbody tr").first.get_attribute("data-target") != first


def test_target_charts_draw(page: Any, site: Site) -> None:
    page.goto(site.server.base + "/targets/chat-prod?range=7d")
    page.wait_for_selector("[data-chart=phases] canvas")
    page.wait_for_selector("[data-chart=total] canvas")
    page.wait_for_function("document.querySelector('canvas.heatmap').dataset.cells > 0")
    assert_drawn(page, "[data-chart=phases] canvas")
    assert_drawn(page, "[data-chart=total] canvas")
    assert_drawn(page, "canvas.heatmap")
    assert int(page.locator("canvas.heatmap").get_attribute("data-cells")) >= 7 * 24 - 24
    assert page.locator("table.breakdown").count() == 2
    assert page.locator("#recent-runs tbody tr").count() > 0
    shoot(page, "target")


def test_share_mode_redraws_the_stack(page: Any, site: Site) -> None:
    page.goto(site.server.base + "/targets/search-api?range=24h&vantage=us")
    page.wait_for_selector("[data-chart=phases] canvas")
    page.get_by_role("button", name="shares").click()
    assert page.get_by_role("button", name="shares").get_attribute("aria-pressed") == "true"
    assert_drawn(page, "[data-chart=phases] canvas")


def test_compare_chart_draws(page: Any, site: Site) -> None:
    page.goto(site.server.base + "/compare?targets=chat-prod,chat-edge&window=7d")
    page.wait_for_selector("#compare-chart canvas")
    assert_drawn(page, "#compare-chart canvas")
    assert page.locator("table.breakdown").count() == 2
    shoot(page, "compare")


def test_api_docs_render_with_no_network_beyond_the_server(page: Any, site: Site) -> None:
    # As on a host without the internet: anything not for the test server is refused.
    page.route(re.compile(r"^(?!http://127\.0\.0\.1[:/])"), lambda route: route.abort())
    page.goto(site.server.base + "/")
    page.click("text=API")
    page.wait_for_url("**/docs")
    history = page.locator(".opblock-summary-path[data-path='/api/v1/targets/{name}/history']")
    history.wait_for(timeout=15_000)
    assert page.locator(".opblock").count() >= 10
    assert "phasewatch" in page.locator(".info .title").inner_text()
    shoot(page, "api-docs")


def test_skip_link_is_the_first_stop_and_reaches_the_content(page: Any, site: Site) -> None:
    page.goto(site.server.base + "/")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"


def test_theme_toggle_switches_to_dark_and_remembers(page: Any, site: Site) -> None:
    page.goto(site.server.base + "/")
    toggle = page.locator("#theme-toggle")
    toggle.click()  # auto → light
    toggle.click()  # light → dark
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    background = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    assert background == "rgb(21, 23, 26)"


def test_alert_explanation_is_visible(page: Any, site: Site) -> None:
    page.goto(site.server.base + f"/alerts/{site.filled.alert_id}")
    explanation = page.locator("#explanation")
    assert explanation.is_visible()
    assert explanation.inner_text() == site.filled.alert_summary
    assert "generation 58 % → queue 61 %" in explanation.inner_text()
    shoot(page, "alert")


def test_acknowledging_from_the_page_asks_for_the_token_and_resolves_the_alert(
    page: Any, site: Site, expected_errors: list[str]
) -> None:
    expected_errors.extend(["401 ", "status of 401"])
    assert site.alert_row().state == "firing"
    page.goto(site.server.base + f"/alerts/{site.filled.alert_id}")
    page.fill("#ack-form input[name=by]", "ada")
    page.click("#ack-form button[type=submit]")
    dialog = page.locator("#token-dialog")
    dialog.wait_for(state="visible")  # the first try was refused: 401
    dialog.locator("input[name=token]").fill(TOKEN)
    dialog.get_by_role("button", name="Use token").click()
    page.wait_for_selector("[data-result].ok")
    row = site.alert_row()
    assert (row.state, row.acknowledged_by) == ("resolved", "ada")
    # The notice says done as soon as the API has answered; the page refreshes after it.
    page.locator("h1", has_text="resolved").wait_for(timeout=10_000)
    assert page.evaluate("sessionStorage.getItem('phasewatch-token')") == TOKEN


def test_alert_list_links_to_the_alert(page: Any, site: Site) -> None:
    page.goto(site.server.base + "/alerts")
    page.click(f'tr[data-alert="{site.filled.alert_id}"] a >> nth=0')
    page.wait_for_url(f"**/alerts/{site.filled.alert_id}")
    assert page.locator("#explanation").inner_text() == site.filled.alert_summary


def test_silencing_from_the_page_creates_a_silence_for_the_alerts_labels(
    page: Any, site: Site, expected_errors: list[str]
) -> None:
    expected_errors.extend(["401 ", "status of 401"])
    page.goto(site.server.base + f"/alerts/{site.filled.alert_id}")
    page.select_option("#silence-form select[name=duration]", "1d")
    page.fill("#silence-form input[name=created_by]", "grace")
    page.fill("#silence-form input[name=comment]", "deploying a fix")
    page.click("#silence-form button[type=submit]")
    dialog = page.locator("#token-dialog")
    dialog.wait_for(state="visible")
    dialog.locator("input[name=token]").fill(TOKEN)
    dialog.locator("input[name=token]").press("Enter")
    page.wait_for_selector("[data-result].ok")
    silences = httpx.get(site.server.base + "/api/v1/silences", timeout=10).json()
    assert len(silences) == 1
    silence = silences[0]
    matchers = {m["name"]: m["value"] for m in silence["matchers"]}
    assert matchers == {"alertname": "dominant_shift", "target": "chat-prod", "vantage": "eu"}
    assert (silence["createdBy"], silence["comment"]) == ("grace", "deploying a fix")
    lasts = datetime.fromisoformat(silence["endsAt"]) - datetime.fromisoformat(silence["startsAt"])
    assert lasts == timedelta(days=1)


def test_charts_redraw_when_the_system_colour_scheme_changes(page: Any, site: Site) -> None:
    page.goto(site.server.base + "/targets/chat-prod?range=7d")
    page.wait_for_function("document.querySelector('canvas.heatmap').dataset.cells > 0")
    digest = "c => Array.from(c.getContext('2d').getImageData(0, 0, c.width, 40).data).join()"
    axis_colour = "getComputedStyle(document.documentElement).getPropertyValue('--chart-axis')"
    light = page.locator("canvas.heatmap").evaluate(digest)
    page.emulate_media(color_scheme="dark")
    page.wait_for_function(f"{axis_colour}.trim() === '#a2a8ae'")
    page.wait_for_timeout(200)
    assert page.locator("canvas.heatmap").evaluate(digest) != light


def test_auto_refresh_updates_the_rows_in_place_without_reloading(page: Any, site: Site) -> None:
    page.goto(site.server.base + "/")
    row = page.locator('tr[data-target="chat-edge"][data-vantage="us"] [data-col="alert"]')
    assert row.inner_text() == "ok"
    page.evaluate("window.notReloaded = true")
    engine = make_engine(site.url)
    with make_sessions(engine).begin() as session:
        add_fired_alert(session, "chat-edge", "us", datetime.now(UTC))
    engine.dispose()
    page.evaluate("window.phasewatch.refresh()")
    page.wait_for_function(
        'document.querySelector(\'tr[data-target="chat-edge"][data-vantage="us"]\')'
        ".innerText.includes('firing')"
    )
    assert page.evaluate("window.notReloaded") is True
    assert page.locator("#refresh-status").inner_text().startswith("updated ")
