"""The target page's charts draw at every interval and range, in a real browser (chromium
driven by Playwright, as in tests/web/test_browser.py), against a real server over generated
history: a target probed every 15 minutes (the default interval) for a day and a half, and
a young target that began three hours ago.

"Draws" means the series themselves, not the axes: pixels of the series' own colours in the
canvas. A run alone in its bucket between two empty ones is a line of no length, which
uPlot draws as nothing at all; that is what a 15-minute target looked like at 24 h.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright import sync_api

from app.config import Settings, TargetsFile
from app.main import create_app
from app.store.db import make_engine, make_sessions
from app.store.migrate import upgrade
from app.web.pages.palette import PHASE_COLOURS
from tests.historyfactory import Fleet, Server, fill, targets_of
from tests.web.test_browser import ARTIFACTS, CHROMIUM, VIEWPORT, _require_chromium

pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]

NOW = datetime.now(UTC)
FIFTEEN = Fleet(
    now=NOW,
    targets=("chat-15m",),
    vantages=("eu",),
    days=1.5,
    interval=timedelta(minutes=15),
    alert_target=None,
)
YOUNG = Fleet(
    now=NOW,
    targets=("young",),
    vantages=("eu",),
    days=3 / 24,
    interval=timedelta(minutes=5),
    alert_target=None,
    seed=8,
)
# Grey phases (transfer) and the p50 line (the text colour) could be mistaken for axes.
PHASE_STROKES = [c for p, c in PHASE_COLOURS.items() if p not in ("transfer",)]
TAIL_STROKES = ["#0072B2", "#D55E00"]  # p90, p99 (app/web/static/charts.js)

SERIES_PIXELS = """
([selector, colours]) => {
  const canvas = document.querySelector(selector);
  const {width, height} = canvas;
  const pixels = canvas.getContext("2d").getImageData(0, 0, width, height).data;
  const wanted = colours.map((hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)));
  let found = 0;
  for (let i = 0; i < pixels.length; i += 4) {
    if (pixels[i + 3] < 100) continue;
    const near = wanted.some(([r, g, b]) =>
      Math.abs(pixels[i] - r) + Math.abs(pixels[i + 1] - g) + Math.abs(pixels[i + 2] - b) < 60);
    if (near) found += 1;
  }
  return found;
}
"""


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _require_chromium()
    directory = tmp_path_factory.mktemp("browser-charts")
    url = f"sqlite:///{directory / 'phasewatch.db'}"
    upgrade(url)
    engine = make_engine(url)
    for fleet in (FIFTEEN, YOUNG):
        fill(make_sessions(engine), fleet)
    engine.dispose()
    settings = Settings(
        database_url=url, spool_dir=directory / "spool", config=directory / "absent.yaml"
    )
    targets = TargetsFile(targets=targets_of(FIFTEEN) + targets_of(YOUNG))
    with Server(create_app(settings, targets)) as server:
        yield server.base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"]
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=VIEWPORT, color_scheme="light")
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    yield tab
    context.close()
    assert errors == [], f"script errors: {errors}"


def series_pixels(tab: Any, chart: str, colours: list[str]) -> int:
    selector = f"[data-chart={chart}] canvas"
    tab.wait_for_selector(selector)
    found: int = tab.evaluate(SERIES_PIXELS, [selector, colours])
    return found


def assert_series_drawn(tab: Any, name: str) -> None:
    # A 1000-pixel-wide chart: a line across it, or a dot per run, is hundreds of pixels.
    phases = series_pixels(tab, "phases", PHASE_STROKES)
    tail = series_pixels(tab, "total", TAIL_STROKES)
    ARTIFACTS.mkdir(exist_ok=True)
    tab.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    assert phases >= 200 and tail >= 100, (name, phases, tail)


@pytest.mark.parametrize("range_", ["1h", "6h", "24h", "7d", "30d"])
def test_a_15_minute_targets_charts_draw_their_series_at_every_range(
    page: Any, base: str, range_: str
) -> None:
    page.goto(f"{base}/targets/chat-15m?range={range_}")
    assert_series_drawn(page, f"charts-15m-{range_}")


def test_the_overview_opens_a_young_target_at_a_range_that_shows_its_data(
    page: Any, base: str
) -> None:
    page.goto(f"{base}/")
    page.click('tr[data-target="young"] th a')
    page.wait_for_url("**/targets/young**")
    assert page.locator('nav[aria-label="Time range"] [aria-current]').inner_text() == "6h"
    assert_series_drawn(page, "charts-young")


def test_the_hour_of_day_legend_never_states_a_range_of_one_value(page: Any, base: str) -> None:
    page.goto(f"{base}/targets/chat-15m?range=7d")
    legend = page.locator("[data-heat-scale]")
    page.wait_for_function("document.querySelector('[data-heat-scale]').textContent.length > 0")
    text = legend.inner_text()
    assert text.endswith("(p99 per hour)")
    low, _, high = text.removesuffix(" (p99 per hour)").partition(" … ")
    assert text.startswith("every hour ") if not high else low != high, text


def test_ranges_offer_one_and_six_hours(page: Any, base: str) -> None:
    page.goto(f"{base}/targets/chat-15m")
    ranges = page.locator('nav[aria-label="Time range"] a').all_inner_texts()
    assert ranges[:2] == ["1h", "6h"]
