# Sourced by tests/run.sh (contract: tests/setup/ in /work/notes/matrix-design.md). The librdkafka clients of
# Node.js in the compat matrix: node-rdkafka and @confluentinc/kafka-javascript from npm, each in a prefix of its own
# under $COMPATBROKER_RDKAFKA_JS_DIR (default ~/.cache/compatbroker/node-rdkafka/<row name>); the pins must match
# PACKAGES in tests/compat/clients/rdkafka_js_client.py.
# Both compile the librdkafka their tarball ships (node-gyp: make, g++, python3, which run.sh installs) against
# Debian's OpenSSL, zlib (gzip) and zstd; lz4 is librdkafka's own copy. Each takes a few minutes, once.

command -v pkg-config >/dev/null || missing+=(pkg-config)  # how librdkafka's configure finds the libraries
for node_rdkafka_dev in libssl-dev zlib1g-dev libzstd-dev; do
    dpkg -s "$node_rdkafka_dev" >/dev/null 2>&1 || missing+=("$node_rdkafka_dev")
done
unset node_rdkafka_dev

node_rdkafka_dir() {
    echo "${COMPATBROKER_RDKAFKA_JS_DIR:-$HOME/.cache/compatbroker/node-rdkafka}"
}

# prefix name, package@version, then environment settings for its build. Done when the pinned version is there
# with its compiled addon (npm writes package.json before the build, so a failed build leaves no *.node).
node_rdkafka_package() {
    local prefix="$1" spec="$2"
    shift 2
    local dir name="${spec%@*}" version="${spec##*@}"
    dir="$(node_rdkafka_dir)/$prefix"
    if grep -Eq "\"version\": \"v?$version\"" "$dir/node_modules/$name/package.json" 2>/dev/null \
        && compgen -G "$dir/node_modules/$name/build/Release/*.node" >/dev/null; then
        return 0
    fi
    echo "node-rdkafka: installing $spec into $dir (it compiles librdkafka: minutes)" >&2
    mkdir -p "$dir"
    env "$@" npm install --no-audit --no-fund --loglevel=error --prefix "$dir" "$spec" >/dev/null
}

node_rdkafka_install() {
    node_rdkafka_package node-rdkafka node-rdkafka@3.6.1
    # Its prebuilt binary (GitHub releases) cannot be fetched here, so node-pre-gyp builds from source; and its
    # default static build of librdkafka (util/configure.js: --install-deps --source-deps-only) downloads OpenSSL,
    # zlib, zstd and curl sources, so librdkafka is linked dynamically (CKJS_LINKING=dynamic: the tarball's
    # librdkafka, against Debian's libraries). Its deps/librdkafka.gyp runs `make -j` without a limit (a hundred
    # compilers at once): MAKEFLAGS' load limit, which reaches that make, holds it to about one job per core.
    node_rdkafka_package confluent-kafka-javascript @confluentinc/kafka-javascript@1.10.1 \
        CKJS_LINKING=dynamic npm_config_build_from_source=true MAKEFLAGS="-l$(nproc)"
}
after_apt+=(node_rdkafka_install)
