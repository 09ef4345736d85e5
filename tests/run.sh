#!/usr/bin/env bash
# Installs everything the tests need, then runs them. The README's second command, and what CI runs (as root on a
# fresh Debian machine). Each step is skipped when its result is already there, so repeated runs start at once.
#   system packages: kcat and strace (tests/compat), node, npm and a compiler (kafkajs), python3-venv,
#                    golang-go and Debian's sarama source (the Go client of tests/compat, built at test time),
#                    a Java 17 runtime (PySpark, spark_tests/), chromium, its driver and a font (the web
#                    console's browser tests, tests/console/)
#   node packages:   kafkajs and its codecs, in $COMPATBROKER_NODE_DIR (outside the checkout)
#   python packages: the project with its test extra, in $COMPATBROKER_VENV (outside the checkout)
#   tests/setup/*.sh: one script per further area of the compat matrix (more client families, applications,
#                    containers), sourced in name order (contract below)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${COMPATBROKER_VENV:-$HOME/.cache/compatbroker/venv}"
export COMPATBROKER_NODE_DIR="${COMPATBROKER_NODE_DIR:-$HOME/.cache/compatbroker/node}"
NODE_PACKAGES=(kafkajs@2.2.4 kafkajs-snappy@1.1.0 kafkajs-lz4@1.2.1 @bokuweb/zstd-wasm@0.0.27)

# --- system packages (Debian names) ---
apt_install() {
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "run.sh: installing $* with apt-get" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
missing=()
command -v python3 >/dev/null || missing+=(python3 python3-venv)
command -v kcat >/dev/null || missing+=(kcat)
command -v strace >/dev/null || missing+=(strace)
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)  # PySpark (spark_tests/) runs on a JVM
command -v go >/dev/null || missing+=(golang-go)
[ -d /usr/share/gocode/src/github.com/Shopify/sarama ] || missing+=(golang-github-shopify-sarama-dev)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
command -v chromium >/dev/null || missing+=(chromium fonts-dejavu-core)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
# kafkajs-lz4's lz4 module compiles a native addon when installed (node-gyp: make, g++)
{ command -v make >/dev/null && command -v g++ >/dev/null; } || missing+=(build-essential)
# Each tests/setup/*.sh, sourced here, only checks: it appends the Debian packages it lacks to `missing`, and the
# names of its functions that must run once those are installed (node or pip packages, builds) to `after_apt`.
# Those functions skip what is already done, so that a second run starts at once, and print what they install.
after_apt=()
for setup in tests/setup/*.sh; do
    [ -e "$setup" ] || continue
    # shellcheck source=/dev/null
    source "$setup"
done
[ "${#missing[@]}" -eq 0 ] || apt_install "${missing[@]}"

# --- node packages: skipped when every package is already installed at its pinned version ---
node_ready() {
    local spec name version
    for spec in "${NODE_PACKAGES[@]}"; do
        name="${spec%@*}" version="${spec##*@}"
        grep -q "\"version\": \"$version\"" "$COMPATBROKER_NODE_DIR/node_modules/$name/package.json" 2>/dev/null \
            || return 1
    done
}
if ! node_ready; then
    mkdir -p "$COMPATBROKER_NODE_DIR"
    npm install --silent --no-audit --no-fund --prefix "$COMPATBROKER_NODE_DIR" "${NODE_PACKAGES[@]}"
fi

# --- python packages ---
if [ ! -x "$VENV/bin/python" ]; then
    # Debian's python3 creates virtual environments only with python3-venv installed.
    python3 -m venv "$VENV" 2>/dev/null || { rm -rf "$VENV"; apt_install python3-venv; python3 -m venv "$VENV"; }
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]'
for step in "${after_apt[@]}"; do
    started=$SECONDS
    "$step"
    echo "run.sh: $step: $((SECONDS - started)) s" >&2
done
# Two workers (pytest-xdist), each test file on one of them: most of the time a compat test waits for a client or a
# broker, not for a core. COMPATBROKER_TEST_WORKERS=0 runs everything in one process.
exec "$VENV/bin/python" -m pytest -n "${COMPATBROKER_TEST_WORKERS:-2}" --dist loadfile "$@"
