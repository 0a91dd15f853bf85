#!/usr/bin/env bash
# Builds the Redis image of the chaos suite's container backend offline, from
# the host's redis-server: no registry is needed. The binary (named
# redis-server, which is how it knows to run as a server) and every library
# ldd lists go into an otherwise empty root filesystem, which `docker import`
# turns into an image.
#
# Idempotent: the image is labelled with the binary's checksum and rebuilt
# only when the host's redis-server changed (or with --force).
#
#   integration/scripts/build-redis-image.sh [--force]
#
# REDLOCK_REDIS_IMAGE overrides the image name (default redlock-redis:local);
# REDIS_SERVER the binary (default: redis-server on PATH).
set -euo pipefail

image=${REDLOCK_REDIS_IMAGE:-redlock-redis:local}
force=no
if [ "${1:-}" = "--force" ]; then
  force=yes
fi

bin=${REDIS_SERVER:-$(command -v redis-server || true)}
if [ -z "$bin" ]; then
  echo "build-redis-image: redis-server not found; install it (apt-get install -y redis-server)" >&2
  exit 1
fi
# Debian's redis-server is a link to redis-check-rdb, one binary that acts
# by the name it is run under: name the link in messages, copy the file.
given=$bin
bin=$(readlink -f "$bin")
sum=$(sha256sum "$bin" | cut -d' ' -f1)

if [ "$force" = no ]; then
  have=$(docker image inspect --format '{{ index .Config.Labels "redlock.redis.sha256" }}' "$image" 2>/dev/null || true)
  if [ "$have" = "$sum" ]; then
    echo "build-redis-image: $image is up to date"
    exit 0
  fi
fi

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/local/bin" "$root/data" "$root/tmp"
chmod 1777 "$root/tmp"
cp "$bin" "$root/usr/local/bin/redis-server"

# ldd prints "name => /path (addr)" for most libraries and "/path (addr)" for
# the dynamic loader; the vDSO has no path and is skipped.
ldd "$bin" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i }' | sort -u |
  while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done

tar -C "$root" -c . | docker import \
  --change 'ENTRYPOINT ["/usr/local/bin/redis-server"]' \
  --change 'WORKDIR /data' \
  --change 'EXPOSE 6379' \
  --change "LABEL redlock.redis.sha256=$sum" \
  - "$image" >/dev/null
if [ "$given" = "$bin" ]; then
  echo "build-redis-image: built $image from $bin"
else
  echo "build-redis-image: built $image from $given (the binary $bin)"
fi
