"""``create_app(settings)``: wires the engine, the sink (the database), the spool, the writer
and the pipeline, alerting, the scheduler and the web app. Nothing is built at import time,
so tests build as many apps as they like."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles
from starlette.middleware.trustedhost import TrustedHostMiddleware

from app import __version__
from app.agents.server.agents import Agents
from app.agents.server.book import VantageBook
from app.agents.server.watch import VantageWatch
from app.alerts.engine import AlertEngine
from app.alerts.evaluate import Evaluator
from app.alerts.maintenance import Maintenance
from app.alerts.sender import Sender
from app.clock import utcnow
from app.config import Settings, Target, TargetsFile, load_targets
from app.export.collector import ExportCollector
from app.export.environment import exporter_from_environment
from app.export.exporter import RunExporter
from app.notifiers import build_notifiers
from app.replicas.evaluation import OwnerEvaluation
from app.replicas.membership import Replicas, now_ms
from app.runs.dbsink import DatabaseSink
from app.runs.pipeline import Pipeline
from app.runs.spool import Spool
from app.runs.writer import Writer
from app.runtime import readscrape
from app.runtime.coverage import Coverage, CoverageCollector
from app.runtime.health import Health
from app.runtime.metrics import RunMetrics, then
from app.runtime.rules import AlertRules
from app.runtime.scheduler import Watch
from app.runtime.service import Service
from app.runtime.standing import Standing
from app.runtime.upkeep import Upkeep
from app.runtime.workermetrics import WorkersCollector
from app.runtime.workers import Workers
from app.store.db import make_engine, make_sessions
from app.store.dbhistory import DatabaseHistory
from app.store.leader import Leadership
from app.store.quarantine import Quarantine, isolated
from app.store.records import RunRecord
from app.store.rollups.inhand import InHand
from app.store.wakeups import EVALUATIONS, OUTBOX, Doorbell, Listener
from app.web import api as web_api
from app.web import deps, errors, healthz, pages, scrape, unavailable
from app.web.auth import document_open_writes
from app.web.hosts import allowed_hosts
from app.web.pages import STATIC_DIR


def build_service(
    settings: Settings,
    targets: TargetsFile | None = None,
    observed: RunMetrics | None = None,
    *,
    probing: bool = True,
    migrate: bool = False,
    book: VantageBook | None = None,
    exporter: RunExporter | None = None,
) -> Service:
    """The service, its parts built in the order they need each other. ``book``: the
    agents' (``Agents.book``), given when the server takes agents; its upkeep then checks
    every vantage for silence. ``exporter``: OpenTelemetry's, fed every stored run."""
    targets = targets if targets is not None else load_targets(settings.config)
    resolved = settings.resolved(targets)
    engine = make_engine(resolved.database_url)
    sessions = make_sessions(engine)
    rules = AlertRules(targets)
    maintenance = Maintenance(sessions, lambda: rules.targets.maintenance, utcnow)
    history = DatabaseHistory(sessions)
    evaluator = Evaluator(history, rules.params_for, maintenance=maintenance.spans)
    queued = Doorbell()  # the outbox sender's: rung once a delivery is committed
    alerts = AlertEngine(
        sessions,
        evaluator,
        rules.notifiers_for,
        wants_refresh=rules.wants_refresh,
        maintenance=maintenance,
        queued=queued.ring,
    )
    # What a background loop cannot handle, set aside (/healthz, /metrics).
    quarantine = Quarantine()
    # Replicas on one PostgreSQL share the targets: each probes and evaluates its own.
    contested = engine.dialect.name == "postgresql"
    leadership = Leadership(engine)
    replicas = Replicas(
        sessions,
        contested,
        settings.replica_lease_s,
        fallback=lambda: leadership.leading,
        leading=lambda: leadership.leading,
    )
    owned = OwnerEvaluation(alerts, replicas, rules.names)
    # Every stored run, probed here or pushed by an agent: evaluation (by the target's
    # owner), then metrics and the OpenTelemetry export.
    evaluate = isolated(owned.evaluate_after, quarantine.loop("evaluation"))
    count = counted(observed, exporter, rules)
    after_store: Callable[[RunRecord], object] = (
        evaluate if count is None else then(evaluate, count)
    )
    refused = None if observed is None else observed.observe_refusal
    # Each run stored goes on in hand: to the evaluator's history, and to the rollups'
    # catch-up, which then need not read its samples back (the runs of targets this replica
    # owns: it keeps their rollups, app.replicas.rollups). The catch-up's copy is handed
    # over before the write: the catch-up may count the run the moment it commits.
    in_hand = InHand(wanted=lambda target: replicas.owns(target, now_ms()))
    sink = DatabaseSink(sessions, refused=refused, stored=history.add, writing=in_hand.keep)
    writer = Writer(sink, Spool(settings.spool_dir), after_store=after_store)
    pipeline = Pipeline(writer, resolved.vantage)
    outbox = quarantine.loop("outbox")
    sender = Sender(sessions, build_notifiers(targets.notifiers), aside=outbox, bell=queued)
    # Other replicas' deliveries and evaluation requests wake this one's loops (PostgreSQL).
    bells = {OUTBOX: queued, EVALUATIONS: owned.requested}
    listener = Listener(engine.url, bells).loop if contested else None
    watch = Watch(
        pipeline.run,
        resolved.vantage,
        owns=replicas.owns,
        max_in_flight=settings.max_runs_in_flight,
    )
    coverage = Coverage(resolved.vantage, lambda: rules.targets)
    vantages = None
    if book is not None:
        coverage.agents = book.refusals
        here = (resolved.vantage, watch) if probing else None
        vantages = silence_watch(book, alerts, rules, leadership, here)
    return Service(
        settings=settings,
        resolved=resolved,
        targets=targets,
        engine=engine,
        sessions=sessions,
        sink=sink,
        after_store=after_store,
        pipeline=pipeline,
        watch=watch,
        leadership=leadership,
        replicas=replicas,
        standing=Standing(leadership, replicas, settings.leader_check_s),
        evaluation=owned,
        alerts=alerts,
        rules=rules,
        writer=writer,
        health=Health(
            engine,
            writer,
            coverage=coverage,
            quarantine=quarantine,
            replicas=replicas,
            exporter=exporter,
            skips=watch.skips,
        ),
        coverage=coverage,
        upkeep=Upkeep(
            sessions,
            engine,
            resolved.raw_retention_days,
            sender=sender,
            summary_retention_days=resolved.summary_retention_days,
            vantages=vantages,
            quarantine=quarantine,
            leading=lambda: leadership.leading,
            in_hand=in_hand,
            owned=replicas.share,
            listener=listener,
        ),
        sender=sender,
        exporter=exporter,
        probing=probing,
        migrate=migrate,
    )


def counted(
    observed: RunMetrics | None, exporter: RunExporter | None, rules: AlertRules
) -> Callable[[RunRecord], object] | None:
    """What follows a stored run once, evaluated or not: /metrics, then the export (with
    its target as the file says now)."""
    steps: list[Callable[[RunRecord], object]] = []
    if observed is not None:
        steps.append(observed.observe_run)
    if exporter is not None:
        steps.append(lambda run: exporter.export(run, rules.target(run.target)))
    if not steps:
        return None
    return steps[0] if len(steps) == 1 else then(steps[0], steps[1])


def silence_watch(
    book: VantageBook,
    alerts: AlertEngine,
    rules: AlertRules,
    leadership: Leadership,
    here: tuple[str, Watch] | None,
) -> VantageWatch:
    """``vantage_silent`` over each agent of the targets file as it stands (``rules``
    follows reloads), and over this server's own vantage while it probes (``here``: what
    its watch schedules), checked by the leader."""

    def own() -> tuple[str, list[Target]] | None:
        return None if here is None else (here[0], list(here[1].targets.values()))

    def on_schedule(now: datetime) -> bool:
        return here is not None and here[1].on_schedule(now)

    return VantageWatch(
        alerts,
        book,
        lambda: rules.targets,
        lambda: leadership.leading,
        own,
        on_schedule=on_schedule,
    )


def create_app(
    settings: Settings,
    targets: TargetsFile | None = None,
    *,
    probing: bool = True,
    migrate: bool = False,
) -> FastAPI:
    """The service as an ASGI app; it starts scheduling when the app starts (lifespan).
    ``probing=False`` serves the database without probing (``phasewatch demo``);
    ``migrate=True`` migrates a database that was unreachable at start once it answers."""
    observed = RunMetrics()
    book = VantageBook()
    exporter = exporter_from_environment(os.environ)
    service = build_service(
        settings, targets, observed, probing=probing, migrate=migrate, book=book, exporter=exporter
    )
    maintenance = service.alerts.maintenance
    observed.watch(
        service.sessions,
        service.writer.spool.pending,
        list if maintenance is None else maintenance.windows,
    )
    if exporter is not None:
        observed.registry.register(ExportCollector(exporter))
    # The server's side of `phasewatch agent`: pushed runs take the service's after_store.
    count = counted(observed, exporter, service.rules)
    agents = Agents(service, book, count or observed.observe_run)
    observed.registry.register(agents.collector)
    observed.registry.register(CoverageCollector(service.coverage))
    observed.registry.register(readscrape.quarantined(service.upkeep.quarantine))
    observed.registry.register(readscrape.duplicate_slots(service.sink.taken))
    share = readscrape.replica_share(
        service.replicas, lambda: service.watch.passed, service.evaluation, service.rules.names
    )
    for collector in share:
        observed.registry.register(collector)
    # What-ifs and levers: computed in worker processes, off the probes' event loop.
    workers = Workers(settings.whatif_workers, settings.whatif_queue)
    observed.registry.register(WorkersCollector(workers))
    observed.registry.register(readscrape.runs_lost(service.writer.spool.losses))
    skipped = readscrape.runs_skipped(service.watch.skips, service.watch.vantage, book.skipped)
    observed.registry.register(skipped)
    if service.upkeep.in_hand is not None:
        observed.registry.register(readscrape.caught_up(service.upkeep.in_hand))

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await service.start()
        try:
            yield
        finally:
            workers.close()
            agents.close()
            await service.stop()

    # /docs is served from vendored files (app.web.pages.apidocs), not FastAPI's CDN page.
    app = FastAPI(
        title="phasewatch", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None
    )
    deps.install(app, service, agents, observed, workers)
    errors.install(app)
    unavailable.install(app, service.health)
    app.include_router(healthz.router)
    app.include_router(web_api.router)
    app.include_router(scrape.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    document_open_writes(app, settings)
    # Redirecting to a www. name would answer a foreign Host with something other than 400.
    app.add_middleware(
        TrustedHostMiddleware, allowed_hosts=allowed_hosts(settings), www_redirect=False
    )
    return app
