"""The alert engine on SQLite and PostgreSQL: transitions become alert, transition, outbox
and detector-state rows in one transaction; silences, acknowledgement, restarts."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.engine import AlertEngine, AlertNotFound, AlertNotOpen
from app.alerts.evaluate import Evaluator
from app.alerts.identity import Transition
from app.alerts.silences import Matcher, SilenceNotFound
from app.alerts.state import State
from app.analysis.detectors import DetectorParams
from app.analysis.drift import Drift, freeze
from app.analysis.driftpack import pack, unpack
from app.analysis.runs import RunData
from app.config import Settings, Target, TargetsFile
from app.demo.sim.app import SimConfig
from app.demo.sim.server import SimServer
from app.main import build_service
from app.probe.spec import Kind
from app.runs.dbsink import DatabaseSink
from app.runs.pipeline import Pipeline
from app.runs.spool import Spool
from app.runs.writer import Writer
from app.runtime.targetsync import target_values
from app.store.db import make_engine, make_sessions
from app.store.dbhistory import DatabaseHistory
from app.store.ingest import store_run
from app.store.models import (
    AlertRow,
    AlertTransitionRow,
    DeliveryRow,
    DetectorStateRow,
    RunRow,
    SilenceRow,
)
from app.store.records import RunRecord
from app.store.targets import sync_targets
from tests.driftfactory import runs as drift_runs
from tests.runfactory import LLM, T0, failed_run, make_run, record_of

EVERY = timedelta(minutes=1)
FAILING = DetectorParams(enabled=("probe_failing",))
NOTIFIERS = ["am", "hook"]
TARGET = Target(name="chat", url="http://chat.invalid/v1", interval="1m")


@dataclass
class Watch:
    """An engine over a database, a clock, and runs fed to it one by one (as serve does)."""

    sessions: sessionmaker[Session]
    params: DetectorParams = FAILING
    notifiers: Callable[[str], list[str]] = lambda _target: list(NOTIFIERS)
    now: datetime = T0
    fed: int = 0
    engine: AlertEngine = field(init=False)

    def __post_init__(self) -> None:
        with self.sessions.begin() as session:
            sync_targets(session, target_values([TARGET]), T0)
        self.engine = self.restart()

    def restart(self) -> AlertEngine:
        """A new process: a new history, evaluator and engine on the same database."""
        history = DatabaseHistory(self.sessions)
        evaluator = Evaluator(history, lambda _target: self.params)
        self.engine = AlertEngine(self.sessions, evaluator, self.notify, self.clock)
        return self.engine

    def clock(self) -> datetime:
        return self.now

    def notify(self, target: str) -> list[str]:
        return self.notifiers(target)

    def feed(self, run: RunData) -> list[Transition]:
        record = self.store(run)
        return self.engine.evaluate_after(record)

    def store(self, run: RunData) -> RunRecord:
        record = record_of(run)
        self.now = run.at + timedelta(seconds=5)
        with self.sessions.begin() as session:
            store_run(session, record, self.now)
        return record

    def failed(self, vantage: str = "eu") -> list[Transition]:
        self.fed += 1
        return self.feed(failed_run(T0 + self.fed * EVERY, vantage=vantage))

    def ok(self, vantage: str = "eu") -> list[Transition]:
        self.fed += 1
        rng = np.random.default_rng(self.fed)
        return self.feed(make_run(rng, T0 + self.fed * EVERY, vantage=vantage, n=5))

    def firing(self) -> Transition:
        """Four failed runs: pending after the third, firing after the fourth."""
        for _ in range(3):
            self.failed()
        (fired,) = self.failed()
        assert fired.after is State.FIRING
        return fired


def rows(sessions: sessionmaker[Session], table: type[Any], *order: Any) -> list[Any]:
    with sessions() as session:
        return list(session.scalars(select(table).order_by(*order)))


def transitions(sessions: sessionmaker[Session]) -> list[tuple[str, str]]:
    found = rows(sessions, AlertTransitionRow, AlertTransitionRow.id)
    return [(row.before, row.after) for row in found]


def deliveries(sessions: sessionmaker[Session]) -> list[DeliveryRow]:
    return rows(sessions, DeliveryRow, DeliveryRow.id)


@pytest.fixture
def watch(sessions: sessionmaker[Session]) -> Watch:
    return Watch(sessions)


# The lifecycle in rows ----------------------------------------------------------------------


def test_a_failing_probe_goes_through_the_lifecycle_in_rows(watch: Watch) -> None:
    sessions = watch.sessions
    assert watch.failed() == [] and watch.failed() == []
    (pending,) = watch.failed()
    assert (pending.before, pending.after) == (State.INACTIVE, State.PENDING)
    assert deliveries(sessions) == []  # pending is never notified
    (firing,) = watch.failed()
    fired_at = watch.now
    (refresh,) = watch.failed()
    assert refresh.refresh
    (recovering,) = watch.ok()
    (resolved,) = watch.ok()
    assert resolved.after is State.RESOLVED
    assert watch.ok() == []
    assert len({pending.alert_id, firing.alert_id, resolved.alert_id}) == 1

    (alert,) = rows(sessions, AlertRow)
    assert str(alert.id) == pending.alert_id
    assert (alert.kind, alert.target, alert.vantage, alert.scope) == (
        "probe_failing", "chat", "eu", "vantage"
    )  # fmt: skip
    assert (alert.state, alert.streak, alert.severity) == ("resolved", 0, "critical")
    assert alert.fired_at == fired_at and alert.resolved_at == watch.now - EVERY
    assert alert.acknowledged_at is None
    assert alert.summary == resolved.summary
    # Real changes of state only: the refresh is not a transition row.
    assert transitions(sessions) == [
        ("inactive", "pending"),
        ("pending", "firing"),
        ("firing", "recovering"),
        ("recovering", "resolved"),
    ]


def test_firing_refreshes_and_resolved_are_delivered_to_each_notifier(watch: Watch) -> None:
    sessions = watch.sessions
    watch.firing()
    firing_at = watch.now
    watch.failed()  # a refresh
    watch.ok()
    watch.ok()
    steps = {row.after: row.id for row in rows(sessions, AlertTransitionRow)}
    sent = deliveries(sessions)
    assert [(row.payload["state"], row.payload["previous"], row.notifier) for row in sent] == [
        ("firing", "pending", "am"),
        ("firing", "pending", "hook"),
        ("firing", "firing", "am"),
        ("firing", "firing", "hook"),
        ("resolved", "recovering", "am"),
        ("resolved", "recovering", "hook"),
    ]
    assert [row.transition_id for row in sent] == [
        steps["firing"], steps["firing"], None, None, steps["resolved"], steps["resolved"]
    ]  # fmt: skip
    first = sent[0]
    assert (first.status, first.attempts, first.next_attempt_at) == ("pending", 0, firing_at)
    assert first.created_at == firing_at and first.sent_at is None
    payload = first.payload
    assert payload["labels"] == {
        "alertname": "probe_failing",
        "target": "chat",
        "scope": "vantage",
        "severity": "critical",
        "vantage": "eu",
    }
    assert payload["alert_id"] == str(first.alert_id)
    # The target probes every minute: a firing alert holds for 4 minutes unless refreshed.
    assert payload["ends_at"] == (firing_at + 4 * EVERY).isoformat().replace("+00:00", "Z")
    assert payload["summary"].startswith("probe failing on chat")
    assert payload["numbers"] == {"runs": 3, "failed_samples": 15}
    assert {row.status for row in sent} == {"pending"}


def test_refreshes_go_only_to_notifiers_that_want_them(watch: Watch) -> None:
    evaluator = watch.engine.evaluator
    watch.engine = AlertEngine(
        watch.sessions, evaluator, watch.notify, watch.clock, wants_refresh=lambda n: n == "am"
    )
    watch.firing()
    watch.failed()  # a refresh: Alertmanager's endsAt moves on, the webhook hears nothing
    sent = [(row.payload["previous"], row.notifier) for row in deliveries(watch.sessions)]
    assert sent == [("pending", "am"), ("pending", "hook"), ("firing", "am")]


def test_no_notifiers_means_rows_but_no_deliveries(sessions: sessionmaker[Session]) -> None:
    watch = Watch(sessions, notifiers=lambda _target: [])
    watch.firing()
    assert deliveries(sessions) == []
    assert transitions(sessions) == [("inactive", "pending"), ("pending", "firing")]


def test_a_notifier_named_twice_gets_one_delivery(sessions: sessionmaker[Session]) -> None:
    watch = Watch(sessions, notifiers=lambda _target: ["am", "am"])
    watch.firing()
    assert [row.notifier for row in deliveries(sessions)] == ["am"]


def test_a_run_evaluated_twice_adds_nothing(watch: Watch) -> None:
    for _ in range(3):
        watch.failed()
    watch.fed += 1
    record = watch.store(failed_run(T0 + watch.fed * EVERY))
    assert len(watch.engine.evaluate_after(record)) == 1
    assert watch.engine.evaluate_after(record) == []
    watch.restart()
    assert watch.engine.evaluate_after(record) == []  # the last run is remembered
    assert len(deliveries(watch.sessions)) == len(NOTIFIERS)
    assert len(transitions(watch.sessions)) == 2


def test_an_aborted_run_is_not_evaluated(watch: Watch) -> None:
    for _ in range(3):
        watch.failed()
    record = record_of(failed_run(T0 + 10 * EVERY))
    aborted = RunRecord(record.id, record.target, record.vantage, record.started_at, "aborted")
    assert watch.engine.evaluate_after(aborted) == []


def test_a_failed_transaction_leaves_memory_and_database_as_they_were(
    sessions: sessionmaker[Session],
) -> None:
    broken = {"now": False}

    def notifiers(_target: str) -> list[str]:
        if broken["now"]:
            raise RuntimeError("notifier lookup broke")
        return ["am"]

    watch = Watch(sessions, notifiers=notifiers)
    for _ in range(3):
        watch.failed()
    broken["now"] = True
    with pytest.raises(RuntimeError):
        watch.failed()
    assert transitions(sessions) == [("inactive", "pending")]
    (alert,) = rows(sessions, AlertRow)
    assert (alert.state, alert.streak) == ("pending", 1)
    (state,) = rows(sessions, DetectorStateRow)
    assert state.last_run_id != str(record_of(failed_run()).id)
    broken["now"] = False
    (fired,) = watch.failed()  # the evaluator did not move on without the database
    assert (fired.before, fired.after) == (State.PENDING, State.FIRING)
    assert len(deliveries(sessions)) == 1
    (state,) = rows(sessions, DetectorStateRow)  # the memory the failed write lost, written
    assert state.last_run_id == watch.engine.evaluator.memory("chat", "eu").last_run


# Restarts ------------------------------------------------------------------------------------


def test_a_restart_neither_refires_nor_forgets_an_open_alert(watch: Watch) -> None:
    fired = watch.firing()
    watch.restart()
    (refresh,) = watch.failed()
    assert refresh.refresh and refresh.alert_id == fired.alert_id
    watch.restart()
    (recovering,) = watch.ok()
    watch.restart()
    (resolved,) = watch.ok()
    assert (recovering.alert_id, resolved.alert_id) == (fired.alert_id, fired.alert_id)
    assert resolved.after is State.RESOLVED
    assert transitions(watch.sessions) == [
        ("inactive", "pending"),
        ("pending", "firing"),
        ("firing", "recovering"),
        ("recovering", "resolved"),
    ]
    assert [row.payload["state"] for row in deliveries(watch.sessions)] == [
        "firing", "firing", "firing", "firing", "resolved", "resolved"
    ]  # fmt: skip


def test_a_restart_keeps_a_pending_alert_s_streak(watch: Watch) -> None:
    for _ in range(3):
        watch.failed()
    watch.restart()
    (fired,) = watch.failed()
    assert (fired.before, fired.after) == (State.PENDING, State.FIRING)
    assert len(rows(watch.sessions, AlertRow)) == 1


@pytest.mark.parametrize("vantages", [("eu",), ("eu", "us")])
def test_a_run_that_moves_no_alert_saves_its_memory_for_the_next_process(
    watch: Watch, vantages: tuple[str, ...]
) -> None:
    for vantage in vantages:
        assert watch.ok(vantage) == []
    stored = {row.vantage: row.last_run_id for row in rows(watch.sessions, DetectorStateRow)}
    evaluator = watch.engine.evaluator
    assert stored == {v: evaluator.memory("chat", v).last_run for v in vantages}
    assert None not in stored.values()
    watch.restart().restore()
    assert {v: watch.engine.evaluator.memory("chat", v).last_run for v in vantages} == stored


def test_detector_state_is_stored_and_read_back(watch: Watch) -> None:
    watch.firing()
    (state,) = rows(watch.sessions, DetectorStateRow)
    assert (state.target, state.vantage) == ("chat", "eu")
    last = watch.engine.evaluator.memory("chat", "eu")
    assert state.last_run_id == last.last_run is not None
    restarted = watch.restart()
    restarted.restore()
    again = restarted.evaluator.memory("chat", "eu")
    assert (again.last_run, again.tail, again.rebase_at) == (
        last.last_run, last.tail, last.rebase_at
    )  # fmt: skip
    assert again.excluded == last.excluded and len(again.excluded) == 1
    start, end = again.excluded[0]
    assert start == watch.now and end is None  # a firing alert: its runs stay out


def test_a_detector_s_carried_numbers_are_stored_and_read_back(watch: Watch) -> None:
    watch.firing()
    watch.engine.evaluator.memory("chat", "eu").cusums["level_shift"] = [2.5, 3.0]
    watch.failed()  # another evaluation stores the memory again
    restarted = watch.restart()
    restarted.restore()
    assert restarted.evaluator.memory("chat", "eu").cusums == {"level_shift": [2.5, 3.0]}


# Acknowledgement -----------------------------------------------------------------------------


def test_acknowledging_a_firing_alert_resolves_it_and_notifies(watch: Watch) -> None:
    fired = watch.firing()
    at = watch.now + timedelta(seconds=30)
    acked = watch.engine.acknowledge(fired.alert_id, "ana@example.com", at)
    assert acked is not None and acked.acknowledged
    assert (acked.before, acked.after) == (State.FIRING, State.RESOLVED)
    (alert,) = rows(watch.sessions, AlertRow)
    assert (alert.state, alert.acknowledged_by) == ("resolved", "ana@example.com")
    assert alert.acknowledged_at == at and alert.resolved_at == at
    last = rows(watch.sessions, AlertTransitionRow, AlertTransitionRow.id)[-1]
    assert (last.before, last.after, last.acknowledged) == ("firing", "resolved", True)
    resolved = [row for row in deliveries(watch.sessions) if row.transition_id == last.id]
    assert [row.payload["state"] for row in resolved] == ["resolved", "resolved"]
    state = watch.engine.evaluator.memory("chat", "eu")
    assert state.rebase_at == alert.opened_at  # the reference re-bases onto the change
    (stored,) = rows(watch.sessions, DetectorStateRow)
    assert stored.rebase_at == alert.opened_at


def test_acknowledging_a_pending_alert_drops_it_without_notifying(watch: Watch) -> None:
    for _ in range(3):
        watch.failed()
    (pending,) = rows(watch.sessions, AlertRow)
    acked = watch.engine.acknowledge(str(pending.id), "ana", watch.now)
    assert acked is not None and acked.after is State.INACTIVE
    assert deliveries(watch.sessions) == []


def test_acknowledging_an_unknown_or_closed_alert_is_an_error(watch: Watch) -> None:
    with pytest.raises(AlertNotFound):
        watch.engine.acknowledge(str(uuid.uuid4()), "ana", watch.now)
    with pytest.raises(AlertNotFound):
        watch.engine.acknowledge("not-an-id", "ana", watch.now)
    fired = watch.firing()
    watch.engine.acknowledge(fired.alert_id, "ana", watch.now)
    with pytest.raises(AlertNotOpen):
        watch.engine.acknowledge(fired.alert_id, "ana", watch.now)
    watch.restart()
    with pytest.raises(AlertNotOpen):
        watch.engine.acknowledge(fired.alert_id, "ana", watch.now)


# Silences ------------------------------------------------------------------------------------


def test_a_matching_silence_holds_the_deliveries_back_as_silenced(watch: Watch) -> None:
    engine = watch.engine
    engine.create_silence(
        [
            {"name": "target", "value": "chat"},
            {"name": "alertname", "value": "probe_.*", "regex": True},
        ],
        starts_at=T0,
        ends_at=T0 + timedelta(minutes=5, seconds=30),
        created_by="ana",
        comment="maintenance",
    )
    watch.firing()  # fires at minute 4: silenced
    watch.failed()  # refresh at minute 5: silenced
    watch.failed()  # refresh at minute 6: the silence has ended
    assert [row.status for row in deliveries(watch.sessions)] == [
        "silenced", "silenced", "silenced", "silenced", "pending", "pending"
    ]  # fmt: skip


LABELS = {"alertname": "tail_shift", "target": "chat-prod", "vantage": "eu"}


@pytest.mark.parametrize(
    ("matcher", "matches"),
    [
        (Matcher("target", "chat-prod"), True),
        (Matcher("target", "chat"), False),
        (Matcher("target", "chat-.*", regex=True), True),
        (Matcher("target", "chat", regex=True), False),  # the whole value
        (Matcher("target", "chat-prod", equal=False), False),
        (Matcher("target", "chat-edge", equal=False), True),
        (Matcher("target", "chat-.*", regex=True, equal=False), False),
        (Matcher("vantage", "us|ap", regex=True, equal=False), True),
        (Matcher("scope", ""), True),  # a missing label is the empty string
        (Matcher("scope", "", equal=False), False),
        (Matcher("scope", ".+", regex=True, equal=False), True),
    ],
    ids=str,
)
def test_matcher(matcher: Matcher, matches: bool) -> None:
    assert matcher.matches(LABELS) is matches
    assert Matcher.parse(matcher.to_json()) == matcher


def test_a_silence_that_does_not_match_every_matcher_holds_nothing(watch: Watch) -> None:
    engine = watch.engine
    end = T0 + timedelta(days=1)
    engine.create_silence([{"name": "target", "value": "other"}], T0, end, "ana")
    engine.create_silence(
        [{"name": "target", "value": "chat"}, {"name": "vantage", "value": "us"}], T0, end, "ana"
    )
    engine.create_silence([Matcher("alertname", "probe", regex=True)], T0, end, "ana")  # anchored
    engine.create_silence([{"name": "target", "value": "chat"}], end, end + EVERY, "ana")  # later
    watch.firing()
    assert {row.status for row in deliveries(watch.sessions)} == {"pending"}


def test_silences_are_validated(watch: Watch) -> None:
    engine = watch.engine
    end = T0 + timedelta(hours=1)
    problems = {
        "at least one matcher": ([], T0, end),
        "not a valid regex": ([{"name": "target", "value": "(", "regex": True}], T0, end),
        "end after it starts": ([{"name": "target", "value": "chat"}], end, T0),
        "needs a label name": ([{"name": "", "value": "chat"}], T0, end),
        "must be a string": ([{"name": "target", "value": 3}], T0, end),
        "'equal' must be true or false": ([{"name": "target", "value": "a", "equal": 0}], T0, end),
        "must not match an empty label": (
            [{"name": "target", "value": "chat", "equal": False}, {"name": "vantage", "value": ""}],
            T0,
            end,
        ),
    }
    for message, (matchers, starts, ends) in problems.items():
        with pytest.raises(ValueError, match=message):
            engine.create_silence(matchers, starts, ends, "ana")  # type: ignore[arg-type]
    assert rows(watch.sessions, SilenceRow) == []


def test_silences_are_listed_and_expired(watch: Watch) -> None:
    engine = watch.engine
    target = [{"name": "target", "value": "chat"}]
    now = watch.now
    current = engine.create_silence(target, now - EVERY, now + timedelta(hours=1), "ana", "deploy")
    later = engine.create_silence(target, now + timedelta(hours=2), now + timedelta(hours=3), "bo")
    assert [row.id for row in engine.list_silences()] == [current.id, later.id]
    assert [row.id for row in engine.list_silences(active_only=True)] == [current.id]
    stored = {"name": "target", "value": "chat", "regex": False, "equal": True}
    assert current.matchers == {"matchers": [stored]}
    expired = engine.expire_silence(current.id, now)
    assert expired.ends_at == now
    assert engine.list_silences(active_only=True) == []
    engine.expire_silence(str(later.id), now)  # not begun: ends before it would start
    (stored,) = [row for row in engine.list_silences() if row.id == later.id]
    assert stored.starts_at == stored.ends_at == now
    with pytest.raises(SilenceNotFound):
        engine.expire_silence(uuid.uuid4(), now)
    with pytest.raises(SilenceNotFound):
        engine.expire_silence("nope", now)


# A dominant shift through the database --------------------------------------------------------


def test_a_dominant_shift_fires_from_runs_rebuilt_out_of_the_database(
    sessions: sessionmaker[Session],
) -> None:
    quick = DetectorParams(
        enabled=("dominant_shift",), min_reference_runs=8, min_reference_days=0.1, resamples=200
    )
    watch = Watch(sessions, params=quick)
    rng = np.random.default_rng(3)
    every = timedelta(minutes=20)
    found: list[Transition] = []
    for i in range(30):
        medians = LLM | {"generation": 240.0} if i >= 20 else LLM
        found += watch.feed(make_run(rng, T0 + i * every, medians, n=10))
    changes = [t for t in found if not t.refresh]
    assert [(t.before.value, t.after.value) for t in changes] == [
        ("inactive", "pending"),
        ("pending", "firing"),
    ]
    identity = changes[0].identity
    assert (identity.scope, identity.from_phase, identity.to_phase) == (
        "vantage", "queue", "generation"
    )  # fmt: skip
    (alert,) = rows(sessions, AlertRow)
    assert (alert.from_phase, alert.to_phase, alert.state) == ("queue", "generation", "firing")
    fired = rows(sessions, AlertTransitionRow, AlertTransitionRow.id)[-1]
    assert fired.after == "firing" and fired.numbers["lead_low_pp"] > 0


# Wiring ----------------------------------------------------------------------------------------

FAST = SimConfig(one_way_ms=2, queue_median_ms=5, queue_sigma=0, prefill_ms=2, tokens=5)


@pytest.fixture
def sim_config() -> SimConfig:
    return FAST


def sim_target(sim: SimServer) -> Target:
    return Target.model_validate(
        {
            "name": "chat",
            "kind": Kind.OPENAI,
            "url": f"{sim.url}/v1/chat/completions",
            "body": {"model": "sim", "stream": True, "messages": []},
            "samples": 2,
        }
    )


@pytest.mark.anyio
async def test_a_failing_evaluation_never_fails_or_loses_the_run(
    sim: SimServer, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    seen: list[RunRecord] = []

    def evaluate(record: RunRecord) -> None:
        seen.append(record)
        raise RuntimeError("detection broke")

    writer = Writer(DatabaseSink(sessions), Spool(tmp_path / "spool"), after_store=evaluate)
    pipeline = Pipeline(writer, "here")
    record = await pipeline.run(sim_target(sim))
    assert [run.id for run in seen] == [record.id]
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(RunRow)) == 1


@pytest.mark.anyio
async def test_a_spooled_run_is_not_evaluated_until_a_stored_one_comes(
    sim: SimServer, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    seen: list[RunRecord] = []
    spool = Spool(tmp_path / "spool")
    away = make_sessions(make_engine(f"sqlite:///{tmp_path}/absent/dir/pw.db"))
    gone = Writer(DatabaseSink(away), spool, after_store=seen.append)
    await Pipeline(gone, "here").run(sim_target(sim))
    assert seen == [] and spool.has_pending()
    back = Pipeline(Writer(DatabaseSink(sessions), spool, after_store=seen.append), "here")
    record = await back.run(sim_target(sim))
    assert [run.id for run in seen] == [record.id]  # after the spooled one was flushed


def test_build_service_wires_alerting_with_each_target_s_rules(tmp_path: Path) -> None:
    strict = TARGET.model_copy(update={"alerts": DetectorParams(confirm=5), "notifiers": ["am"]})
    plain = Target(name="plain", url="http://plain.invalid/")
    targets = TargetsFile.model_validate(
        {
            "notifiers": {
                "am": {"type": "alertmanager", "url": "http://127.0.0.1:9093"},
                "hook": {"type": "webhook", "url": "http://127.0.0.1:9/hook"},
            },
            "targets": [strict.model_dump(), plain.model_dump()],
        }
    )
    settings = Settings(
        database_url=f"sqlite:///{tmp_path}/pw.db", spool_dir=tmp_path / "spool", vantage="v"
    )
    service = build_service(settings, targets)
    try:
        # Evaluation by the target's owner (app.replicas), each target's failure held on its
        # own (store.quarantine.isolated).
        assert service.after_store.__wrapped__ == service.evaluation.evaluate_after  # type: ignore[attr-defined]
        assert service.evaluation.alerts is service.alerts
        # One road for every run: the writer's and the agents' (Agents) take the service's.
        assert service.writer.after_store is service.after_store
        params_for = service.alerts.evaluator.params_for
        assert params_for("chat").confirm == 5
        assert params_for("plain") == DetectorParams() == params_for("imported")
        assert service.alerts.notifiers_for("chat") == ["am"]
        assert service.alerts.notifiers_for("plain") == ["am", "hook"]  # none named: all
        service.rules.targets = TargetsFile(targets=[plain])  # what a reload does
        assert params_for("chat") == DetectorParams()
    finally:
        service.engine.dispose()


def test_a_resolved_alert_stays_held_back_across_a_restart(watch: Watch) -> None:
    watch.firing()
    watch.ok()
    (resolved,) = watch.ok()
    assert resolved.after is State.RESOLVED
    watch.restart().restore()
    assert resolved.identity in watch.engine.evaluator.cooling  # read back from its row
    for _ in range(4):  # the same outage again, minutes later: no new alert
        assert [t for t in watch.failed() if t.moved] == []
    assert rows(watch.sessions, AlertRow, AlertRow.opened_at)[-1].state == "resolved"


def test_a_frozen_baseline_is_stored_and_read_back(watch: Watch) -> None:
    watch.firing()
    baseline = freeze(list(drift_runs(1, T0, 7)))
    assert baseline is not None
    floats = pack(Drift.start(baseline, T0.timestamp()))  # ~1,500 floats, one unpinned
    watch.engine.evaluator.memory("chat", "eu").cusums["baseline_drift"] = floats
    watch.failed()
    restarted = watch.restart()
    restarted.restore()
    back = unpack(restarted.evaluator.memory("chat", "eu").cusums["baseline_drift"])
    assert back is not None and pack(back) == floats
