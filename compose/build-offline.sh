#!/usr/bin/env bash
# Build the rmqkafka images without any image registry (air-gapped hosts, CI without Docker Hub).
#
#   sudo compose/build-offline.sh            # base image (if missing) + wheels + rmqkafka:latest
#   sudo compose/build-offline.sh --spark    # ... and rmqkafka-spark:latest (compose's Spark services)
#   sudo compose/build-offline.sh --wheels-only   # only download the wheels (no Docker, no root)
#
# What it does, in order:
#  1. wheels on the host, into compose/wheels/ (git- and docker-ignored): `pip wheel` of this
#     project (compose/wheels/project) and its runtime dependencies (compose/wheels/broker), and
#     with --spark of the spark extra too (compose/wheels/spark). $PYTHON must be a CPython 3.11 on Linux x86_64, the
#     interpreter of the image (bookworm's python3), because binary wheels are picked for it.
#     Air-gapped: run --wheels-only on a networked machine, copy compose/wheels/ over, then
#     run with --no-download.
#  2. base image rmqkafka-base:bookworm, unless it exists (or --rebuild-base): debootstrap
#     --variant=minbase bookworm with python3 + python3-venv into a temporary directory, then
#     `tar -C DIR -c . | docker import - rmqkafka-base:bookworm`. Needs root and a Debian
#     mirror ($MIRROR, default http://deb.debian.org/debian; a local mirror works the same).
#     (Or `docker load` a base image saved elsewhere with `docker save`.)
#  3. docker build (classic builder: DOCKER_BUILDKIT=0, no frontend image to fetch) of
#     compose/Dockerfile with build context compose/: target broker -> $IMAGE (default
#     rmqkafka:latest), installed with `pip install --no-index --find-links`; with --spark,
#     target spark -> $SPARK_IMAGE (default rmqkafka-spark:latest), which also apt-get installs
#     Java 17 from the base image's mirror (builds run with --network host, so a mirror the
#     host reaches is reachable). The image a tag named before is removed when unused.
#
# Environment: PYTHON (python3), SOURCE (the project directory; default this repository),
# MIRROR, SUITE (bookworm), BASE_IMAGE (rmqkafka-base:bookworm), IMAGE (rmqkafka:latest),
# SPARK_IMAGE (rmqkafka-spark:latest).
# Measured on a 2-core machine (pip cache warm): wheels 5 s, base image 42 s, broker image
# 12 s, spark image 30 s; 1 min 29 s from nothing with --spark; about 10 s when nothing changed
# (the project's wheel is reproducible, SOURCE_DATE_EPOCH, so docker build reuses its cache).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
SOURCE=${SOURCE:-$root}  # the project directory whose wheel goes into the image
PYTHON=${PYTHON:-python3}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SUITE=${SUITE:-bookworm}
BASE_IMAGE=${BASE_IMAGE:-rmqkafka-base:bookworm}
IMAGE=${IMAGE:-rmqkafka:latest}
SPARK_IMAGE=${SPARK_IMAGE:-rmqkafka-spark:latest}
WHEELS=$here/wheels  # inside the build context (compose/)
export DOCKER_BUILDKIT=0

spark=0 rebuild_base=0 download=1 wheels_only=0
for arg in "$@"; do
    case "$arg" in
        --spark) spark=1 ;;
        --rebuild-base) rebuild_base=1 ;;
        --no-download) download=0 ;;
        --wheels-only) wheels_only=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-offline.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
    esac
done

say() { printf '[build-offline %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
elapsed() { echo "$(( $(date +%s) - $1 ))s"; }

build_base() {
    if [ "$rebuild_base" = 0 ] && docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
        say "base image $BASE_IMAGE exists (--rebuild-base to rebuild it)"
        return
    fi
    [ "$(id -u)" = 0 ] || { echo "build-offline.sh: debootstrap needs root" >&2; exit 1; }
    if ! command -v debootstrap >/dev/null 2>&1; then
        say "installing debootstrap"
        apt-get install -y -qq debootstrap >/dev/null
    fi
    local t0 rootfs
    t0=$(date +%s)
    rootfs=$(mktemp -d "${TMPDIR:-/tmp}/rmqkafka-rootfs.XXXXXX")
    # shellcheck disable=SC2064
    trap "rm -rf '$rootfs'" EXIT
    say "debootstrap --variant=minbase $SUITE ($MIRROR) into $rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        "$SUITE" "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 \
        || { tail -n 30 "$rootfs.log" >&2; exit 1; }
    rm -f "$rootfs.log"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
        "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
    say "docker import -> $BASE_IMAGE"
    tar -C "$rootfs" --numeric-owner -c . | docker import \
        --change 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
    rm -rf "$rootfs"
    trap - EXIT
    say "base image $BASE_IMAGE built in $(elapsed "$t0")"
}

download_wheels() {
    local t0
    t0=$(date +%s)
    "$PYTHON" - <<'EOF' || { echo "build-offline.sh: \$PYTHON must be CPython 3.11 on Linux x86_64 (the image's python3); set PYTHON=/path/to/python3.11" >&2; exit 1; }
import platform, sys
ok = sys.version_info[:2] == (3, 11) and sys.platform == "linux" and platform.machine() == "x86_64"
sys.exit(0 if ok else 1)
EOF
    # afresh: the images install every wheel of these folders (pip's cache makes this cheap)
    rm -rf "$WHEELS/broker" "$WHEELS/project"
    mkdir -p "$WHEELS/broker" "$WHEELS/project"
    say "pip wheel . (runtime dependencies) -> $WHEELS/broker"
    # SOURCE_DATE_EPOCH: the same source gives the same wheel, so docker build reuses its cache
    SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-315532800} "$PYTHON" -m pip wheel --quiet --disable-pip-version-check -w "$WHEELS/broker" "$SOURCE"
    mv "$WHEELS"/broker/rmqkafka-*.whl "$WHEELS/project/"  # its own layer (see the Dockerfile)
    if [ "$spark" = 1 ]; then
        rm -rf "$WHEELS/spark"
        mkdir -p "$WHEELS/spark"
        say "pip wheel .[spark] extras -> $WHEELS/spark"
        (cd "$SOURCE" && "$PYTHON" - <<'EOF') >"$WHEELS/spark-requirements.txt"
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["spark"]))
EOF
        "$PYTHON" -m pip wheel --quiet --disable-pip-version-check -w "$WHEELS/spark" \
            --find-links "$WHEELS/broker" -r "$WHEELS/spark-requirements.txt"
        # the spark extra's own wheels only: the runtime dependencies are in the base layer
        for whl in "$WHEELS"/spark/*.whl; do
            if [ -e "$WHEELS/broker/$(basename "$whl")" ]; then rm -f "$whl"; fi
        done
    fi
    say "wheels ready in $(elapsed "$t0") ($(du -sh "$WHEELS" | cut -f1))"
}

build_image() {  # target tag
    local t0 previous current
    t0=$(date +%s)
    previous=$(docker image inspect --format '{{.Id}}' "$2" 2>/dev/null || true)
    say "docker build --target $1 -> $2 (classic builder)"
    docker build --network host --build-arg "BASE_IMAGE=$BASE_IMAGE" -f "$here/Dockerfile" \
        --target "$1" -t "$2" "$here"
    current=$(docker image inspect --format '{{.Id}}' "$2")
    if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
        # the image this tag named before, now untagged: drop it unless something still uses it
        docker image rm "$previous" >/dev/null 2>&1 || true
    fi
    say "image $2 built in $(elapsed "$t0")"
}

if [ "$download" = 1 ]; then
    download_wheels
fi
[ "$wheels_only" = 1 ] && exit 0
[ -n "$(ls "$WHEELS"/project/rmqkafka-*.whl 2>/dev/null)" ] \
    || { echo "build-offline.sh: no rmqkafka wheel in $WHEELS/project" >&2; exit 1; }
docker info >/dev/null 2>&1 || { echo "build-offline.sh: no Docker daemon (docker info failed)" >&2; exit 1; }
build_base
build_image broker "$IMAGE"
if [ "$spark" = 1 ]; then
    build_image spark "$SPARK_IMAGE"
fi
say "done: $IMAGE$([ "$spark" = 1 ] && echo " $SPARK_IMAGE")"
