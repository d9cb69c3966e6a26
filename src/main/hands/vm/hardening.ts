import { execFile, execFileSync } from 'node:child_process'
import { chmodSync, chownSync, lstatSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { CorralError } from '../../../shared/errors'

/*
 * Hardening of the QEMU process itself (the VM launcher owns the command line and takes these):
 * - seccomp: `-sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny`,
 *   after a probe that this qemu accepts it (a qemu built without libseccomp refuses `-sandbox`).
 *   `spawn=deny` rules out `exec:` migration URIs: save to `unix:`, restore from `fd:`.
 * - an unprivileged user: when Corral runs as root (CI), `-runas nobody` (or CORRAL_VM_USER):
 *   qemu opens its files (kernel, disks, the 9p roots, its sockets, console log) as root, then
 *   drops to that user before the guest runs; the 9p shares are used as that user afterwards, so
 *   their contents are handed to it (`grantToQemuUser`). qemu 7.2 makes that setuid *after*
 *   installing its filter, and `elevateprivileges=deny` kills it there with SIGSYS (measured:
 *   "Bad system call", rc 159; `children` too), so with -runas the filter says
 *   `elevateprivileges=allow`: once qemu is nobody, set*uid cannot give it root back (the drop
 *   clears its capabilities). When Corral is not root, qemu runs as Corral's own user with the
 *   full filter. Limitation: every VM's qemu shares the one -runas user.
 * - QMP only on a unix socket in a 0700 directory (`makePrivateRunDir`); no monitor the guest
 *   could reach: no `-monitor`, `-mon`, no `mon:` chardev, no monitor mux on a serial line
 *   (`monitorExposure` names what would break that).
 */

export const QEMU_SECCOMP = 'on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny'
/** The filter with -runas: qemu's own setuid to the -runas user must pass (see above). */
export const QEMU_SECCOMP_RUNAS = 'on,obsolete=deny,elevateprivileges=allow,spawn=deny,resourcecontrol=deny'

/** Who qemu runs as when Corral is root. */
export interface QemuUser {
  user: string
  uid: number
  gid: number
}

/**
 * Whether this qemu applies the seccomp filter: starts it with `-sandbox …` and no machine, asks
 * QMP to quit. `{ ok: false, reason }` when it refuses (built without seccomp) or fails.
 */
export async function probeQemuSeccomp(qemu = 'qemu-system-x86_64'): Promise<{ ok: true } | { ok: false; reason: string }> {
  try {
    await new Promise<void>((resolve, reject) => {
      const child = execFile(qemu, ['-M', 'none', '-nodefaults', '-no-user-config', '-display', 'none', '-sandbox', QEMU_SECCOMP, '-qmp', 'stdio'], { timeout: 10_000 }, (err, _stdout, stderr) => {
        if (err) reject(new Error(stderr.trim().split('\n').at(-1) || err.message))
        else resolve()
      })
      child.stdin!.end('{"execute":"qmp_capabilities"}\n{"execute":"quit"}\n')
    })
    return { ok: true }
  } catch (err) {
    return { ok: false, reason: `qemu refuses -sandbox (${(err as Error).message}): it runs without its seccomp filter` }
  }
}

/**
 * The user qemu runs as, or undefined when Corral is not root (qemu then runs as Corral's own,
 * unprivileged user). Throws sandbox_error when the chosen user does not exist or is root.
 */
export function qemuUser(options: { uid?: number; user?: string } = {}): QemuUser | undefined {
  const uid = options.uid ?? process.getuid?.() ?? -1
  if (uid !== 0) return undefined
  const user = options.user ?? process.env.CORRAL_VM_USER ?? 'nobody'
  if (!/^[a-z_][a-z0-9_.-]*$/i.test(user)) throw new CorralError('sandbox_error', `qemu cannot run as ${JSON.stringify(user)}: not a plain user name (CORRAL_VM_USER)`)
  let ids: number[]
  try {
    ids = ['-u', '-g'].map((flag) => Number(execFileSync('id', [flag, user], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()))
  } catch {
    throw new CorralError('sandbox_error', `the vm backend runs qemu as ${JSON.stringify(user)} when Corral is root, but there is no such user (CORRAL_VM_USER names another)`)
  }
  if (ids[0] === 0) throw new CorralError('sandbox_error', `CORRAL_VM_USER=${user} is root: qemu must run as an unprivileged user`)
  return { user, uid: ids[0]!, gid: ids[1]! }
}

/**
 * qemu's hardening arguments: the seccomp filter when this qemu has it (probeQemuSeccomp), and
 * `-runas <user>` when qemu must leave root.
 */
export function hardeningArgs(p: { seccomp: boolean; runAs?: QemuUser }): string[] {
  const args: string[] = []
  if (p.seccomp) args.push('-sandbox', p.runAs ? QEMU_SECCOMP_RUNAS : QEMU_SECCOMP)
  if (p.runAs) args.push('-runas', p.runAs.user)
  return args
}

/**
 * What the vm launcher passes as its `hardening` hook: probes seccomp once (cached for the
 * process) and picks the -runas user (Corral as root). `log` hears once when the filter is not available.
 */
export function qemuHardening(options: { qemu?: string; log?: (line: string) => void } = {}): () => Promise<string[]> {
  let pending: Promise<string[]> | undefined
  return () =>
    (pending ??= (async () => {
      const seccomp = await probeQemuSeccomp(options.qemu)
      if (!seccomp.ok) options.log?.(`vm: ${seccomp.reason}`)
      return hardeningArgs({ seccomp: seccomp.ok, runAs: qemuUser() })
    })())
}

/** A fresh run directory (QMP socket, the VM's other sockets, console log), mode 0700: only Corral's user may enter it. */
export function makePrivateRunDir(parent: string, prefix = 'vm-'): string {
  const dir = mkdtempSync(join(parent, prefix))
  chmodSync(dir, 0o700)
  return dir
}

/**
 * Hands a host directory a VM shares over 9p to qemu's user: the directory and everything in it
 * (not following symlinks). A no-op without `runAs`. Throws sandbox_error naming the path on failure.
 */
export function grantToQemuUser(path: string, runAs: QemuUser | undefined): void {
  if (!runAs) return
  const walk = (p: string) => {
    const st = lstatSync(p)
    if (st.uid !== runAs.uid || st.gid !== runAs.gid) chownSync(p, runAs.uid, runAs.gid)
    if (st.isDirectory()) for (const name of readdirSync(p)) walk(join(p, name))
  }
  try {
    walk(path)
  } catch (err) {
    throw new CorralError('sandbox_error', `cannot hand ${path} to qemu's user ${runAs.user}: ${(err as Error).message}`, { cause: err })
  }
}

/**
 * Why a qemu command line would give the guest (or anyone on its serial lines) a monitor, or
 * undefined when it does not: `-monitor`, `-mon`, `-qmp`/`-chardev` on stdio or a tty, any
 * `mon:` chardev, `mux=on`, `-serial mon:…`, `-nographic` (which muxes the monitor onto stdio).
 */
export function monitorExposure(args: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!
    const v = args[i + 1] ?? ''
    if (a === '-monitor' || a === '-mon' || a === '-qmp-pretty') return `${a} ${v}`
    if (a === '-nographic') return '-nographic (puts a monitor on stdio)'
    if ((a === '-serial' || a === '-parallel' || a === '-chardev' || a === '-qmp') && /(^|,)mon:|(^|,)mux=on/.test(v)) return `${a} ${v}`
    if (a === '-qmp' && !/^unix:/.test(v)) return `-qmp ${v} (QMP only on a unix socket)`
  }
  return undefined
}

/** `/proc/<pid>/status` fields that show a qemu's hardening: its seccomp mode and real/effective uid. */
export function processHardening(pid: number): { seccomp: number; uid: number; euid: number } {
  const stdout = readFileSync(`/proc/${pid}/status`, 'utf8')
  const field = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, 'm').exec(stdout)?.[1] ?? ''
  const [uid, euid] = field('Uid').split(/\s+/).map(Number)
  return { seccomp: Number(field('Seccomp')), uid: uid!, euid: euid! }
}
