# syntax=docker/dockerfile:1
# gpuwatch: one image for every role. The command picks the role (see docker-compose.yml and
# deploy/kubernetes/): `serve` (the dashboard, the default), `collect --follow`, `db upgrade`,
# `report weekly`, `alerts render`, `dashboards render`, `simulate exporter|apiserver`.
#
#   docker build -t gpuwatch:0.1.0 .
#   docker run --rm -p 127.0.0.1:8050:8050 -e GPUWATCH_DATABASE_URL=... gpuwatch:0.1.0
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

# --- build: a wheel of gpuwatch, migrations and data files included ----------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY migrations ./migrations
COPY gpuwatch ./gpuwatch
RUN pip wheel --no-deps --wheel-dir /wheels .

# --- runtime: the wheel and its pinned dependencies, run as an unprivileged user ----------------
FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN groupadd --system --gid 10001 gpuwatch \
    && useradd --system --uid 10001 --gid 10001 --home-dir /home/gpuwatch --create-home \
        --shell /usr/sbin/nologin gpuwatch
COPY constraints.txt /tmp/constraints.txt
COPY --from=build /wheels /tmp/wheels
RUN pip install --constraint /tmp/constraints.txt /tmp/wheels/gpuwatch-*.whl \
    && rm -rf /tmp/wheels /tmp/constraints.txt \
    && gpuwatch --version

USER 10001:10001
WORKDIR /home/gpuwatch
EXPOSE 8050
# The dashboard's health; other roles set HEALTHCHECK_URL (the simulators) or turn it off.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ.get('HEALTHCHECK_URL', 'http://127.0.0.1:8050/healthz'), timeout=4)"]
ENTRYPOINT ["gpuwatch"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8050"]
