#!/usr/bin/env bash
# npm run vm:image — builds the guest of the `vm` sandbox backend offline from Debian packages:
#   - the kernel: the package `linux-image-amd64` points to now (resolved with apt-cache depends),
#     fetched with apt-get download and unpacked with dpkg-deb (never installed on the host); its
#     bzImage's XZ payload is unpacked into the PVH `vmlinux` qemu enters directly (no in-guest
#     decompression: ~4 s less per cold boot under TCG);
#   - a tiny initramfs (uncompressed newc cpio): static busybox, the virtio / ext4 / overlay / 9p
#     modules, and src/main/hands/vm/guest/init;
#   - a read-only ext4 root (mke2fs -d, no journal) from the same cached debootstrap root
#     filesystem the Docker image is built from (npm run sandbox:image makes it), with the
#     runner at /opt/corral/runner.js and the guest's second stage at /opt/corral/vm-init.sh.
# The image lives in $CORRAL_CACHE_DIR/vm/<key> (default /var/cache/corral/vm), <key> being a hash
# of its inputs in the repository (this script, the guest files, the runner: src/main/hands/vm/image.ts
# computes the same). It is rebuilt only when they change, or when the kernel package or the root
# filesystem tarball it was built from moved on. Needs root (device nodes, file ownership in the root).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
GUEST="$REPO/src/main/hands/vm/guest"
RUNNER="$REPO/resources/sandbox/runner.js"
CACHE=${CORRAL_CACHE_DIR:-/var/cache/corral}
step() { printf '[vm:image %3ss] %s\n' "$SECONDS" "$*"; }
die() { echo "vm:image: $*" >&2; exit 1; }

# The inputs, in the order image.ts hashes them (egress-bridge.js only once it exists).
INPUTS=("$REPO/scripts/build-vm-image.sh" "$GUEST/init" "$GUEST/vm-init.sh" "$GUEST/modules" "$RUNNER")
[ -f "$GUEST/egress-bridge.js" ] && INPUTS+=("$GUEST/egress-bridge.js")
KEY=$(cat "${INPUTS[@]}" | sha256sum | cut -c1-12)
OUT="$CACHE/vm/$KEY"

for tool in apt-get apt-cache dpkg-deb python3 mke2fs cpio tar busybox; do
  command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install -y --no-install-recommends qemu-system-x86 qemu-utils busybox-static e2fsprogs cpio)"
done
[ "$(id -u)" = 0 ] || die "building the guest image needs root (device nodes and file ownership in its root filesystem)"

# The root filesystem: the Docker recipe's own cached tarball (its key computed from its own variables).
eval "$(grep -E '^(SUITE|PACKAGES|EXTRA_PACKAGES)=' "$REPO/resources/sandbox/build-image.sh")"
ROOTFS_KEY=$(printf '%s %s %s %s' "$SUITE" "$PACKAGES" "$EXTRA_PACKAGES" v1 | sha256sum | cut -c1-12)
ROOTFS_TAR="$CACHE/rootfs-$SUITE-$ROOTFS_KEY.tar"
[ -s "$ROOTFS_TAR" ] || die "no cached root filesystem at $ROOTFS_TAR: run npm run sandbox:image first (it debootstraps and caches it)"

step "resolving linux-image-amd64"
KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')
[ -n "$KPKG" ] || die "apt-cache does not know linux-image-amd64's kernel package (run apt-get update)"
KVER=${KPKG#linux-image-}
KPKG_VERSION=$(apt-cache policy "$KPKG" | awk '/Candidate:/ { print $2; exit }')
step "kernel package $KPKG $KPKG_VERSION"

if [ -f "$OUT/manifest.json" ] && grep -q "\"kernel_package\": \"$KPKG $KPKG_VERSION\"" "$OUT/manifest.json" && grep -q "\"rootfs\": \"$(basename "$ROOTFS_TAR")\"" "$OUT/manifest.json"; then
  step "the guest image $OUT is already built"
  exit 0
fi

mkdir -p "$CACHE/vm"
WORK=$(mktemp -d "$CACHE/vm/.build-$KEY.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

step "apt-get download $KPKG"
(cd "$WORK" && apt-get download -q "$KPKG" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
DEB=$(ls "$WORK"/linux-image-*.deb 2>/dev/null | head -1)
[ -n "$DEB" ] || die "apt-get download $KPKG fetched nothing"
step "unpacking $(basename "$DEB") ($(du -m "$DEB" | cut -f1) MB)"
dpkg-deb -x "$DEB" "$WORK/kernel"
BZ="$WORK/kernel/boot/vmlinuz-$KVER"
MODS="$WORK/kernel/lib/modules/$KVER"
[ -f "$BZ" ] && [ -d "$MODS" ] || die "$KPKG has no boot/vmlinuz-$KVER or lib/modules/$KVER"

step "extracting the PVH vmlinux from the bzImage's XZ payload"
python3 - "$BZ" "$WORK/out/vmlinux" <<'PY'
import lzma, os, sys
data = open(sys.argv[1], 'rb').read()
at = data.find(b'\xfd7zXZ\x00')
if at < 0:
    sys.exit('vm:image: no XZ payload in the bzImage (this kernel is not XZ-compressed)')
d = lzma.LZMADecompressor(format=lzma.FORMAT_XZ)
elf = d.decompress(data[at:])
if elf[:4] != b'\x7fELF':
    sys.exit('vm:image: the XZ payload is not an ELF kernel')
os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)
open(sys.argv[2], 'wb').write(elf)
PY

step "initramfs: busybox, $(grep -cv '^\s*\(#\|$\)' "$GUEST/modules") modules, /init"
I="$WORK/initrd"
mkdir -p "$I"/{bin,dev,proc,sys,ro,rw,new,lib/modules}
cp "$(command -v busybox)" "$I/bin/busybox"
for applet in $("$I/bin/busybox" --list); do [ -e "$I/bin/$applet" ] || ln -s busybox "$I/bin/$applet"; done
mknod -m 600 "$I/dev/console" c 5 1
mknod -m 666 "$I/dev/null" c 1 3
: > "$I/modules.list"
while read -r mod; do
  case "$mod" in ''|\#*) continue ;; esac
  f=$(find "$MODS/kernel" -name "$mod.ko" -o -name "$mod.ko.xz" | head -1)
  [ -n "$f" ] || die "the kernel $KVER has no module $mod"
  case "$f" in
    *.xz) python3 -c 'import lzma,sys; open(sys.argv[2],"wb").write(lzma.open(sys.argv[1]).read())' "$f" "$I/lib/modules/$mod.ko" ;;
    *) cp "$f" "$I/lib/modules/$mod.ko" ;;
  esac
  echo "$mod" >> "$I/modules.list"
done < "$GUEST/modules"
install -m 0755 "$GUEST/init" "$I/init"
(cd "$I" && find . | cpio -o -H newc --quiet) > "$WORK/out/initrd.cpio"

step "root filesystem from $(basename "$ROOTFS_TAR")"
R="$WORK/rootfs"
mkdir -p "$R"
tar --numeric-owner -xpf "$ROOTFS_TAR" -C "$R"
grep -q '^corral:' "$R/etc/passwd" || echo 'corral:x:1000:1000:Corral sandbox:/home/corral:/bin/bash' >> "$R/etc/passwd"
grep -q '^corral:' "$R/etc/group" || echo 'corral:x:1000:' >> "$R/etc/group"
grep -q '^corral:' "$R/etc/shadow" 2>/dev/null || echo 'corral:!:19000::::::' >> "$R/etc/shadow"
mkdir -p "$R/workspace" "$R/home/corral" "$R/mnt/session" "$R/mnt/skills" "$R/opt/corral/state" "$R/run/corral-egress"
chown 1000:1000 "$R/workspace" "$R/home/corral" "$R/mnt/session" "$R/opt/corral/state"
chmod 0755 "$R/workspace" "$R/home/corral"
echo corral > "$R/etc/hostname"
install -m 0755 "$RUNNER" "$R/opt/corral/runner.js"
install -m 0755 "$GUEST/vm-init.sh" "$R/opt/corral/vm-init.sh"
# vm-init.sh's control loop runs its mount, mkdir and chown from the static busybox: a dynamically
# linked util-linux mount costs hundreds of ms more per restore under TCG (ld.so in emulation).
install -m 0755 "$(command -v busybox)" "$R/opt/corral/busybox"
if [ -f "$GUEST/egress-bridge.js" ]; then install -m 0755 "$GUEST/egress-bridge.js" "$R/opt/corral/egress-bridge.js"; fi
# No setuid binaries: nothing in the guest can regain root.
find "$R" -xdev -perm /6000 -type f -exec chmod ug-s {} + 2>/dev/null || true
SIZE_MB=$(( $(du -sm "$R" | cut -f1) * 5 / 4 + 64 ))
step "mke2fs -t ext4 -O ^has_journal -d ($SIZE_MB MB)"
mke2fs -q -t ext4 -O ^has_journal -L corral-root -d "$R" "$WORK/out/rootfs.ext4" "${SIZE_MB}M"
rm -rf "$R"

cat > "$WORK/out/manifest.json" <<JSON
{
  "key": "$KEY",
  "kernel": "$KVER",
  "kernel_package": "$KPKG $KPKG_VERSION",
  "rootfs": "$(basename "$ROOTFS_TAR")",
  "busybox": "$(busybox | head -1 | awk '{print $2}')",
  "built_at": "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}
JSON
chmod 0444 "$WORK/out"/*
rm -rf "$OUT"
mv "$WORK/out" "$OUT"
chmod 0755 "$OUT"
# Earlier builds: keep the three newest (another checkout may use one), drop the rest.
for old in $(ls -1dt "$CACHE"/vm/*/ 2>/dev/null | grep -v "/$KEY/\$" | tail -n +4); do rm -rf "$old" && step "removed the earlier guest image $old"; done
step "built $OUT (vmlinux $(du -m "$OUT/vmlinux" | cut -f1) MB, initrd $(du -m "$OUT/initrd.cpio" | cut -f1) MB, root $(du -m --apparent-size "$OUT/rootfs.ext4" | cut -f1) MB)"
