import { CorralError } from '../../../shared/errors'
import { egressPortArgs } from './egress-bridge'
import type { VmImage } from './image'

/** The accelerator a VM runs on: KVM where a probe boot works (accel.ts), else software emulation. */
export type VmAccel = 'kvm' | 'tcg'

/** Extra 9p shares every VM has (besides the workspace `ws`): host folders, skills, uploads, the egress directory. */
export const VM_FOLDER_SLOTS = 6
export const WORKSPACE_TAG = 'ws'
export const folderTag = (i: number): string => `f${i + 1}`

/** The file descriptors a VM's qemu gets besides stdio (the runner's channel). */
export const INCOMING_FD = 3
export const CONTROL_FD = 4

/** One VM's qemu command line, as qemuArgs builds it. */
export interface QemuArgsParams {
  image: VmImage
  accel: VmAccel
  memoryMb: number
  vcpus: number
  /** The VM's private run directory (0700): QMP socket, console log, pid file, egress socket. */
  runDir: string
  /** Host directory of the workspace share (`ws`). */
  workspaceDir: string
  /** Host directories of the folder slots, VM_FOLDER_SLOTS of them (unused ones: an empty directory). */
  folderDirs: readonly string[]
  /** The runner's environment, put on the kernel command line (`corral.env.NAME=value`). */
  runnerEnv: Readonly<Record<string, string>>
  /** Restore from the migration stream on fd INCOMING_FD instead of booting. */
  incoming: boolean
  /** Arguments of the process's own hardening (`-sandbox …`, `-runas …`): hardening.ts. */
  hardening?: readonly string[]
}

/**
 * The qemu-system-x86_64 arguments of one VM, the same for the template's cold boot and every
 * restore but for `-incoming` and the host paths (a restore needs the same devices in the same
 * order; a 9p share may point at another host directory). Per recipes/vm-sandbox.md: q35 (not
 * microvm: it hangs in early boot under TCG), no defaults, no network device at all, no display,
 * no monitor but QMP on a unix socket in the run directory; the runner's JSON lines on qemu's own
 * stdio through the virtio-serial port `corral.runner`, the guest's control line on the socket
 * at fd CONTROL_FD (`corral.control`), vmnet's egress bridge on a socket in the run directory
 * (`corral.egress`); the root disk read-only; vmgenid so restored clones reseed their RNG.
 * Throws CorralError sandbox_error when a runner variable cannot go on the kernel command line.
 */
export function qemuArgs(p: QemuArgsParams): string[] {
  if (p.folderDirs.length !== VM_FOLDER_SLOTS) throw new CorralError('sandbox_error', `a VM has ${VM_FOLDER_SLOTS} folder slots, got ${p.folderDirs.length} directories`)
  const append = ['console=ttyS0', 'quiet', 'panic=-1', 'corral.root=vda']
  for (const [name, value] of Object.entries(p.runnerEnv)) {
    if (!/^CORRAL_[A-Z0-9_]+$/.test(name) || !/^[^\s"\\]*$/.test(value)) {
      throw new CorralError('sandbox_error', `the vm backend cannot pass ${name}=${JSON.stringify(value)} to its runner (no spaces, quotes or backslashes in a VM's settings: config.corral.extra_roots)`)
    }
    append.push(`corral.env.${name}=${value}`)
  }
  const cpu = p.accel === 'kvm' ? ['-accel', 'kvm', '-cpu', 'host'] : ['-accel', 'tcg', '-cpu', 'max']
  const args = [
    ...cpu,
    '-M', 'q35',
    '-m', String(p.memoryMb),
    '-smp', String(p.vcpus),
    '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot', '-nic', 'none',
    '-serial', `file:${p.runDir}/console.log`,
    '-qmp', `unix:${p.runDir}/qmp.sock,server=on,wait=off`,
    '-pidfile', `${p.runDir}/qemu.pid`,
    '-kernel', p.image.kernel,
    '-initrd', p.image.initrd,
    '-append', append.join(' '),
    '-device', 'virtio-serial-pci,id=vser',
    '-chardev', 'stdio,id=runner,signal=off',
    '-device', 'virtserialport,bus=vser.0,chardev=runner,name=corral.runner',
    '-chardev', `socket,id=control,fd=${CONTROL_FD}`,
    '-device', 'virtserialport,bus=vser.0,chardev=control,name=corral.control',
    // vmnet's egress bridge (egress-bridge.ts): QEMU listens, the host connects after the spawn.
    ...egressPortArgs(`${p.runDir}/egress.sock`),
    '-object', 'rng-builtin,id=rng0',
    '-device', 'virtio-rng-pci,rng=rng0',
    '-device', 'vmgenid,guid=auto',
    '-drive', `file=${p.image.rootfs},format=raw,if=none,id=root,readonly=on`,
    '-device', 'virtio-blk-pci,drive=root',
    '-fsdev', `local,id=${WORKSPACE_TAG},path=${p.workspaceDir},security_model=mapped-xattr`,
    '-device', `virtio-9p-pci,fsdev=${WORKSPACE_TAG},mount_tag=${WORKSPACE_TAG}`,
  ]
  p.folderDirs.forEach((dir, i) => {
    const tag = folderTag(i)
    args.push('-fsdev', `local,id=${tag},path=${dir},security_model=mapped-xattr`, '-device', `virtio-9p-pci,fsdev=${tag},mount_tag=${tag}`)
  })
  for (const a of [p.workspaceDir, ...p.folderDirs, p.runDir]) {
    if (a.includes(',')) throw new CorralError('sandbox_error', `the vm backend cannot use the host path ${JSON.stringify(a)} (a comma ends a qemu option)`)
  }
  if (p.incoming) args.push('-incoming', `fd:${INCOMING_FD}`)
  args.push(...(p.hardening ?? []))
  return args
}

/** The guest's clock as its control lines carry it: whole unix seconds, rounded (busybox's `date -s @…` takes no fraction). */
const guestSeconds = (now: number): string => String(Math.round(now / 1000))

/** The guest's control line that starts a restored VM: its clock and its 9p shares (tag, guest path, ro|rw). */
export function startLine(p: { now: number; shares: readonly { tag: string; target: string; readOnly: boolean }[] }): string {
  const parts = [`start ${guestSeconds(p.now)}`]
  for (const s of p.shares) {
    if (!s.target.startsWith('/') || s.target.split('/').includes('..') || /[\u0000-\u001f\u007f]/.test(s.target)) {
      throw new CorralError('sandbox_error', `the vm backend cannot mount a share at ${JSON.stringify(s.target)} (an absolute guest path without .. segments or control characters)`)
    }
    parts.push(`${s.tag},${guestPathWord(s.target)},${s.readOnly ? 'ro' : 'rw'}`)
  }
  return parts.join(' ') + '\n'
}

/**
 * A guest path as one word of a control line: letters, digits and `. _ / @ + -` as they are, every
 * other byte of its UTF-8 (a space, a comma, a quote, a non-ASCII letter) as `\0ooo`, which the
 * guest's `printf %b` turns back into the byte.
 */
export function guestPathWord(path: string): string {
  let out = ''
  for (const byte of Buffer.from(path, 'utf8')) {
    const c = String.fromCharCode(byte)
    out += /[A-Za-z0-9._/@+-]/.test(c) ? c : `\\0${byte.toString(8).padStart(3, '0')}`
  }
  return out
}

/** The guest's control line that sets its clock (again) to the host's. */
export function clockLine(now: number): string {
  return `clock ${guestSeconds(now)}\n`
}

/**
 * The host's heartbeat: answered by the guest's PID 1 with builtins only (however busy the
 * runner's channel is); with the runner's guest pid, the answer is an error when that process is
 * stopped (SIGSTOP from the agent's own shell: same uid) or gone.
 */
export function pingLine(runnerPid?: number): string {
  return runnerPid !== undefined && Number.isInteger(runnerPid) && runnerPid > 1 ? `ping ${runnerPid}\n` : 'ping\n'
}
