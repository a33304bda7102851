# phasewatch: `docker compose up -d` with docker-compose.yml, or
#   docker build -t phasewatch . && docker run -v ./phasewatch.yaml:/etc/phasewatch/phasewatch.yaml:ro ...
# Needs BuildKit (the default of `docker build` since Docker 23; DOCKER_BUILDKIT=1 before).
# No `# syntax=` line: BuildKit's built-in frontend is enough, and a build then needs no
# registry but for the base image.

# Any Debian-like image with Python >= 3.11 and its venv module. CI builds on a Debian
# bookworm it makes with debootstrap (.ci/compose/base-image), as no registry is reachable.
ARG BASE_IMAGE=python:3.11-slim

# Build stage: the phasewatch wheel and a wheel for every dependency, so the runtime stage
# installs offline and carries no build tools and no source tree.
FROM ${BASE_IMAGE} AS build
# --build-arg PIP_NO_INDEX=1 with wheels in .ci/wheelhouse: a build with no network of its
# own (.ci/compose/run fills the wheelhouse with `pip wheel` on the host).
ARG PIP_NO_INDEX=0
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INDEX=${PIP_NO_INDEX} \
    PIP_FIND_LINKS=/wheelhouse
RUN python3 -m venv /opt/build
COPY .ci/wheelhouse /wheelhouse
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
# Shipped in the wheel as data files (<prefix>/share/phasewatch/migrations), where
# app.store.migrate finds them: without this line `serve` cannot migrate.
COPY migrations ./migrations
RUN /opt/build/bin/pip wheel --wheel-dir /wheels .

FROM ${BASE_IMAGE}
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/phasewatch/bin:$PATH \
    PHASEWATCH_CONFIG=/etc/phasewatch/phasewatch.yaml \
    PHASEWATCH_SPOOL_DIR=/var/lib/phasewatch/spool
# A virtual environment of its own: Debian's Python refuses pip installs into the system's.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python3 -m venv /opt/phasewatch \
    && /opt/phasewatch/bin/pip install --no-index --find-links /wheels phasewatch
# A fixed numeric id, so an orchestrator can check it is not root and a host directory
# can be chowned to it. The spool (runs waiting for the database) and a SQLite file, if
# one is used, live under /var/lib/phasewatch.
RUN groupadd --system --gid 10001 phasewatch \
    && useradd --system --uid 10001 --gid phasewatch --home-dir /var/lib/phasewatch \
        --no-create-home --shell /usr/sbin/nologin phasewatch \
    && mkdir -p /var/lib/phasewatch/spool /etc/phasewatch \
    && chown -R phasewatch:phasewatch /var/lib/phasewatch
# Declared after the chown: a fresh named volume is seeded from here, owner included.
VOLUME ["/var/lib/phasewatch"]
WORKDIR /var/lib/phasewatch
USER 10001:10001
EXPOSE 8080
# /healthz answers 200 while the database is away (runs are spooled); it fails only when
# the process no longer serves. The image has no curl: Python's urllib raises on non-2xx.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["phasewatch"]
# serve applies pending migrations before it starts (advisory-locked, so replicas may race).
CMD ["serve", "--host", "0.0.0.0", "--port", "8080", "--config", "/etc/phasewatch/phasewatch.yaml"]
