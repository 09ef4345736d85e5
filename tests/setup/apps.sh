# Sourced by tests/run.sh (contract: tests/setup/ in /work/notes/matrix-design.md). The applications of the compat
# matrix (tests/compat/apps/, test_faust.py, test_log_shippers.py):
#   system packages: rsyslog and rsyslog-kafka (omkafka and imkafka; the tests run rsyslogd themselves), and the
#                    libraries syslog-ng 3.38 and its kafka module load (syslog-ng's own packages cannot be
#                    installed beside rsyslog: both provide system-log-daemon)
#   after apt:       apps_rsyslog_no_service: under systemd, stops and disables the rsyslog service that installing
#                    the package started (only when this run installed it)
#                    apps_syslog_ng_unpack: `apt-get download` of syslog-ng-core and syslog-ng-mod-rdkafka, unpacked
#                    with dpkg-deb into $COMPATBROKER_SYSLOG_NG_DIR (default ~/.cache/compatbroker/syslog-ng); a few
#                    seconds on a fresh machine
#                    apps_faust_venv: faust-streaming (and the aiokafka it pins) in a virtual environment of its own,
#                    $COMPATBROKER_FAUST_VENV (default ~/.cache/compatbroker/faust), away from the project's
#                    aiokafka; 15 to 60 s on a fresh machine (pip), depending on its load
# Each does nothing when its work is already done.

APPS_FAUST_VERSION=0.15.3  # keep in step with tests/compat/apps/faust_worker.py
APPS_SYSLOG_NG_DIR="${COMPATBROKER_SYSLOG_NG_DIR:-$HOME/.cache/compatbroker/syslog-ng}"
APPS_FAUST_VENV="${COMPATBROKER_FAUST_VENV:-$HOME/.cache/compatbroker/faust}"

apps_installed() {
    [ "$(dpkg-query -W -f '${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

APPS_INSTALLS_RSYSLOG=0
{ command -v rsyslogd >/dev/null || [ -x /usr/sbin/rsyslogd ]; } || { missing+=(rsyslog); APPS_INSTALLS_RSYSLOG=1; }
compgen -G "/usr/lib/*/rsyslog/omkafka.so" >/dev/null || missing+=(rsyslog-kafka)
# what syslog-ng-core 3.38 and syslog-ng-mod-rdkafka depend on (Debian 12), besides libc
for apps_library in libcap2 libglib2.0-0 libivykis0 libjson-c5 libnet1 libpcre3 libssl3 libsystemd0 libwrap0 \
        librdkafka1; do
    apps_installed "$apps_library" || missing+=("$apps_library")
done
unset apps_library

apps_syslog_ng_unpack() {
    if [ -x "$APPS_SYSLOG_NG_DIR/usr/sbin/syslog-ng" ] \
            && compgen -G "$APPS_SYSLOG_NG_DIR/usr/lib/syslog-ng/*/libkafka.so" >/dev/null; then
        return 0
    fi
    local work packages=(syslog-ng-core syslog-ng-mod-rdkafka)
    work="$(mktemp -d)"
    echo "apps.sh: unpacking ${packages[*]} into $APPS_SYSLOG_NG_DIR" >&2
    # apt-get download needs package lists: run.sh updates them only when it installs something
    ( cd "$work" && { apt-get download -qq -o APT::Sandbox::User=root "${packages[@]}" 2>/dev/null \
        || { apt-get update -qq && apt-get download -qq -o APT::Sandbox::User=root "${packages[@]}"; }; } )
    mkdir -p "$APPS_SYSLOG_NG_DIR"
    local deb
    for deb in "$work"/*.deb; do
        dpkg-deb -x "$deb" "$APPS_SYSLOG_NG_DIR"
    done
    rm -rf "$work"
}
after_apt+=(apps_syslog_ng_unpack)

# The tests run rsyslogd themselves; the system service that installing the package starts under systemd (taking
# over /dev/log) is stopped and disabled again, unless rsyslog was there before this run.
apps_rsyslog_no_service() {
    if [ "$APPS_INSTALLS_RSYSLOG" = 1 ] && [ -d /run/systemd/system ]; then
        echo "apps.sh: disabling the rsyslog service that installing rsyslog started" >&2
        systemctl disable --now rsyslog.service >/dev/null 2>&1 || true
    fi
}
after_apt+=(apps_rsyslog_no_service)

apps_faust_venv() {
    if compgen -G "$APPS_FAUST_VENV/lib/python*/site-packages/faust_streaming-$APPS_FAUST_VERSION.dist-info" \
            >/dev/null; then
        return 0
    fi
    echo "apps.sh: installing faust-streaming $APPS_FAUST_VERSION into $APPS_FAUST_VENV" >&2
    [ -x "$APPS_FAUST_VENV/bin/python" ] || python3 -m venv "$APPS_FAUST_VENV"
    "$APPS_FAUST_VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        "faust-streaming==$APPS_FAUST_VERSION"
}
after_apt+=(apps_faust_venv)
