# syntax=docker/dockerfile:1
# One image for every Hearth Python service (command API, device actor, device gateway and broker access,
# read models and their `init`). It carries the services, their shared code and the operator's `hearth`
# (cli/: tokens, rebuild, verify, campaigns, quarantine ...) only: `uv sync --no-dev` installs the root's
# dependencies (tests/unit/test_image_dependencies.py checks uv.lock); the local stack, simulator and
# benchmarks (devstack/, simulator/, benchmarks/: their metadata only, for the workspace) stay out, as do
# Spark and pandas.
# The Spark job has its own image: analytics/Dockerfile.

FROM python:3.11-slim AS build
RUN pip install --no-cache-dir uv==0.13.8
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/hearth/venv
WORKDIR /src
COPY pyproject.toml uv.lock README.md ./
COPY shared/ shared/
COPY services/ services/
COPY sdk/pyproject.toml sdk/
COPY analytics/pyproject.toml analytics/
COPY cli/ cli/
COPY devstack/pyproject.toml devstack/
COPY simulator/pyproject.toml simulator/
COPY benchmarks/pyproject.toml benchmarks/
# --no-editable: the venv holds every workspace package itself, so the sources stay in this stage.
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-editable

FROM python:3.11-slim
RUN useradd --system --uid 10001 --user-group --create-home --home-dir /home/hearth hearth \
    && install -d -o hearth -g hearth /var/lib/hearth
COPY --from=build /opt/hearth/venv /opt/hearth/venv
ENV VIRTUAL_ENV=/opt/hearth/venv \
    PATH=/opt/hearth/venv/bin:$PATH \
    PYTHONUNBUFFERED=1
USER hearth
# Services keep relative data dirs (e.g. the device actor's) here; compose mounts a volume on it.
WORKDIR /var/lib/hearth
EXPOSE 8000 8001
CMD ["python", "-m", "hearth_read_models", "init"]
