#!/usr/bin/env bash
# Base images built from Debian's packages, for machines that cannot pull from Docker Hub
# (CI): a Debian bookworm root file system with Python 3.11 (debootstrap → docker import)
# for ops/docker/Dockerfile's PYTHON_IMAGE, and an Apache Kafka image on it (Debian's JRE
# and the broker jars ops/kafka/kafka.sh fetches, plus kafka-tools for kafka-topics.sh).
# Tagged by a hash of their inputs: a rerun with an image present builds nothing.
#
#   ops/docker/offline/build-bases.sh     prints PYTHON_IMAGE=... and KAFKA_IMAGE=...
#
# Needs root (debootstrap), docker, Maven and Java (as ops/kafka/kafka.sh does).
# DEBIAN_MIRROR (the first deb.debian.org-like URI of /etc/apt/sources*), DOCKER.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../../.." && pwd)"
DOCKER="${DOCKER:-docker}"
# the classic builder: Debian's docker.io has no buildx plugin
export DOCKER_BUILDKIT="${DOCKER_BUILDKIT:-0}"
SUITE=bookworm
KAFKA_VERSION="$(sed -n 's/^KAFKA_VERSION="\${KAFKA_VERSION:-\([0-9.]*\)}"/\1/p' "$REPO/ops/kafka/kafka.sh")"
log() { echo "build-bases: $*" >&2; }

mirror() {
    [[ -n "${DEBIAN_MIRROR:-}" ]] && { echo "$DEBIAN_MIRROR"; return; }
    local uri
    uri="$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
        | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -1 | tr -d ' ' || true)"
    echo "${uri:-http://deb.debian.org/debian}"
}

hash() { cat "$@" | sha256sum | cut -c1-12; }
present() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }

python_tag="loopwatch-offline/python:3.11-$SUITE-$(echo "$SUITE minbase python3 python3-venv ca-certificates" | hash)"
if present "$python_tag"; then
    log "$python_tag present"
else
    log "debootstrap $SUITE from $(mirror) (a few minutes, once)"
    rootfs="$(mktemp -d /tmp/loopwatch-rootfs.XXXXXX)"
    trap 'rm -rf "$rootfs"' EXIT
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        "$SUITE" "$rootfs" "$(mirror)" >"$rootfs.log" 2>&1 \
        || { tail -n 30 "$rootfs.log" >&2; exit 1; }
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | "$DOCKER" import --change 'CMD ["python3"]' - "$python_tag" >/dev/null
    rm -rf "$rootfs" "$rootfs.log"
    trap - EXIT
    log "$python_tag imported"
fi

kafka_tag="loopwatch-offline/kafka:$KAFKA_VERSION-$(echo "$python_tag" | cat - "$HERE"/kafka* | hash)"
if present "$kafka_tag"; then
    log "$kafka_tag present"
else
    "$REPO/ops/kafka/kafka.sh" fetch >&2
    libs="${LOOPWATCH_KAFKA_CACHE:-$REPO/.cache/kafka}/kafka_2.13-$KAFKA_VERSION/libs"
    context="$(mktemp -d /tmp/loopwatch-kafka-image.XXXXXX)"
    trap 'rm -rf "$context"' EXIT
    cp -r "$libs" "$context/libs"
    # kafka-topics.sh (the compose healthcheck) needs the tools jar, not in the broker's set
    (cd "$context" && mvn -q dependency:copy "-Dartifact=org.apache.kafka:kafka-tools:$KAFKA_VERSION" \
        -DoutputDirectory="$context/libs" >&2)
    cp "$HERE"/kafka-entrypoint.sh "$HERE"/kafka-topics.sh "$context/"
    "$DOCKER" build -q -f "$HERE/kafka.Dockerfile" --build-arg "BASE_IMAGE=$python_tag" \
        -t "$kafka_tag" "$context" >&2
    log "$kafka_tag built"
fi
echo "PYTHON_IMAGE=$python_tag"
echo "KAFKA_IMAGE=$kafka_tag"
