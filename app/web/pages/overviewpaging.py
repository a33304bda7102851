"""Which series the overview shows, in what order, on which page: pure decisions over plain
values (the series' facts, the query string), no I/O.

"worst" puts the fleet's worst offenders first: firing alerts, then other open ones, then
the newest run's share of deadline misses and errors, then stale series, then the rest;
ties by name. A filter keeps the series whose "target vantage" holds every word given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Literal, get_args
from urllib.parse import urlencode

Show = Literal["all", "firing", "alerting", "missing", "stale"]
Sort = Literal["worst", "name"]
SHOWS: tuple[Show, ...] = get_args(Show)
SORTS: tuple[Sort, ...] = get_args(Sort)
PER_PAGE, PER_PAGE_MAX = 50, 500
QUERY_MAX = 200
WINDOW_LINKS = 2  # page numbers linked either side of the current one


class BadQuery(ValueError):
    """A query string the overview cannot answer; the message says why."""


@dataclass(frozen=True, slots=True)
class OverviewQuery:
    q: str = ""
    show: Show = "all"
    sort: Sort = "worst"
    page: int = 1
    per: int = PER_PAGE

    def href(self, **changes: object) -> str:
        """This query with ``changes``, as a link: only what differs from the defaults."""
        changed = replace(self, **changes)  # type: ignore[arg-type]
        default = OverviewQuery()
        given = {f.name: getattr(changed, f.name) for f in fields(self)}
        kept = {name: value for name, value in given.items() if value != getattr(default, name)}
        return "/?" + urlencode(kept) if kept else "/"


@dataclass(frozen=True, slots=True)
class SeriesFacts:
    """What ranks one (target, vantage): its alerts, its newest run, its age."""

    target: str
    vantage: str
    firing: int  # firing alerts, its own and its target's across vantages
    open: int  # open alerts of any state, the same way
    missed: float  # the newest run's deadline misses and errors, a share of its samples
    stale: bool


@dataclass(frozen=True, slots=True)
class Paged:
    items: list[SeriesFacts]
    matching: int  # series the filter keeps, over every page
    page: int  # 1-based, within [1, pages]
    pages: int
    first: int  # 1-based position of the page's first item (0 when none)


def parse_query(params: Mapping[str, str]) -> OverviewQuery:
    """The overview's query string; BadQuery names the parameter and what it may be."""
    q = params.get("q", "").strip()
    if len(q) > QUERY_MAX or "\x00" in q:
        raise BadQuery(f"q: at most {QUERY_MAX} characters, no NUL")
    show, sort = params.get("show", "all"), params.get("sort", "worst")
    if show not in SHOWS:
        raise BadQuery(f"show must be one of {', '.join(SHOWS)}")
    if sort not in SORTS:
        raise BadQuery(f"sort must be one of {', '.join(SORTS)}")
    page = _number(params, "page", 1, 1, 10**6)
    per = _number(params, "per", PER_PAGE, 1, PER_PAGE_MAX)
    return OverviewQuery(q, show, sort, page, per)


def _number(params: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    text = params.get(name)
    if text is None:
        return default
    if not text.isdigit() or not low <= int(text) <= high:
        raise BadQuery(f"{name} must be a whole number from {low} to {high}")
    return int(text)


def missed_share(n_samples: int, n_errors: int, n_deadline_exceeded: int) -> float:
    return (n_errors + n_deadline_exceeded) / n_samples if n_samples else 0.0


def worst_first(facts: SeriesFacts) -> tuple[object, ...]:
    return (-facts.firing, -facts.open, -facts.missed, not facts.stale, *by_name(facts))


def by_name(facts: SeriesFacts) -> tuple[str, str]:
    return facts.target, facts.vantage


def matches(facts: SeriesFacts, words: Sequence[str], show: Show) -> bool:
    text = f"{facts.target} {facts.vantage}".lower()
    if not all(word in text for word in words):
        return False
    return {
        "all": True,
        "firing": facts.firing > 0,
        "alerting": facts.open > 0,
        "missing": facts.missed > 0,
        "stale": facts.stale,
    }[show]


def page_of(facts: Iterable[SeriesFacts], query: OverviewQuery) -> Paged:
    """The page asked for of the series the filter keeps, sorted; a page past the last is
    the last (a fleet that shrank since the link was made)."""
    paged, _, _ = split_page(kept_sorted(facts, query), 0, query)
    return paged


def kept_sorted(facts: Iterable[SeriesFacts], query: OverviewQuery) -> list[SeriesFacts]:
    """The series the filter keeps, in the order asked for."""
    words = query.q.lower().split()
    kept = [f for f in facts if matches(f, words, query.show)]
    kept.sort(key=worst_first if query.sort == "worst" else by_name)
    return kept


def split_page(
    ahead: Sequence[SeriesFacts], rest: int, query: OverviewQuery
) -> tuple[Paged, int, int]:
    """The page asked for of ``ahead`` (kept and sorted) followed by ``rest`` more series
    ranked elsewhere (the database): the page with ahead's share of it as its items, and
    the offset and number of the rest's series that complete it."""
    matching = len(ahead) + rest
    pages = max(1, -(-matching // query.per))
    page = min(query.page, pages)
    start = (page - 1) * query.per
    items = list(ahead[start : start + query.per])
    offset = max(0, start - len(ahead))
    count = min(query.per - len(items), rest - offset)
    first = start + 1 if items or count > 0 else 0
    return Paged(items, matching, page, pages, first), offset, max(0, count)


def ranked_apart(query: OverviewQuery) -> bool:
    """Whether the alerted series come first, ranked here, and the rest after them: worst
    first, or only alerted series shown (then there is no rest)."""
    return query.sort == "worst" or query.show in ("firing", "alerting")


@dataclass(frozen=True, slots=True)
class PageLink:
    label: str
    href: str | None  # None: the current page, or a gap ("…")
    rel: str = ""


def page_links(query: OverviewQuery, paged: Paged) -> list[PageLink]:
    """Previous, the first, a window around the current page, the last, next; gaps as "…"."""
    if paged.pages <= 1:
        return []
    shown = {1, paged.pages, *range(paged.page - WINDOW_LINKS, paged.page + WINDOW_LINKS + 1)}
    links: list[PageLink] = []
    if paged.page > 1:
        links.append(PageLink("‹ previous", query.href(page=paged.page - 1), "prev"))
    last = 0
    for number in sorted(n for n in shown if 1 <= n <= paged.pages):
        if number > last + 1:
            links.append(PageLink("…", None))
        current = number == paged.page
        links.append(PageLink(str(number), None if current else query.href(page=number)))
        last = number
    if paged.page < paged.pages:
        links.append(PageLink("next ›", query.href(page=paged.page + 1), "next"))
    return links
