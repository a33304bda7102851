"""The target page's what-if panel in a real browser (chromium driven by Playwright, as in
tests/web/test_browser.py), against a real server over two days of generated history: a change
typed, submitted, the numbers read back and checked against the API's own answer, and the
before/after curves drawn (pixels of their colours in the canvas). With a token configured:
a what-if is a read, so the page never asks for one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright import sync_api
from sqlalchemy import update

from app.config import Settings, TargetsFile
from app.main import create_app
from app.store.db import make_engine, make_sessions
from app.store.migrate import upgrade
from app.store.models import TargetRow
from app.web.pages.view import format_ms
from tests.historyfactory import Fleet, Server, fill, targets_of
from tests.web.test_browser import CHROMIUM, TOKEN, VIEWPORT, _require_chromium, shoot
from tests.web.test_browser_charts import SERIES_PIXELS

pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]

FLEET = Fleet(
    now=datetime.now(UTC),
    targets=("chat-prod",),
    vantages=("eu",),
    days=2,
    interval=timedelta(hours=1),
    alert_target=None,
)
BEFORE, AFTER = "#5c6166", "#0072B2"  # app/web/static/whatif.js
OBJECTIVES = {"ttft_ms": {"p": 99, "below": 300}, "end_to_end_ms": {"p": 99, "below": 1500}}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _require_chromium()
    directory = tmp_path_factory.mktemp("browser-whatif")
    url = f"sqlite:///{directory / 'phasewatch.db'}"
    upgrade(url)
    engine = make_engine(url)
    sessions = make_sessions(engine)
    fill(sessions, FLEET)
    with sessions.begin() as session:  # the objectives as serve's start stores them
        session.execute(update(TargetRow).values(config={"alerts": {"objectives": OBJECTIVES}}))
    engine.dispose()
    settings = Settings(
        database_url=url,
        spool_dir=directory / "spool",
        config=directory / "absent.yaml",
        api_token=TOKEN,  # type: ignore[arg-type]
    )
    with Server(create_app(settings, TargetsFile(targets=targets_of(FLEET)))) as server:
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
def allowed() -> list[str]:
    """Substrings of errors a test provokes on purpose (a 422 for a bad change)."""
    return []


@pytest.fixture
def page(browser: Any, base: str, allowed: list[str]) -> Iterator[Any]:
    context = browser.new_context(viewport=VIEWPORT, color_scheme="light")
    tab = context.new_page()
    errors: list[str] = []
    requested: list[str] = []
    tab.on("request", lambda request: requested.append(request.url))
    tab.on("pageerror", lambda error: errors.append(str(error)))
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    tab.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    tab.on("dialog", lambda dialog: errors.append(f"dialog {dialog.message}"))
    yield tab
    context.close()
    elsewhere = [u for u in requested if urlsplit(u).netloc != urlsplit(base).netloc]
    assert elsewhere == [], f"requests left the test server: {elsewhere}"
    unexpected = [e for e in errors if not any(part in e for part in allowed)]
    assert unexpected == [], f"script errors: {unexpected}"


def percent(share: float) -> str:
    """A share as whatif.js writes it: ``(100 * v).toFixed(1)``, which takes the larger of
    two equally near decimals of the exact double (76.25 -> 76.3) where Python's format
    takes the even one (76.2)."""
    return f"{Decimal(100 * share).quantize(Decimal('0.1'), ROUND_HALF_UP)} %"


def cell(tab: Any, row: str, side: str) -> str:
    text: str = tab.locator(f'#whatif-table tr[data-row="{row}"] [data-side="{side}"]').inner_text()
    return text


def test_a_change_typed_in_the_panel_shows_the_numbers_and_draws_both_curves(
    page: Any, base: str
) -> None:
    page.goto(f"{base}/targets/chat-prod")
    chart = page.locator("[data-chart=whatif]")
    assert chart.is_hidden()  # no empty box before the first prediction
    changes = page.locator("#whatif-form textarea[name=changes]")
    changes.fill("network=15ms generation*1.5 deadline=1500ms")
    page.get_by_role("button", name="Predict").click()
    page.wait_for_selector("[data-chart=whatif][data-drawn=true] canvas")
    assert chart.is_visible()
    body = {"changes": ["network=15ms", "generation*1.5", "deadline=1500ms"]}
    answer = httpx.post(f"{base}/api/v1/targets/chat-prod/whatif", json=body).json()
    for q in ("p50", "p90", "p99"):
        assert cell(page, q, "before") == format_ms(answer["before"][f"{q}_ms"]["value"])
        assert cell(page, q, "after") == format_ms(answer["after"][f"{q}_ms"]["value"])
    assert cell(page, "dominant", "after") == answer["after"]["dominant"]
    # Each objective's share met and goodput's, as the API says them.
    objectives = {o["metric"]: o for o in answer["objectives"]}
    assert set(objectives) == {"ttft_ms", "end_to_end_ms", "goodput"}
    for metric, found in objectives.items():
        for side in ("before", "after"):
            shown = cell(page, f"objective-{metric}", side)
            assert shown == percent(found[side]), (metric, side)
    before = page.evaluate(SERIES_PIXELS, ["[data-chart=whatif] canvas", [BEFORE]])
    after = page.evaluate(SERIES_PIXELS, ["[data-chart=whatif] canvas", [AFTER]])
    shoot(page, "whatif")
    assert before >= 100 and after >= 100, (before, after)


def test_a_bad_change_says_which_and_draws_nothing(
    page: Any, base: str, allowed: list[str]
) -> None:
    allowed.append("422")
    page.goto(f"{base}/targets/chat-prod")
    page.locator("#whatif-form textarea[name=changes]").fill("queue=0 warp*2")
    with page.expect_response("**/whatif") as answered:
        page.get_by_role("button", name="Predict").click()
    assert answered.value.status == 422
    # The answer's headers come before the page has read its body and said why.
    status = page.locator("[data-whatif-status]")
    sync_api.expect(status).to_contain_text("warp*2")
    assert page.locator("#whatif-table").is_hidden()


def test_the_levers_table_is_on_the_page_without_javascript(browser: Any, base: str) -> None:
    context = browser.new_context(viewport=VIEWPORT, java_script_enabled=False)
    tab = context.new_page()
    tab.goto(f"{base}/targets/chat-prod")
    assert tab.locator("#biggest-lever").inner_text().startswith("The biggest lever now is")
    assert tab.locator("#levers-table tbody tr[data-lever]").count() >= 4
    context.close()
