# Sourced by tests/run.sh (contract: tests/setup/ in /work/notes/matrix-design.md). The Node.js client
# @platformatic/kafka of the compat matrix (tests/compat/clients/platformatic_client.py and .js).
#   system packages: none of its own (node and npm come from run.sh itself)
#   after apt:       platformatic_install: npm installs @platformatic/kafka 1.35.0 (the newest release that runs on
#                    Debian's node 20: 2.x wants node >= 22.22) with its own two dependencies pinned beside it
#                    (they declare node >= 22.19 but run on 20.19+; npm prints EBADENGINE warnings for them, which
#                    are expected) into $COMPATBROKER_PLATFORMATIC_DIR (default ~/.cache/compatbroker/platformatic);
#                    about 10 s on a fresh machine, nothing when that version is there. Keep the versions in step
#                    with PACKAGES in platformatic_client.py.

PLATFORMATIC_DIR="${COMPATBROKER_PLATFORMATIC_DIR:-$HOME/.cache/compatbroker/platformatic}"
PLATFORMATIC_PACKAGES=(@platformatic/kafka@1.35.0 @platformatic/dynamic-buffer@0.3.1 @platformatic/wasm-utils@0.2.1)

platformatic_install() {
    local spec name version ready=1
    for spec in "${PLATFORMATIC_PACKAGES[@]}"; do
        name="${spec%@*}" version="${spec##*@}"
        grep -q "\"version\": \"$version\"" "$PLATFORMATIC_DIR/node_modules/$name/package.json" 2>/dev/null || ready=0
    done
    [ "$ready" -eq 1 ] && return 0
    echo "platformatic.sh: installing ${PLATFORMATIC_PACKAGES[*]} into $PLATFORMATIC_DIR" >&2
    mkdir -p "$PLATFORMATIC_DIR"
    npm install --silent --no-audit --no-fund --save-exact --prefix "$PLATFORMATIC_DIR" "${PLATFORMATIC_PACKAGES[@]}" \
        2> >(grep -v EBADENGINE >&2)
}
after_apt+=(platformatic_install)
