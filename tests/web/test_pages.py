"""The dashboard's server-rendered pages over HTTP, on SQLite and PostgreSQL: a row per
target and vantage with the numbers the raw samples give, the target, alert and compare
pages, and 404 / 400 pages (never a 500) for unknown names and bad parameters.
Plus the page arithmetic (units, ages, staleness, sparklines), table-driven."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from sqlalchemy import update

from app.alerts.views import AlertView
from app.analysis.breakdown import Breakdown, PhaseRow
from app.analysis.sketch import RELATIVE_ACCURACY
from app.config import Settings, TargetsFile
from app.main import create_app
from app.store.db import make_engine, make_sessions
from app.store.models import AlertRow
from app.store.records import RunRecord
from app.web.pages import view
from app.web.pages.overview import overview_rows
from app.web.pages.target import alert_marks, fitting_range
from tests.apiapp import in_process
from tests.historyfactory import Filled, Fleet, fill, targets_of


def small_fleet(now: datetime) -> Fleet:
    """Half a day, hourly: chat-edge misses deadlines, search-api stopped three hours ago."""
    return Fleet(
        now=now,
        targets=("chat-prod", "chat-edge", "search-api"),
        vantages=("eu", "us"),
        days=0.5,
        interval=timedelta(hours=1),
        censored={"chat-edge": 2},
        stopped={"search-api": timedelta(hours=3)},
    )


@dataclass
class Site:
    client: httpx.Client  # the app over ASGI: pages are the point here, not the socket
    filled: Filled
    url: str

    def get(self, path: str) -> httpx.Response:
        return self.client.get(path)


@contextmanager
def serving(db_url: str, tmp_path: Path, fleet: Fleet) -> Iterator[Site]:
    engine = make_engine(db_url)
    filled = fill(make_sessions(engine), fleet)
    engine.dispose()
    settings = Settings(
        database_url=db_url, spool_dir=tmp_path / "spool", vantage="eu", config=tmp_path / "no"
    )
    app = create_app(settings, TargetsFile(targets=targets_of(fleet)))
    try:
        with in_process(app) as client:
            yield Site(client, filled, db_url)
    finally:
        app.state.service.engine.dispose()


@pytest.fixture(scope="module")
def site(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """Filled once per database: its tests only read (one that writes takes ``own_site``)."""
    tmp_path = tmp_path_factory.mktemp("site")
    with serving(module_db_url, tmp_path, small_fleet(datetime.now(UTC))) as served:
        yield served


@pytest.fixture
def own_site(db_url: str, tmp_path: Path) -> Iterator[Site]:
    with serving(db_url, tmp_path, small_fleet(datetime.now(UTC))) as served:
        yield served


def row_html(page: str, target: str, vantage: str) -> str:
    match = re.search(
        rf'<tr data-target="{re.escape(target)}" data-vantage="{re.escape(vantage)}">(.*?)</tr>',
        page,
        re.S,
    )
    assert match, f"no row for {target} at {vantage}"
    return match.group(1)


def cell(row: str, column: str) -> str:
    match = re.search(rf'data-col="{column}">(.*?)</td>', row, re.S)
    assert match, column
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


def shown_ms(text: str) -> float:
    """The value of a cell that ``view.format_ms`` wrote ('574 ms', '2.41 s')."""
    number, unit = text.split()
    return float(number) * (1000 if unit == "s" else 1)


def assert_quantile_shown(text: str, exact: float) -> None:
    # The overview merges run digests: within the sketch's relative accuracy of numpy's
    # value, plus half a unit of the last digit shown.
    shown = shown_ms(text.removesuffix("*"))
    assert abs(shown - exact) <= RELATIVE_ACCURACY * exact + 0.5, (text, exact)


def expected_numbers(record: RunRecord) -> dict[str, Any]:
    """What the overview must say of a window holding just this run, from its raw samples."""
    timed = [s for s in record.samples if s.status in ("ok", "deadline_exceeded")]
    totals = np.array([s.total_ms for s in timed])
    medians = {name: np.median([s.phases[name] for s in timed]) for name in timed[0].phases}
    misses = sum(s.status == "deadline_exceeded" for s in record.samples)
    return {
        "p50": float(np.percentile(totals, 50)),
        "p99": float(np.percentile(totals, 99)),
        "n": str(len(timed)),
        "misses": view.format_rate(misses, len(record.samples)),
        "dominant": max(medians, key=lambda name: medians[name]),
    }


# The overview ------------------------------------------------------------------------------


def test_overview_has_a_row_per_target_and_vantage_with_the_numbers_of_the_samples(
    site: Site,
) -> None:
    response = site.get("/")
    assert response.status_code == 200
    page = response.text
    assert page.count("<tr data-target=") == 6
    assert "its numbers once the service has added it to the rollups (every 10 s)" in page
    for target in ("chat-prod", "chat-edge"):
        for vantage in ("eu", "us"):
            row = row_html(page, target, vantage)
            expected = expected_numbers(site.filled.newest(target, vantage))
            assert_quantile_shown(cell(row, "p50"), expected["p50"])
            assert_quantile_shown(cell(row, "p99"), expected["p99"])
            assert cell(row, "p99").endswith("*")  # 20 samples: low confidence
            for column in ("n", "misses"):
                assert cell(row, column) == expected[column], (target, vantage, column)
            assert f"</span>{expected['dominant']}</span>" in row
            assert 'class="sharebar"' in row and '<path d="M' in row
    assert cell(row_html(page, "chat-edge", "eu"), "misses") == "10 % (2/20)"


def test_overview_shows_alert_state_staleness_and_age(site: Site) -> None:
    page = site.get("/").text
    alerting = row_html(page, "chat-prod", "eu")
    assert "state-firing" in alerting and site.filled.alert_id in alerting
    assert "state-ok" in row_html(page, "chat-prod", "us")
    stopped = row_html(page, "search-api", "eu")
    assert 'class="stale"' in stopped and "3 h ago" in cell(stopped, "age")
    # Its latest state however old: the hour up to its last run, not an empty row.
    assert cell(stopped, "p50").endswith("ms") and int(cell(stopped, "n")) > 0
    fresh = row_html(page, "chat-edge", "us")
    # The newest run started 40 min before the fleet's ``now`` (filling takes a while).
    assert 'class="stale"' not in fresh and re.fullmatch(r"4[0-2] min ago", cell(fresh, "age"))
    assert re.search(r"<strong[^>]*>1</strong> firing", page)
    assert re.search(r"<strong[^>]*>2</strong> stale", page)


def test_overview_counts_each_firing_alert_once_and_shows_every_one(own_site: Site) -> None:
    site = own_site
    now = datetime.now(UTC)

    def alert(kind: str, target: str, vantage: str | None) -> AlertRow:
        return AlertRow(
            id=uuid.uuid4(), kind=kind, target=target, vantage=vantage,
            scope="service" if vantage is None else "vantage", severity="critical",
            state="firing", streak=0, opened_at=now, summary=f"{kind} here", numbers={},
            updated_at=now,
        )  # fmt: skip

    across, silent = alert("dominant_shift", "chat-prod", None), alert("vantage_silent", "*", "us")
    engine = make_engine(site.url)
    with make_sessions(engine).begin() as session:
        session.add_all([across, silent])
    engine.dispose()
    page = site.get("/").text
    # The fleet's own firing alert, the service-wide one, the vantage's silence: 3, not 1.
    assert re.search(r"<strong[^>]*>3</strong> firing", page)
    for vantage in ("eu", "us"):  # across vantages: on each of its target's rows
        assert f"/alerts/{across.id}" in row_html(page, "chat-prod", vantage)
    assert site.filled.alert_id in row_html(page, "chat-prod", "eu")  # beside its own
    elsewhere = re.findall(r"<span data-elsewhere>(.*?)</span>", page, re.S)
    assert len(elsewhere) == 1 and f"/alerts/{silent.id}" in page and "at us" in page


def shown_series(page: str) -> list[tuple[str, str]]:
    return re.findall(r'<tr data-target="([^"]+)" data-vantage="([^"]+)">', page)


def test_overview_pages_the_worst_offenders_first_with_counts_and_links(site: Site) -> None:
    pages = [site.get(f"/?per=2&page={n}").text for n in (1, 2, 3)]
    # Firing, then the newest run's deadline misses, then stale, then the rest; by name.
    assert [s for page in pages for s in shown_series(page)] == [
        ("chat-prod", "eu"),
        ("chat-edge", "eu"),
        ("chat-edge", "us"),
        ("search-api", "eu"),
        ("search-api", "us"),
        ("chat-prod", "us"),
    ]
    first, middle, last = pages
    assert "Showing 1–2 of 6 series, worst first · page 1 of 3" in first
    assert "Showing 3–4 of 6 series" in middle and "Showing 5–6 of 6 series" in last
    assert '<a href="/?page=2&amp;per=2" rel="next">' in first and 'rel="prev"' not in first
    assert '<a href="/?per=2" rel="prev">' in middle
    assert '<a href="/?page=3&amp;per=2" rel="next">' in middle and 'rel="next"' not in last
    for page in pages:  # the summary counts the fleet, whatever the page shows
        assert "<strong>6</strong> series · 3 targets" in page
        assert re.search(r"<strong[^>]*>2</strong> stale", page)


def test_overview_filters_on_the_server_and_says_how_many_match(site: Site) -> None:
    page = site.get("/?q=edge+US").text
    assert shown_series(page) == [("chat-edge", "us")]
    assert "Showing 1–1 of 1 matching series" in page and 'value="edge US"' in page
    stale = site.get("/?show=stale&sort=name").text
    assert shown_series(stale) == [("search-api", "eu"), ("search-api", "us")]
    assert '<option value="stale" selected>' in stale
    none = site.get("/?q=nothing-is-called-this").text
    assert shown_series(none) == [] and "No series matches this filter (of 6)" in none


@pytest.mark.parametrize("query", ["page=0", "per=501", "show=all-of-it", "sort=age"])
def test_a_bad_overview_query_gets_a_400_page(site: Site, query: str) -> None:
    response = site.get(f"/?{query}")
    assert response.status_code == 400
    assert "Bad overview query" in response.text


def test_pages_load_nothing_from_another_host(site: Site) -> None:
    for path in ("/", "/targets/chat-prod", f"/alerts/{site.filled.alert_id}", "/compare"):
        page = site.get(path).text
        links = re.findall(r'(?:src|href)="([^"]+)"', page)
        assert links and all(link.startswith(("/", "?", "#")) for link in links), links
        for asset in re.findall(r'(?:src|href)="(/static/[^"?]+)', page):
            assert site.get(asset).status_code == 200, asset


# Target, alert and compare pages -----------------------------------------------------------


def test_target_page_has_breakdown_per_vantage_alert_timeline_and_recent_runs(
    site: Site,
) -> None:
    page = site.get("/targets/chat-prod").text
    assert page.count('<table class="grid breakdown"') == 2
    for vantage in ("eu", "us"):
        record = site.filled.newest("chat-prod", vantage)
        queue = np.median([s.phases["queue"] for s in record.samples])
        table = page.split(f'data-vantage="{vantage}"', 1)[1].split("</table>", 1)[0]
        queue_row = table.split('data-phase="queue"', 1)[1].split("</tr>", 1)[0]
        assert view.format_ms(float(queue)) in queue_row
    assert site.filled.alert_summary in page
    runs = page.split('id="recent-runs"', 1)[1].split("</table>", 1)[0]
    assert runs.count("<tr>") == 1 + 20  # the header and the 20 newest runs
    # Half a day of history: the shortest range that holds it all, not a 7-day sliver.
    assert 'data-range-seconds="86400"' in page
    assert '<a href="?range=24h" aria-current="true">24h</a>' in page


def test_target_page_keeps_to_one_vantage_when_asked(site: Site) -> None:
    page = site.get("/targets/chat-prod?vantage=us&range=24h").text
    assert page.count('<table class="grid breakdown"') == 1
    assert 'data-vantage="us"' in page and 'data-range-seconds="86400"' in page


def test_alert_page_shows_explanation_transitions_and_the_forms(site: Site) -> None:
    page = site.get(f"/alerts/{site.filled.alert_id}").text
    assert site.filled.alert_summary in page
    transitions = page.split('id="transition-list"', 1)[1].split("</ol>", 1)[0]
    assert transitions.count("<li>") == 2
    assert f'data-api="/api/v1/alerts/{site.filled.alert_id}/acknowledge"' in page
    assert 'data-api="/api/v1/silences"' in page


def test_alert_list_filters_by_state_and_target(site: Site) -> None:
    assert site.filled.alert_id in site.get("/alerts?state=firing").text
    assert site.filled.alert_id not in site.get("/alerts?state=resolved").text
    assert site.filled.alert_id not in site.get("/alerts?target=chat-edge").text


def test_the_alert_list_opens_on_what_fired_not_on_episodes_that_never_did(
    own_site: Site,
) -> None:
    site, now = own_site, datetime.now(UTC)
    never = AlertRow(
        id=uuid.uuid4(), kind="tail_shift", target="chat-prod", vantage="eu", scope="vantage",
        severity="critical", state="inactive", streak=0, opened_at=now, summary="never fired",
        numbers={}, updated_at=now,
    )  # fmt: skip
    engine = make_engine(site.url)
    with make_sessions(engine).begin() as session:
        session.add(never)
    engine.dispose()
    default = site.get("/alerts").text
    assert site.filled.alert_id in default and str(never.id) not in default
    assert '<option value="fired" selected>' in default
    for shown in ("all", "inactive"):
        assert str(never.id) in site.get(f"/alerts?state={shown}").text


def test_an_alert_summary_is_escaped_not_run(own_site: Site) -> None:
    site = own_site
    engine = make_engine(site.url)
    with make_sessions(engine).begin() as session:
        session.execute(update(AlertRow).values(summary='<script>alert("x")</script>'))
    engine.dispose()
    for path in (f"/alerts/{site.filled.alert_id}", "/targets/chat-prod", "/alerts"):
        page = site.get(path).text
        assert '<script>alert("x")' not in page
    assert "&lt;script&gt;" in site.get(f"/alerts/{site.filled.alert_id}").text


def test_compare_opens_on_the_shortest_window_that_holds_the_targets_history(
    site: Site,
) -> None:
    page = site.get("/compare?targets=chat-prod,chat-edge").text  # half a day of history
    assert '<option value="24h" selected>' in page
    assert 'data-range-seconds="86400"' in page
    chosen = site.get("/compare?targets=chat-prod&window=7d").text  # a window asked: kept
    assert '<option value="7d" selected>' in chosen


def test_compare_of_targets_an_hour_old_opens_on_the_last_hour(db_url: str, tmp_path: Path) -> None:
    young = Fleet(
        now=datetime.now(UTC), targets=("new-a", "new-b"), vantages=("eu",), days=1 / 48,
        interval=timedelta(minutes=5),
    )  # fmt: skip
    with serving(db_url, tmp_path, young) as site:
        page = site.get("/compare?targets=new-a,new-b").text
    assert '<option value="1h" selected>' in page and 'data-range-seconds="3600"' in page


def test_compare_page_puts_targets_side_by_side(site: Site) -> None:
    page = site.get("/compare?targets=chat-prod,chat-edge&window=1h&vantage=eu").text
    assert page.count('<table class="grid breakdown"') == 2
    assert 'data-targets="chat-prod,chat-edge"' in page
    same = site.get("/compare?targets=chat-prod&targets=chat-edge&window=1h&vantage=eu").text
    assert same.count('<table class="grid breakdown"') == 2


@pytest.mark.parametrize(
    ("path", "status", "says"),
    [
        ("/targets/no-such-target", 404, "no-such-target"),
        ("/targets/chat-prod?vantage=mars", 404, "mars"),
        ("/targets/chat-prod?range=1y", 400, "range must be one of"),
        ("/alerts/not-a-uuid", 404, "not-a-uuid"),
        (f"/alerts/{uuid.UUID(int=7)}", 404, f"no alert with id '{uuid.UUID(int=7)}'"),
        ("/alerts?state=asleep", 400, "state must be one of"),
        ("/alerts?cursor=garbage", 400, "not a cursor"),
        ("/compare?targets=chat-prod,ghost", 404, "ghost"),
        ("/compare?targets=chat-prod&window=5y", 400, "window must be one of"),
    ],
)
def test_unknown_names_and_bad_parameters_get_a_page_not_a_500(
    site: Site, path: str, status: int, says: str
) -> None:
    response = site.get(path)
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    assert says in response.text.replace("&#39;", "'")


# Page arithmetic ---------------------------------------------------------------------------

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "—"),
        (0.0, "0.00 ms"),
        (3.456, "3.46 ms"),
        (12.34, "12.3 ms"),
        (187.4, "187 ms"),
        (2412.0, "2.41 s"),
        (12_345.0, "12.3 s"),
    ],
)
def test_milliseconds_are_shown_with_their_unit(value: float | None, shown: str) -> None:
    assert view.format_ms(value) == shown


@pytest.mark.parametrize(
    ("part", "whole", "shown"),
    [(0, 20, "0 % (0/20)"), (1, 40, "2.5 % (1/40)"), (2, 20, "10 % (2/20)"), (0, 0, "—")],
)
def test_rates_say_what_they_are_of(part: int, whole: int, shown: str) -> None:
    assert view.format_rate(part, whole) == shown


@pytest.mark.parametrize(
    ("ago", "shown"),
    [
        (timedelta(seconds=5), "5 s ago"),
        (timedelta(minutes=3, seconds=20), "3 min ago"),
        (timedelta(hours=5), "5 h ago"),
        (timedelta(days=3), "3 d ago"),
        (timedelta(seconds=-30), "in the future"),
    ],
)
def test_ages_read_like_a_person_would_say_them(ago: timedelta, shown: str) -> None:
    assert view.age_text(NOW - ago, NOW) == shown
    assert view.age_text(None, NOW) == "never"


@pytest.mark.parametrize(
    ("ago", "interval_s", "stale"),
    [
        (timedelta(minutes=29), 900.0, False),
        (timedelta(minutes=31), 900.0, True),
        (timedelta(days=9), 0.0, False),  # interval unknown (imported target): no claim
        (None, 900.0, True),
    ],
)
def test_a_series_is_stale_after_two_intervals_without_a_run(
    ago: timedelta | None, interval_s: float, stale: bool
) -> None:
    last = None if ago is None else NOW - ago
    assert view.is_stale(last, NOW, interval_s) is stale


@pytest.mark.parametrize(
    ("history", "shown"),
    [
        (None, "7d"),  # no run yet
        (timedelta(minutes=20), "1h"),
        (timedelta(hours=1), "1h"),
        (timedelta(hours=3), "6h"),
        (timedelta(hours=20), "24h"),
        (timedelta(days=2), "7d"),
        (timedelta(days=40), "7d"),  # never longer than a week unless asked
    ],
)
def test_a_target_page_opens_at_the_shortest_range_that_holds_its_history(
    history: timedelta | None, shown: str
) -> None:
    assert fitting_range(None if history is None else NOW - history, NOW) == shown


def test_low_confidence_below_a_hundred_samples_as_the_cli() -> None:
    assert view.low_confidence(99) and not view.low_confidence(100)


def test_sparkline_scales_into_the_box_and_breaks_at_gaps() -> None:
    assert view.sparkline_path([10.0, None, 20.0, 30.0], width=30, height=12) == (
        "M0.0,11.0M20.0,6.0L30.0,1.0"
    )
    assert view.sparkline_path([None, None]) == ""
    assert view.sparkline_path([5.0]) == ""
    assert view.sparkline_path([5.0, 5.0], width=10, height=10) == "M0.0,9.0L10.0,9.0"


def test_share_segments_keep_phase_order_and_drop_empty_phases() -> None:
    segments = view.share_segments([("connect", 0.0), ("queue", 0.6), ("generation", 0.4)])
    assert [(s.phase, s.share) for s in segments] == [("queue", 0.6), ("generation", 0.4)]
    assert segments[0].colour == "#D55E00"
    assert view.share_segments([("mystery", 1.0)])[0].colour == view.OTHER_COLOUR


def breakdown_of(target: str, vantage: str, last_run_at: datetime | None) -> Breakdown:
    phases = [PhaseRow("queue", 60.0, 80.0, 90.0, 99.0, 20, 0.6, "server")]
    total = {"p50": 100.0, "p90": 120.0, "p95": 130.0, "p99": 150.0}
    return Breakdown(
        target,
        vantage,
        NOW - timedelta(hours=1),
        NOW,
        1,
        20,
        0,
        0,
        total,
        phases,
        "queue",
        last_run_at,
    )


def alert_of(target: str, vantage: str | None, summary: str = "x") -> AlertView:
    return AlertView(
        id=str(uuid.uuid4()), kind="tail_shift", target=target, vantage=vantage,
        scope="service" if vantage is None else "vantage", from_phase=None, to_phase=None,
        severity="critical", state="firing", open=True, streak=1, opened_at=NOW,
        fired_at=NOW, resolved_at=None, acknowledged_at=None, acknowledged_by=None,
        summary=summary, numbers={}, labels={}, updated_at=NOW,
    )  # fmt: skip


def test_overview_rows_keep_the_pages_order_with_own_alerts_then_cross_vantage_ones() -> None:
    own, shared = alert_of("b", "us"), alert_of("b", None)
    old = NOW - timedelta(days=90)  # imported history, a target known only by its runs
    rows = overview_rows(
        [breakdown_of("a", "eu", None), breakdown_of("b", "eu", NOW), breakdown_of("b", "us", NOW),
         breakdown_of("c", "eu", old), breakdown_of("d", "eu", NOW)],
        {("b", "eu"): [1.0, 2.0]},
        {("b", "us"): [own], ("b", None): [shared]},
        {"a": 900.0, "b": 900.0},
        NOW,
    )  # fmt: skip
    assert [(r.breakdown.target, r.breakdown.vantage) for r in rows] == [
        ("a", "eu"),
        ("b", "eu"),
        ("b", "us"),
        ("c", "eu"),
        ("d", "eu"),
    ]
    assert [r.alerts for r in rows] == [[], [shared], [own, shared], [], []]
    assert [r.stale for r in rows] == [True, False, False, True, False]
    assert ["<path" in r.spark for r in rows] == [False, True, False, False, False]


def test_alert_marks_cannot_close_the_script_element() -> None:
    marks = alert_marks([alert_of("a", "eu", summary="</script><b>")])
    assert "</script>" not in marks and json.loads(marks)[0]["label"] == "</script><b>"
    assert json.loads(marks)[0]["at"] == NOW.timestamp()
