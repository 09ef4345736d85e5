# compatbroker in a container: a Kafka wire-protocol broker, no JVM.
#   docker build -t compatbroker .
#   docker run --rm -p 9092:9092 compatbroker                       # clients use localhost:9092
#   docker run --rm -p 19092:9092 compatbroker serve --listen 0.0.0.0:9092 --advertised-listener localhost:19092
# The advertised listener must be the address clients reach, i.e. the host side of the port mapping.
#
# BASE_IMAGE is any Debian-like image with Python 3.11+ and its venv module. CI has no registry to pull from, so
# tests/setup/containers.sh makes one with debootstrap and builds with
#   docker build --network host --build-arg BASE_IMAGE=compatbroker-base:bookworm-python3 .
# (--network host: its daemon gives containers no outbound network, and the RUN steps fetch wheels from PyPI).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

# A virtual environment: Debian's own python3 refuses `pip install` into the system (PEP 668).
ENV VIRTUAL_ENV=/opt/venv PATH=/opt/venv/bin:$PATH
RUN python3 -m venv /opt/venv && useradd --create-home broker && mkdir -p /data && chown broker /data
WORKDIR /opt/compatbroker

# The dependencies first, in a layer of their own: it is rebuilt only when pyproject.toml changes, not on every
# change to the code, and it brings the build backend so that the install below needs no network.
COPY pyproject.toml ./
RUN python3 -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb")); \
print("\n".join(p["project"]["dependencies"] + p["build-system"]["requires"]))' > /tmp/requirements.txt \
    && pip install --no-cache-dir --disable-pip-version-check -r /tmp/requirements.txt && rm /tmp/requirements.txt

COPY README.md ./
COPY compatbroker ./compatbroker
COPY schemas ./schemas
RUN pip install --no-cache-dir --disable-pip-version-check --no-deps --no-build-isolation . \
    && rm -rf build compatbroker.egg-info
USER broker
VOLUME /data
EXPOSE 9092

ENTRYPOINT ["compatbroker"]
CMD ["serve", "--listen", "0.0.0.0:9092", "--advertised-listener", "localhost:9092", "--data-dir", "/data"]
