import { execFile, spawn } from 'node:child_process'
import { accessSync, constants, existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'

/*
 * Which accelerator a VM sandbox runs on. `/dev/kvm` existing proves nothing: on the machines
 * Corral is built on it is a nested PVM device, and a stock Debian kernel under `-accel kvm`
 * spins in early boot with no output at all (recipes/vm-sandbox.md). So the probe boots the real
 * guest kernel and initramfs under KVM and waits (≤ 10 s by default) for the kernel to reach
 * userspace (its console line `Run /init as init process`); anything else — no /dev/kvm, no
 * access to it, qemu refusing KVM, a hang, a crash — means TCG, with the reason. The answer is
 * kept per host in a JSON file next to the image cache, keyed by qemu's version and the
 * kernel's path, size and mtime, so the probe runs once per host and image.
 */

export type VmAccelerator = 'kvm' | 'tcg'

export interface AcceleratorChoice {
  accel: VmAccelerator
  /** Why this one (what the probe saw, or why there was none). */
  reason: string
  /** `qemu-system-x86_64 --version`'s first line. */
  qemuVersion: string
  /** When the probe ran (ISO time); the cached answer keeps its first time. */
  probedAt: string
  /** The answer came from the cache file. */
  cached: boolean
}

export interface AcceleratorProbeParams {
  /** The image's PVH vmlinux and initramfs (the ones every VM boots). */
  kernel: string
  initrd: string
  /** The cache file (e.g. `<vm cache dir>/accel.json`). */
  cacheFile: string
  /** qemu binary (default qemu-system-x86_64 on PATH). */
  qemu?: string
  /** How long the KVM boot may take to reach userspace (default 10 s). */
  timeoutMs?: number
  /** The KVM device (default /dev/kvm). */
  kvmDevice?: string
  /** Probe again even when the cache has an answer. */
  refresh?: boolean
}

const run = promisify(execFile)

/** qemu's version line (`QEMU emulator version 7.2.22 (…)`); throws when qemu does not run. */
export async function qemuVersion(qemu = 'qemu-system-x86_64'): Promise<string> {
  const { stdout } = await run(qemu, ['--version'], { timeout: 10_000 })
  return stdout.split('\n')[0]!.trim()
}

/** What to expect of each accelerator, for `corral doctor` (the TCG figures measured on a 2-core Debian 12 VM). */
export function expectedSpeed(accel: VmAccelerator): string {
  return accel === 'kvm'
    ? 'hardware virtualization: sub-second cold boot and snapshot restore, near-native tool calls'
    : 'software emulation: about 5 s per cold boot (once per template), about 0.2 s per snapshot restore, about 45 ms per process started in the guest (measured under TCG on a 2-core host)'
}

/** The `-accel` / `-cpu` arguments of an accelerator (q35 for both: microvm hangs under TCG). */
export function acceleratorArgs(accel: VmAccelerator): string[] {
  return accel === 'kvm' ? ['-accel', 'kvm', '-cpu', 'host'] : ['-accel', 'tcg', '-cpu', 'max']
}

interface CacheEntry {
  accel: VmAccelerator
  reason: string
  qemuVersion: string
  probedAt: string
}

function readCache(file: string): Record<string, CacheEntry> {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as unknown
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, CacheEntry>) : {}
  } catch {
    return {}
  }
}

function writeCache(file: string, entries: Record<string, CacheEntry>): void {
  try {
    mkdirSync(dirname(file), { recursive: true })
    const tmp = `${file}.${process.pid}.tmp`
    writeFileSync(tmp, JSON.stringify(entries, null, 2) + '\n')
    renameSync(tmp, file)
  } catch {
    // A read-only cache directory: the answer is just not kept (the next start probes again).
  }
}

/**
 * Picks the accelerator for VM sandboxes on this host: the cached answer when there is one for
 * this qemu and kernel, else a probe boot under KVM (only when the KVM device exists and is
 * readable and writable). Never throws for a failing probe: that is a `tcg` answer with the
 * reason. Throws when qemu itself does not run (`qemu-system-x86_64 --version` fails).
 */
export async function chooseAccelerator(p: AcceleratorProbeParams): Promise<AcceleratorChoice> {
  const qemu = p.qemu ?? 'qemu-system-x86_64'
  const version = await qemuVersion(qemu)
  const kvm = p.kvmDevice ?? '/dev/kvm'
  const st = statSync(p.kernel)
  const key = `${version} | ${p.kernel} ${st.size} ${Math.round(st.mtimeMs)} | ${kvm}`
  const cache = readCache(p.cacheFile)
  const hit = cache[key]
  if (hit && !p.refresh && (hit.accel === 'kvm' || hit.accel === 'tcg')) return { ...hit, cached: true }

  const now = new Date().toISOString()
  let answer: CacheEntry
  if (!existsSync(kvm)) answer = { accel: 'tcg', reason: `${kvm} does not exist (no KVM on this host)`, qemuVersion: version, probedAt: now }
  else {
    let access: string | undefined
    try {
      accessSync(kvm, constants.R_OK | constants.W_OK)
    } catch (err) {
      access = (err as NodeJS.ErrnoException).code ?? (err as Error).message
    }
    if (access) answer = { accel: 'tcg', reason: `${kvm} is not usable by this user (${access}; add the user to the kvm group)`, qemuVersion: version, probedAt: now }
    else {
      const probe = await probeKvmBoot({ qemu, kernel: p.kernel, initrd: p.initrd, timeoutMs: p.timeoutMs ?? 10_000 })
      answer = probe.ok
        ? { accel: 'kvm', reason: `a probe boot under KVM reached userspace in ${probe.ms} ms`, qemuVersion: version, probedAt: now }
        : { accel: 'tcg', reason: `${kvm} exists but a probe boot under KVM failed: ${probe.reason}`, qemuVersion: version, probedAt: now }
    }
  }
  writeCache(p.cacheFile, { ...cache, [key]: answer })
  return { ...answer, cached: false }
}

/** The line the kernel prints when it hands over to the initramfs's /init (userspace reached). */
const USERSPACE_LINE = /Run \/\S+ as init process/

/**
 * One boot of the kernel + initramfs under KVM (`accel`: another, to check the probe itself)
 * with the console on qemu's stdout; resolves when
 * the kernel reaches userspace, or with why not (qemu's error, its exit, the timeout). The qemu
 * process is always killed before this resolves.
 */
export async function probeKvmBoot(p: { qemu: string; kernel: string; initrd: string; timeoutMs: number; accel?: VmAccelerator }): Promise<{ ok: true; ms: number } | { ok: false; reason: string }> {
  const started = Date.now()
  const args = [
    ...acceleratorArgs(p.accel ?? 'kvm'),
    '-M', 'q35', '-m', '256', '-smp', '1',
    '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot', '-nic', 'none',
    '-serial', 'stdio',
    '-kernel', p.kernel, '-initrd', p.initrd,
    '-append', 'console=ttyS0 panic=-1 loglevel=7',
  ]
  return await new Promise((resolve) => {
    let out = ''
    let err = ''
    let settled = false
    const child = spawn(p.qemu, args, { stdio: ['ignore', 'pipe', 'pipe'] })
    const finish = (r: { ok: true; ms: number } | { ok: false; reason: string }) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      child.kill('SIGKILL')
      resolve(r)
    }
    const timer = setTimeout(() => finish({ ok: false, reason: `no kernel output reached userspace within ${p.timeoutMs} ms (${out.trim() ? `last console line: ${JSON.stringify(out.trim().split('\n').at(-1)!.slice(0, 200))}` : 'no console output at all'}); the guest hangs under this KVM` }), p.timeoutMs)
    child.stdout.on('data', (c: Buffer) => {
      out = (out + c.toString('latin1')).slice(-16_384)
      if (USERSPACE_LINE.test(out)) finish({ ok: true, ms: Date.now() - started })
    })
    child.stderr.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4096)))
    child.on('error', (e) => finish({ ok: false, reason: `qemu did not start: ${e.message}` }))
    child.on('exit', (code, signal) => finish({ ok: false, reason: `qemu exited (${signal ?? `code ${code}`}) before the kernel reached userspace${err.trim() ? `: ${err.trim().split('\n').slice(-2).join(' / ')}` : ''}` }))
  })
}

/** The default cache file of the probe: next to the VM images. */
export function acceleratorCacheFile(vmCacheDir: string): string {
  return join(vmCacheDir, 'accel.json')
}
