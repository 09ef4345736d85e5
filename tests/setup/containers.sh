# Sourced by tests/run.sh (contract: tests/setup/ in /work/notes/matrix-design.md). A Docker engine and a base image
# for tests/test_testcontainers.py, which builds the repository's Dockerfile and runs compatbroker in a container.
#   system packages: docker.io (dockerd, containerd, runc; its client works as well as any newer one on the PATH)
#                    and debootstrap, unless an engine already answers or the base is already made
#   after apt:       containers_start_engine: starts dockerd when no engine answers, in the background, log and
#                    pid file in $COMPATBROKER_DOCKER_DIR (default ~/.cache/compatbroker/docker); it keeps
#                    running for later runs. Options: no iptables rules and no IP forwarding, so the host's
#                    firewall is left alone and containers reach nothing beyond the host; published ports
#                    (-p 127.0.0.1:PORT:9092) go through docker-proxy.
#                    containers_base_image: no registry can be pulled from here, so the Dockerfile's BASE_IMAGE is
#                    a minimal Debian bookworm (python3 3.11, python3-venv, ca-certificates) made with debootstrap,
#                    kept as a tarball in that directory and imported with `docker import` as
#                    $COMPATBROKER_BASE_IMAGE. It trusts the CA certificates this machine adds to Debian's
#                    (/usr/local/share/ca-certificates), so that pip inside `docker build` reaches PyPI as the
#                    host does.
#                    COMPATBROKER_DEBIAN_MIRROR replaces http://deb.debian.org/debian.
# Exports COMPATBROKER_BASE_IMAGE and COMPATBROKER_REQUIRE_DOCKER=1 (under run.sh a missing engine fails the
# container tests instead of skipping them). Each step prints its time. On a fresh machine: apt ~25 s, dockerd 1 s,
# debootstrap ~110 s, tar and import ~4 s; the test's first image build then takes ~30 s (wheels from PyPI). A
# second run: well under a second here, and the build reuses its cached layers (a few seconds after a code change).

export COMPATBROKER_BASE_IMAGE="${COMPATBROKER_BASE_IMAGE:-compatbroker-base:bookworm-python3}"
export COMPATBROKER_REQUIRE_DOCKER=1

containers_dir() {
    echo "${COMPATBROKER_DOCKER_DIR:-$HOME/.cache/compatbroker/docker}"
}

containers_base_tarball() {
    echo "$(containers_dir)/${COMPATBROKER_BASE_IMAGE//[:\/]/_}.tar"
}

containers_engine_answers() {
    timeout 20 docker info >/dev/null 2>&1
}

containers_sudo() {
    [ "$(id -u)" -eq 0 ] || echo sudo
}

# label, then a command: runs it and prints how long it took
containers_timed() {
    local label="$1" started=$SECONDS
    shift
    "$@"
    echo "containers: $label: $((SECONDS - started)) s" >&2
}

{ command -v dockerd >/dev/null && command -v docker >/dev/null; } || containers_engine_answers || missing+=(docker.io)
[ -s "$(containers_base_tarball)" ] || command -v debootstrap >/dev/null || missing+=(debootstrap)

containers_start_engine() {
    containers_engine_answers && return 0
    local dir sudo pid deadline
    dir="$(containers_dir)" sudo="$(containers_sudo)"
    mkdir -p "$dir"
    pid="$(cat "$dir/dockerd.pid" 2>/dev/null || true)"
    if [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = dockerd ]; then
        echo "containers: waiting for the dockerd already starting (pid $pid)" >&2
    else
        $sudo rm -f "$dir/dockerd.pid"  # left by a dockerd that is gone: dockerd refuses to start beside it
        echo "containers: starting dockerd, log in $dir/dockerd.log" >&2
        # its own session, and no hold on run.sh's stdin/stdout: it outlives the run without keeping CI waiting
        $sudo setsid dockerd --iptables=false --ip-forward=false --pidfile "$dir/dockerd.pid" \
            ${sudo:+--group "$(id -gn)"} </dev/null >"$dir/dockerd.log" 2>&1 &
        pid=$!
    fi
    deadline=$((SECONDS + 120))
    until containers_engine_answers; do
        if [ ! -d "/proc/$pid" ] || [ "$SECONDS" -ge "$deadline" ]; then
            echo "containers: dockerd did not answer; the end of $dir/dockerd.log:" >&2
            tail -n 20 "$dir/dockerd.log" >&2
            return 1
        fi
        sleep 0.5
    done
}

containers_base_image() {
    docker image inspect "$COMPATBROKER_BASE_IMAGE" >/dev/null 2>&1 && return 0
    local tarball
    tarball="$(containers_base_tarball)"
    if [ ! -s "$tarball" ]; then
        containers_make_base_tarball "$tarball"
    fi
    containers_timed "docker import $COMPATBROKER_BASE_IMAGE" \
        docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/bash"]' "$tarball" "$COMPATBROKER_BASE_IMAGE" >/dev/null
}

containers_make_base_tarball() {
    local tarball="$1" rootfs sudo log
    rootfs="$(containers_dir)/rootfs" sudo="$(containers_sudo)" log="$(containers_dir)/debootstrap.log"
    mkdir -p "$(containers_dir)"
    $sudo rm -rf "$rootfs"
    echo "containers: debootstrap of Debian bookworm into $rootfs, log in $log" >&2
    containers_timed debootstrap containers_debootstrap "$rootfs" "$log"
    containers_timed "CA certificates and clean-up" containers_finish_rootfs "$rootfs" "$log"
    containers_timed "tar of the base" $sudo tar --numeric-owner -C "$rootfs" -cf "$tarball.partial" .
    mv "$tarball.partial" "$tarball"
    $sudo rm -rf "$rootfs"
}

containers_finish_rootfs() {
    local rootfs="$1" log="$2" sudo
    sudo="$(containers_sudo)"
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        $sudo cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
        $sudo chroot "$rootfs" update-ca-certificates >>"$log" 2>&1
    fi
    # downloaded packages and package lists: not needed in an image, and a third of its size
    $sudo rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/lib/apt/lists/*
}

containers_debootstrap() {
    local rootfs="$1" log="$2"
    $(containers_sudo) debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$rootfs" "${COMPATBROKER_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$log" 2>&1 \
        || { tail -n 20 "$log" >&2; return 1; }
}

after_apt+=(containers_start_engine containers_base_image)
