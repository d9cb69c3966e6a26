import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { sandboxResourcesDir } from '../paths'

/**
 * The guest image of the `vm` backend, as scripts/build-vm-image.sh (npm run vm:image) leaves it
 * in `$CORRAL_CACHE_DIR/vm/<key>/` (default /var/cache/corral): the PVH `vmlinux`, the busybox
 * `initrd.cpio`, the read-only `rootfs.ext4` and a `manifest.json`. `<key>` is a hash of the
 * image's inputs in the repository, computed here exactly as the script does: the script, the
 * guest's init, vm-init.sh and module list, the runner, and vmnet's egress bridge once it exists.
 */
export interface VmImage {
  key: string
  dir: string
  kernel: string
  initrd: string
  rootfs: string
  /** The kernel release the image boots (manifest.json). */
  kernelRelease: string
}

/** Where the repository's files are: resources/sandbox's parent's parent (the source tree). */
function repoRoot(): string {
  return resolve(sandboxResourcesDir(), '../..')
}

/** The image's inputs in the order build-vm-image.sh hashes them. */
export function vmImageInputs(root = repoRoot()): string[] {
  const guest = join(root, 'src/main/hands/vm/guest')
  const inputs = [join(root, 'scripts/build-vm-image.sh'), join(guest, 'init'), join(guest, 'vm-init.sh'), join(guest, 'modules'), join(root, 'resources/sandbox/runner.js')]
  const bridge = join(guest, 'egress-bridge.js')
  if (existsSync(bridge)) inputs.push(bridge)
  return inputs
}

/** The image key of this checkout: sha256 of its inputs, 12 hex digits (`cat inputs | sha256sum`). */
export function vmImageKey(root?: string): string {
  const hash = createHash('sha256')
  for (const file of vmImageInputs(root)) hash.update(readFileSync(file))
  return hash.digest('hex').slice(0, 12)
}

export function vmCacheDir(): string {
  return join(process.env.CORRAL_CACHE_DIR || '/var/cache/corral', 'vm')
}

/** The built image of this checkout, or why there is none (with the command that builds it). */
export function findVmImage(): { image: VmImage } | { missing: string } {
  let key: string
  try {
    key = vmImageKey()
  } catch (err) {
    return { missing: `the vm guest's sources were not found (${(err as Error).message})` }
  }
  const dir = join(vmCacheDir(), key)
  const manifestPath = join(dir, 'manifest.json')
  if (!existsSync(manifestPath)) return { missing: `the VM guest image ${key} is not built (run npm run vm:image; it needs root and the sandbox image's cached root filesystem)` }
  let kernelRelease = 'unknown'
  try {
    kernelRelease = String((JSON.parse(readFileSync(manifestPath, 'utf8')) as { kernel?: unknown }).kernel ?? 'unknown')
  } catch {
    return { missing: `the VM guest image at ${dir} has an unreadable manifest.json (run npm run vm:image again)` }
  }
  const image = { key, dir, kernel: join(dir, 'vmlinux'), initrd: join(dir, 'initrd.cpio'), rootfs: join(dir, 'rootfs.ext4'), kernelRelease }
  for (const f of [image.kernel, image.initrd, image.rootfs]) if (!existsSync(f)) return { missing: `the VM guest image at ${dir} lacks ${f} (run npm run vm:image again)` }
  return { image }
}
