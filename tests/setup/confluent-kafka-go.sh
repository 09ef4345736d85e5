# Sourced by tests/run.sh (contract: tests/setup/ in /work/notes/matrix-design.md). The Go client confluent-kafka-go
# of the compat matrix (tests/compat/clients/confluent_kafka_go_client.py).
#   system packages: golang-github-confluentinc-confluent-kafka-go-dev (0.11.6, source under /usr/share/gocode) and
#                    librdkafka-dev (2.0.2, which the cgo binding links through pkg-config; both pull pkg-config)
#                    and gcc for cgo; golang-go comes from run.sh itself
#   after apt:       confluent_kafka_go_build: builds the test program into $COMPATBROKER_CKGO_DIR (default
#                    ~/.cache/compatbroker/confluent-kafka-go/<hash of its source>), as the first test would;
#                    about 20 s on a fresh machine, nothing when that build is there

[ -d /usr/share/gocode/src/github.com/confluentinc/confluent-kafka-go/kafka ] \
    || missing+=(golang-github-confluentinc-confluent-kafka-go-dev)
[ -f /usr/include/librdkafka/rdkafka.h ] || missing+=(librdkafka-dev)
command -v gcc >/dev/null || missing+=(gcc)

confluent_kafka_go_build() {
    local python="${COMPATBROKER_VENV:-$HOME/.cache/compatbroker/venv}/bin/python"
    "$python" -c 'from tests.compat.clients.confluent_kafka_go_client import load
print("confluent-kafka-go: built", load().program)' >&2
}
after_apt+=(confluent_kafka_go_build)
