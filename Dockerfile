# syntax=docker/dockerfile:1
# phasewatch: `docker compose up -d` with docker-compose.yml, or
#   docker build -t phasewatch . && docker run -v ./phasewatch.yaml:/etc/phasewatch/phasewatch.yaml:ro ...

# Build stage: the phasewatch wheel and a wheel for every dependency, so the runtime stage
# installs offline and carries no build tools and no source tree.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY app ./app
# Shipped in the wheel as data files (<prefix>/share/phasewatch/migrations), where
# app.store.migrate finds them: without this line `serve` cannot migrate.
COPY migrations ./migrations
RUN pip wheel --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PHASEWATCH_CONFIG=/etc/phasewatch/phasewatch.yaml \
    PHASEWATCH_SPOOL_DIR=/var/lib/phasewatch/spool
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    PIP_ROOT_USER_ACTION=ignore pip install --no-index --find-links /wheels phasewatch
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
