# Sourced by tests/run.sh (contract: tests/setup/ in /work/notes/matrix-design.md). The Go clients kafka-go and
# sarama (its "sarama" and "sarama-2.1" rows) of the compat matrix: tests/compat/clients/kafka_go_client.py and
# sarama_client.py.
#   system packages: golang-github-segmentio-kafka-go-dev (0.2.1, source under /usr/share/gocode; it pulls
#                    golang-github-pierrec-lz4-dev, golang-snappy-go-dev and golang-golang-x-net-dev); golang-go
#                    and sarama's source come from run.sh itself
#   after apt:       go_clients_build: builds both test programs into ~/.cache/compatbroker/{kafka-go,sarama}/<hash of
#                    their source> (COMPATBROKER_KAFKA_GO_DIR, COMPATBROKER_SARAMA_DIR elsewhere), as their first
#                    tests would; about 20 s for both with an empty Go build cache (sarama's cgo zstd included),
#                    nothing when those builds are there

[ -d /usr/share/gocode/src/github.com/segmentio/kafka-go ] || missing+=(golang-github-segmentio-kafka-go-dev)

go_clients_build() {
    local python="${COMPATBROKER_VENV:-$HOME/.cache/compatbroker/venv}/bin/python"
    "$python" -c 'from tests.compat.clients import kafka_go_client, sarama_client
print("kafka-go:", kafka_go_client.load().program)
print("sarama:", sarama_client.load().program)' >&2
}
after_apt+=(go_clients_build)
