"""The overview's paging decisions, table-driven: the query string read, the worst offenders
first, filters, the page asked for, and the links between pages."""

from __future__ import annotations

import pytest

from app.web.pages.overviewpaging import (
    BadQuery,
    OverviewQuery,
    Paged,
    SeriesFacts,
    missed_share,
    page_links,
    page_of,
    parse_query,
)


def facts(target: str, vantage: str = "eu", firing: int = 0, open_: int = 0,
          missed: float = 0.0, stale: bool = False) -> SeriesFacts:  # fmt: skip
    return SeriesFacts(target, vantage, firing, max(open_, firing), missed, stale)


FLEET = [
    facts("quiet-a"),
    facts("stopped", stale=True),
    facts("pending", open_=1),
    facts("missing-some", missed=0.1),
    facts("firing-one", firing=1),
    facts("missing-most", missed=0.5),
    facts("firing-two", vantage="us", firing=2),
    facts("quiet-b", vantage="us"),
    facts("firing-one", vantage="us", firing=1, missed=0.9),
]


def names(paged: Paged) -> list[str]:
    return [f"{f.target}@{f.vantage}" for f in paged.items]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, OverviewQuery()),
        (
            {"q": "  chat eu ", "show": "firing", "sort": "name", "page": "3", "per": "10"},
            OverviewQuery("chat eu", "firing", "name", 3, 10),
        ),  # fmt: skip
        ({"per": "500"}, OverviewQuery(per=500)),
    ],
)
def test_the_query_string_is_read_with_defaults(
    params: dict[str, str], expected: OverviewQuery
) -> None:
    assert parse_query(params) == expected


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"show": "everything"}, "show must be one of all, firing"),
        ({"sort": "age"}, "sort must be one of worst, name"),
        ({"page": "0"}, "page must be a whole number from 1"),
        ({"page": "-1"}, "page must be"),
        ({"page": "two"}, "page must be"),
        ({"per": "501"}, "per must be a whole number from 1 to 500"),
        ({"q": "x" * 201}, "q: at most 200 characters"),
        ({"q": "a\x00"}, "no NUL"),
    ],
)
def test_a_bad_query_string_says_which_parameter_and_what_it_may_be(
    params: dict[str, str], says: str
) -> None:
    with pytest.raises(BadQuery, match=says):
        parse_query(params)


def test_worst_first_firing_then_open_then_misses_then_stale_then_by_name() -> None:
    assert names(page_of(FLEET, OverviewQuery())) == [
        "firing-two@us",  # two firing
        "firing-one@us",  # one firing, and misses: before its quieter twin
        "firing-one@eu",
        "pending@eu",  # open, not firing
        "missing-most@eu",
        "missing-some@eu",
        "stopped@eu",
        "quiet-a@eu",
        "quiet-b@us",
    ]


def test_by_name_is_target_then_vantage() -> None:
    found = names(page_of(FLEET, OverviewQuery(sort="name")))
    assert found == sorted(found) and found[:2] == ["firing-one@eu", "firing-one@us"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (OverviewQuery(q="firing US"), ["firing-two@us", "firing-one@us"]),
        (OverviewQuery(q="one eu"), ["firing-one@eu"]),
        (OverviewQuery(q="nothing"), []),
        (OverviewQuery(show="firing"), ["firing-two@us", "firing-one@us", "firing-one@eu"]),
        (
            OverviewQuery(show="alerting", sort="name"),
            ["firing-one@eu", "firing-one@us", "firing-two@us", "pending@eu"],
        ),  # fmt: skip
        (OverviewQuery(show="missing"), ["firing-one@us", "missing-most@eu", "missing-some@eu"]),
        (OverviewQuery(show="stale"), ["stopped@eu"]),
        (OverviewQuery(q="quiet", show="stale"), []),
    ],
)
def test_filters_keep_every_word_and_the_state_asked_for(
    query: OverviewQuery, expected: list[str]
) -> None:
    paged = page_of(FLEET, query)
    assert names(paged) == expected and paged.matching == len(expected)


@pytest.mark.parametrize(
    ("page", "per", "shown", "first", "pages"),
    [
        (1, 4, ["firing-two@us", "firing-one@us", "firing-one@eu", "pending@eu"], 1, 3),
        (2, 4, ["missing-most@eu", "missing-some@eu", "stopped@eu", "quiet-a@eu"], 5, 3),
        (3, 4, ["quiet-b@us"], 9, 3),
        (9, 4, ["quiet-b@us"], 9, 3),  # past the last page: the last
        (1, 9, names(page_of(FLEET, OverviewQuery())), 1, 1),
    ],
)
def test_a_page_is_its_slice_of_the_sorted_series(
    page: int, per: int, shown: list[str], first: int, pages: int
) -> None:
    paged = page_of(FLEET, OverviewQuery(page=page, per=per))
    assert (names(paged), paged.first, paged.pages, paged.matching) == (shown, first, pages, 9)
    assert paged.page == min(page, pages)


def test_no_series_is_one_empty_page() -> None:
    assert page_of([], OverviewQuery(page=4)) == Paged([], 0, 1, 1, 0)


def links(page: int, pages: int, query: OverviewQuery | None = None) -> list[tuple[str, str]]:
    query = query or OverviewQuery()
    paged = Paged([], pages * query.per, page, pages, 1)
    return [(link.label, link.href or "") for link in page_links(query, paged)]


@pytest.mark.parametrize(
    ("page", "pages", "expected"),
    [
        (1, 1, []),
        (1, 2, [("1", ""), ("2", "/?page=2"), ("next ›", "/?page=2")]),
        (2, 2, [("‹ previous", "/"), ("1", "/"), ("2", "")]),
        (
            1,
            200,
            [
                ("1", ""),
                ("2", "/?page=2"),
                ("3", "/?page=3"),
                ("…", ""),
                ("200", "/?page=200"),
                ("next ›", "/?page=2"),
            ],
        ),  # fmt: skip
        (
            100,
            200,
            [
                ("‹ previous", "/?page=99"),
                ("1", "/"),
                ("…", ""),
                ("98", "/?page=98"),
                ("99", "/?page=99"),
                ("100", ""),
                ("101", "/?page=101"),
                ("102", "/?page=102"),
                ("…", ""),
                ("200", "/?page=200"),
                ("next ›", "/?page=101"),
            ],
        ),  # fmt: skip
        (
            4,
            5,
            [
                ("‹ previous", "/?page=3"),
                ("1", "/"),
                ("2", "/?page=2"),
                ("3", "/?page=3"),
                ("4", ""),
                ("5", "/?page=5"),
                ("next ›", "/?page=5"),
            ],
        ),  # fmt: skip
    ],
)
def test_page_links_window_the_current_page_between_the_first_and_the_last(
    page: int, pages: int, expected: list[tuple[str, str]]
) -> None:
    assert links(page, pages) == expected


def test_page_links_keep_the_filter_and_sort() -> None:
    query = OverviewQuery(q="chat eu", show="firing", sort="name", per=20)
    hrefs = [href for _, href in links(1, 3, query) if href]
    assert hrefs[0] == "/?q=chat+eu&show=firing&sort=name&page=2&per=20"


@pytest.mark.parametrize(
    ("n", "errors", "misses", "share"), [(0, 0, 0, 0.0), (20, 0, 0, 0.0), (20, 1, 3, 0.2)]
)
def test_missed_share_counts_errors_and_deadline_misses(
    n: int, errors: int, misses: int, share: float
) -> None:
    assert missed_share(n, errors, misses) == share
