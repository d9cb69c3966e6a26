#!/usr/bin/env bash
# Builds Corral's default sandbox image offline from Debian packages: debootstrap (minbase) +
# the runner, then `docker import`. Called by scripts/build-sandbox-image.sh (npm run sandbox:image).
#
# The tag is a hash of this recipe and the runner (cat build-image.sh runner.js | sha256sum,
# first 12 hex digits; src/main/hands/docker/image.ts computes the same), so a change to
# either builds a new image, and an unchanged recipe exits at once.
# The debootstrap root filesystem is cached as a tarball in $CORRAL_CACHE_DIR
# (default /var/cache/corral), keyed by suite + package list, so a runner change rebuilds in seconds.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=${CORRAL_SANDBOX_IMAGE_REPO:-corral-sandbox}
SUITE=bookworm
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES=bash,coreutils,findutils,grep,sed,tar,gzip,git,python3,nodejs,ripgrep,ca-certificates,procps,less,diffutils
# Installed with apt inside the new root (debootstrap's own resolver cannot configure npm's
# dependency tree): the package managers an environment's `packages` use.
EXTRA_PACKAGES="npm python3-pip xz-utils"
CACHE=${CORRAL_CACHE_DIR:-/var/cache/corral}

TAG=$(cat "$HERE/build-image.sh" "$HERE/runner.js" | sha256sum | cut -c1-12)
IMAGE="$REPO:$TAG"
step() { printf '[sandbox:image %3ss] %s\n' "$SECONDS" "$*"; }

if ! docker version >/dev/null 2>&1; then
  echo "sandbox:image: no Docker engine answers (run scripts/start-dockerd.sh)" >&2
  exit 1
fi
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  step "$IMAGE is already built"
  exit 0
fi

for tool in debootstrap tar; do
  command -v "$tool" >/dev/null || { echo "sandbox:image: $tool is not installed (apt-get install -y $tool)" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "sandbox:image: debootstrap needs root" >&2; exit 1; }

mkdir -p "$CACHE"
ROOTFS_KEY=$(printf '%s %s %s %s' "$SUITE" "$PACKAGES" "$EXTRA_PACKAGES" v1 | sha256sum | cut -c1-12)
ROOTFS_TAR="$CACHE/rootfs-$SUITE-$ROOTFS_KEY.tar"
WORK=$(mktemp -d /tmp/corral-image.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
ROOT="$WORK/rootfs"

if [ -s "$ROOTFS_TAR" ]; then
  step "using cached root filesystem $ROOTFS_TAR"
  mkdir -p "$ROOT"
  tar --numeric-owner -xpf "$ROOTFS_TAR" -C "$ROOT"
else
  step "debootstrap $SUITE (minbase + $PACKAGES) from $MIRROR; this takes 40-120 s"
  # debootstrap prints one line per package step: show them as progress.
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOT" "$MIRROR" 2>&1 \
    | while IFS= read -r line; do case "$line" in I:\ Retriev*|I:\ Valid*) ;; *) step "debootstrap: $line";; esac; done
  [ -x "$ROOT/usr/bin/node" ] || { echo "sandbox:image: debootstrap did not install node" >&2; exit 1; }
  step "apt-get install $EXTRA_PACKAGES in the new root"
  cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
  cp "$ROOT/etc/hosts" "$WORK/hosts.image" 2>/dev/null || : > "$WORK/hosts.image"
  cp /etc/hosts "$ROOT/etc/hosts"
  mount -t proc proc "$ROOT/proc"
  trap 'umount "$ROOT/proc" 2>/dev/null || true; rm -rf "$WORK"' EXIT
  printf 'deb %s %s main\n' "$MIRROR" "$SUITE" > "$ROOT/etc/apt/sources.list"
  chroot "$ROOT" apt-get -q -o APT::Sandbox::User=root update 2>&1 | while IFS= read -r line; do step "apt: $line"; done
  DEBIAN_FRONTEND=noninteractive chroot "$ROOT" apt-get -q -y -o APT::Sandbox::User=root --no-install-recommends install $EXTRA_PACKAGES 2>&1 \
    | while IFS= read -r line; do case "$line" in Get:*|Selecting*|Preparing*|Unpacking*) ;; *) step "apt: $line";; esac; done
  umount "$ROOT/proc"
  # /proc is unmounted: the EXIT trap must not try again (a failing umount in the trap, under
  # set -e, made a successful build exit 32 on every machine without a cached root filesystem).
  trap 'rm -rf "$WORK"' EXIT
  cp "$WORK/hosts.image" "$ROOT/etc/hosts"
  rm -f "$ROOT/etc/resolv.conf"
  [ -x "$ROOT/usr/bin/npm" ] && chroot "$ROOT" python3 -m pip --version >/dev/null || { echo "sandbox:image: npm or pip did not install" >&2; exit 1; }
  step "trimming docs, man pages, locales and apt lists"
  rm -rf "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* \
         "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/*
  find "$ROOT/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'C.*' -exec rm -rf {} + 2>/dev/null || true
  step "caching the root filesystem in $ROOTFS_TAR"
  tar --numeric-owner -C "$ROOT" -cf "$ROOTFS_TAR.tmp" . && mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
fi

step "adding the sandbox user (uid 1000) and the runner"
grep -q '^corral:' "$ROOT/etc/passwd" || echo 'corral:x:1000:1000:Corral sandbox:/home/corral:/bin/bash' >> "$ROOT/etc/passwd"
grep -q '^corral:' "$ROOT/etc/group" || echo 'corral:x:1000:' >> "$ROOT/etc/group"
grep -q '^corral:' "$ROOT/etc/shadow" 2>/dev/null || echo 'corral:!:19000::::::' >> "$ROOT/etc/shadow"
mkdir -p "$ROOT/workspace" "$ROOT/home/corral" "$ROOT/mnt/session" "$ROOT/opt/corral"
chown 1000:1000 "$ROOT/workspace" "$ROOT/home/corral" "$ROOT/mnt/session"
chmod 0755 "$ROOT/workspace" "$ROOT/home/corral"
install -m 0755 "$HERE/runner.js" "$ROOT/opt/corral/runner.js"
# No setuid binaries: nothing in the sandbox can regain privileges.
find "$ROOT" -xdev -perm /6000 -type f -exec chmod ug-s {} + 2>/dev/null || true

step "docker import -> $IMAGE"
tar --numeric-owner -C "$ROOT" -c . | docker import \
  --change 'USER 1000:1000' \
  --change 'WORKDIR /workspace' \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/corral LANG=C.UTF-8' \
  --change "LABEL corral.recipe=$TAG" \
  --change 'CMD ["node","/opt/corral/runner.js"]' \
  - "$IMAGE" >/dev/null
docker tag "$IMAGE" "$REPO:latest"
# Earlier builds of the recipe are no longer used by new sandboxes of this checkout; keep the three
# newest (another checkout or worktree of a different runner may still be using one; `docker image
# ls` lists newest first) and drop the older ones no container uses.
for old in $(docker image ls "$REPO" --format '{{.Tag}}' | grep -v -x -e "$TAG" -e latest | tail -n +4); do
  docker image rm "$REPO:$old" >/dev/null 2>&1 && step "removed the previous image $REPO:$old" || true
done
step "built $IMAGE ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
