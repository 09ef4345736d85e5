# Sourced by tests/run.sh (contract: tests/setup/ in /work/notes/matrix-design.md). The older Python clients of the
# compat matrix: kafka-python, aiokafka and confluent-kafka at their oldest still-supported minor lines, each in a
# virtual environment of its own under $COMPATBROKER_OLDER_DIR (default ~/.cache/compatbroker/older/<row name>),
# made from the project venv's interpreter. tests/compat/clients/older_python.py drives them (its OLDER table
# must match the pins below).
# No Debian package is needed: python3-venv is run.sh's own.

older_python_dir() {
    echo "${COMPATBROKER_OLDER_DIR:-$HOME/.cache/compatbroker/older}"
}

# row name, then pip requirements; the first requirement is the pinned client
older_python_venv() {
    local name="$1" dir
    shift
    dir="$(older_python_dir)/$name"
    local wanted="${1#*==}" project="${1%%[[=]*}"
    # Done when the venv holds the pinned version (its dist-info directory); otherwise the venv is made afresh.
    local installed="$dir/lib/python3*/site-packages/${project//-/_}-$wanted.dist-info"
    if [ -x "$dir/bin/python" ] && compgen -G "$installed" >/dev/null; then
        return 0
    fi
    echo "older-python: installing $* into $dir" >&2
    "${COMPATBROKER_VENV:-$HOME/.cache/compatbroker/venv}/bin/python" -m venv --clear "$dir"
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: "$@"
}

older_python_install() {
    older_python_venv kafka-python-2.2 "kafka-python[snappy,lz4,zstd,crc32c]==2.2.21"
    older_python_venv aiokafka-0.10 "aiokafka[snappy,lz4,zstd]==0.10.0"
    older_python_venv confluent-kafka-2.4 "confluent-kafka==2.4.0"
}

after_apt+=(older_python_install)
