# compatbroker in a container: a Kafka wire-protocol broker, no JVM.
#   docker build -t compatbroker .
#   docker run --rm -p 9092:9092 compatbroker                       # clients use localhost:9092
#   docker run --rm -p 19092:9092 compatbroker serve --listen 0.0.0.0:9092 --advertised-listener localhost:19092
# The advertised listener must be the address clients reach, i.e. the host side of the port mapping.
FROM python:3.11-slim

WORKDIR /opt/compatbroker
COPY pyproject.toml README.md ./
COPY compatbroker ./compatbroker
COPY schemas ./schemas
RUN pip install --no-cache-dir . && useradd --create-home broker && mkdir -p /data && chown broker /data
USER broker
VOLUME /data
EXPOSE 9092

ENTRYPOINT ["compatbroker"]
CMD ["serve", "--listen", "0.0.0.0:9092", "--advertised-listener", "localhost:9092", "--data-dir", "/data"]
