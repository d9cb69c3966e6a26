import { chooseAccelerator, expectedSpeed, qemuVersion } from './accel'
import { probeQemuSeccomp, qemuUser } from './hardening'

export interface VmDoctorParams {
  /** The built guest image of this checkout, or why there is none (with the command that builds it). */
  image: { kernel: string; initrd: string } | { missing: string }
  /** The accelerator probe's cache file (accel.ts). */
  cacheFile: string
  qemu?: string
}

/**
 * `corral doctor`'s lines for the vm backend: qemu's version, whether the guest image is built
 * (and the command that builds it), which accelerator VMs get and why, what speed to expect,
 * whether qemu's seccomp filter applies and which user qemu runs as. Never throws: a failing
 * probe is a line saying so.
 */
export async function vmDoctorDetails(p: VmDoctorParams): Promise<Record<string, string>> {
  const qemu = p.qemu ?? 'qemu-system-x86_64'
  const out: Record<string, string> = {}
  try {
    out.qemu = await qemuVersion(qemu)
  } catch (err) {
    out.qemu = `not found or not runnable (${(err as Error).message.split('\n')[0]}): apt-get install --no-install-recommends qemu-system-x86 qemu-utils`
    return out
  }
  if ('missing' in p.image) {
    out.image = p.image.missing
    out.accelerator = 'unknown until the image is built (the probe boots its kernel)'
  } else {
    out.image = `built (${p.image.kernel})`
    try {
      const c = await chooseAccelerator({ qemu, kernel: p.image.kernel, initrd: p.image.initrd, cacheFile: p.cacheFile })
      out.accelerator = `${c.accel}: ${c.reason}${c.cached ? ` (probed ${c.probedAt})` : ''}`
      out.expected_speed = expectedSpeed(c.accel)
    } catch (err) {
      out.accelerator = `tcg (the probe failed: ${(err as Error).message})`
      out.expected_speed = expectedSpeed('tcg')
    }
  }
  const seccomp = await probeQemuSeccomp(qemu)
  out.seccomp = seccomp.ok ? 'qemu runs under its seccomp filter (-sandbox on, obsolete/elevateprivileges/spawn/resourcecontrol denied)' : seccomp.reason
  try {
    const runAs = qemuUser()
    out.qemu_user = runAs ? `${runAs.user} (uid ${runAs.uid}; Corral runs as root, qemu drops to it with -runas)` : `Corral's own user (uid ${process.getuid?.() ?? '?'}, not root)`
  } catch (err) {
    out.qemu_user = (err as Error).message
  }
  return out
}
