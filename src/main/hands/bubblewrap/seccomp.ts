import { CorralError } from '../../../shared/errors'

/**
 * The seccomp filter of bubblewrap sandboxes, as a classic-BPF program (an array of
 * `struct sock_filter`, what `bwrap --seccomp FD` loads). It follows Docker's default profile
 * where that profile refuses a call to an unprivileged container: the kernel keyring (keyctl,
 * add_key, request_key), perf_event_open, io_uring, bpf, userfaultfd, mounting and pivot_root,
 * kernel modules and kexec, new namespaces (unshare / clone with a CLONE_NEW* flag, setns),
 * reaching into other processes (ptrace, process_vm_*, pidfd_getfd, kcmp), open_by_handle_at,
 * clocks, swap, reboot, quotas, syslog. Those fail with EPERM; clone3 fails with ENOSYS (its
 * flags sit behind a pointer a filter cannot read; libc then falls back to clone). Everything
 * else is allowed. A call from another ABI than the filter's own (i386 or x32 on x86-64, arm32
 * on aarch64) is refused: its numbers mean other calls.
 */

export type SeccompArch = 'x86_64' | 'aarch64'

/** The syscalls refused with EPERM, by name (those an architecture lacks are skipped). */
export const DENIED_SYSCALLS = [
  'acct', 'add_key', 'bpf', 'clock_adjtime', 'clock_settime', 'create_module', 'delete_module', 'finit_module',
  'fanotify_init', 'fsconfig', 'fsmount', 'fsopen', 'fspick', 'get_kernel_syms', 'init_module', 'io_uring_enter',
  'io_uring_register', 'io_uring_setup', 'ioperm', 'iopl', 'kcmp', 'kexec_file_load', 'kexec_load', 'keyctl',
  'lookup_dcookie', 'mount', 'mount_setattr', 'move_mount', 'name_to_handle_at', 'nfsservctl', 'open_by_handle_at',
  'open_tree', 'perf_event_open', 'pidfd_getfd', 'pivot_root', 'process_vm_readv', 'process_vm_writev', 'ptrace',
  'query_module', 'quotactl', 'quotactl_fd', 'reboot', 'request_key', 'setns', 'settimeofday', 'swapoff', 'swapon',
  'syslog', 'sysfs', '_sysctl', 'umount2', 'uselib', 'userfaultfd', 'ustat', 'vhangup',
] as const

type SyscallName = (typeof DENIED_SYSCALLS)[number] | 'clone' | 'clone3' | 'unshare'

// From the kernel's uapi headers: asm/unistd_64.h (x86-64) and asm-generic/unistd.h (aarch64).
const NUMBERS: Record<SeccompArch, Partial<Record<SyscallName, number>>> = {
  x86_64: {
    acct: 163, add_key: 248, bpf: 321, clock_adjtime: 305, clock_settime: 227, create_module: 174, delete_module: 176, finit_module: 313,
    fanotify_init: 300, fsconfig: 431, fsmount: 432, fsopen: 430, fspick: 433, get_kernel_syms: 177, init_module: 175, io_uring_enter: 426,
    io_uring_register: 427, io_uring_setup: 425, ioperm: 173, iopl: 172, kcmp: 312, kexec_file_load: 320, kexec_load: 246, keyctl: 250,
    lookup_dcookie: 212, mount: 165, mount_setattr: 442, move_mount: 429, name_to_handle_at: 303, nfsservctl: 180, open_by_handle_at: 304,
    open_tree: 428, perf_event_open: 298, pidfd_getfd: 438, pivot_root: 155, process_vm_readv: 310, process_vm_writev: 311, ptrace: 101,
    query_module: 178, quotactl: 179, quotactl_fd: 443, reboot: 169, request_key: 249, setns: 308, settimeofday: 164, swapoff: 168, swapon: 167,
    syslog: 103, sysfs: 139, _sysctl: 156, umount2: 166, uselib: 134, userfaultfd: 323, ustat: 136, vhangup: 153,
    clone: 56, clone3: 435, unshare: 272,
  },
  aarch64: {
    acct: 89, add_key: 217, bpf: 280, clock_adjtime: 266, clock_settime: 112, delete_module: 106, finit_module: 273,
    fanotify_init: 262, fsconfig: 431, fsmount: 432, fsopen: 430, fspick: 433, init_module: 105, io_uring_enter: 426,
    io_uring_register: 427, io_uring_setup: 425, kcmp: 272, kexec_file_load: 294, kexec_load: 104, keyctl: 219,
    lookup_dcookie: 18, mount: 40, mount_setattr: 442, move_mount: 429, name_to_handle_at: 264, nfsservctl: 42, open_by_handle_at: 265,
    open_tree: 428, perf_event_open: 241, pidfd_getfd: 438, pivot_root: 41, process_vm_readv: 270, process_vm_writev: 271, ptrace: 117,
    quotactl: 60, quotactl_fd: 443, reboot: 142, request_key: 218, setns: 268, settimeofday: 170, swapoff: 225, swapon: 224,
    syslog: 116, umount2: 39, userfaultfd: 282, vhangup: 58,
    clone: 220, clone3: 435, unshare: 97,
  },
}

// <linux/audit.h>, <linux/seccomp.h>, <linux/filter.h>, <linux/sched.h>
const AUDIT_ARCH: Record<SeccompArch, number> = { x86_64: 0xc000003e, aarch64: 0xc00000b7 }
const X32_SYSCALL_BIT = 0x40000000
export const SECCOMP_RET_KILL_PROCESS = 0x80000000
export const SECCOMP_RET_ERRNO = 0x00050000
export const SECCOMP_RET_ALLOW = 0x7fff0000
export const EPERM = 1
export const ENOSYS = 38
const BPF_LD_W_ABS = 0x20
const BPF_JEQ_K = 0x15
const BPF_JGE_K = 0x35
const BPF_JSET_K = 0x45
const BPF_RET_K = 0x06
/** Offsets in `struct seccomp_data`: nr, arch, args[0] (its low 32 bits on a little-endian machine). */
const DATA_NR = 0
const DATA_ARCH = 4
const DATA_ARG0_LO = 16
/** CLONE_NEWTIME | CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET */
export const CLONE_NEW_NAMESPACES = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

export interface BpfInstruction {
  code: number
  jt: number
  jf: number
  k: number
}

/** The architecture of this process, when a filter exists for it. */
export function hostSeccompArch(arch: string = process.arch): SeccompArch | undefined {
  return arch === 'x64' ? 'x86_64' : arch === 'arm64' ? 'aarch64' : undefined
}

type Target = number | string
interface Pending {
  code: number
  k: number
  jt?: Target
  jf?: Target
}

/** A tiny assembler: instructions with label jumps, resolved to the 8-bit forward offsets BPF has. */
class Assembler {
  private readonly out: Pending[] = []
  private readonly labels = new Map<string, number>()
  emit(code: number, k: number, jt?: Target, jf?: Target): void {
    this.out.push({ code, k, jt, jf })
  }
  label(name: string): void {
    this.labels.set(name, this.out.length)
  }
  resolve(): BpfInstruction[] {
    return this.out.map((ins, i) => {
      const offset = (t: Target | undefined) => {
        if (t === undefined || typeof t === 'number') return t ?? 0
        const at = this.labels.get(t)
        if (at === undefined) throw new CorralError('api_error', `seccomp: no label ${t}`)
        const d = at - (i + 1)
        if (d < 0 || d > 255) throw new CorralError('api_error', `seccomp: the jump to ${t} from ${i} does not fit in 8 bits`)
        return d
      }
      return { code: ins.code, k: ins.k >>> 0, jt: offset(ins.jt), jf: offset(ins.jf) }
    })
  }
}

/** The filter as instructions (see the module comment for what it refuses). */
export function seccompProgram(arch: SeccompArch): BpfInstruction[] {
  const nr = NUMBERS[arch]
  const a = new Assembler()
  a.emit(BPF_LD_W_ABS, DATA_ARCH)
  a.emit(BPF_JEQ_K, AUDIT_ARCH[arch], 1, 0)
  a.emit(BPF_RET_K, SECCOMP_RET_KILL_PROCESS)
  a.emit(BPF_LD_W_ABS, DATA_NR)
  if (arch === 'x86_64') a.emit(BPF_JGE_K, X32_SYSCALL_BIT, 'enosys', 0)
  for (const name of DENIED_SYSCALLS) {
    const n = nr[name]
    if (n !== undefined) a.emit(BPF_JEQ_K, n, 'eperm', 0)
  }
  a.emit(BPF_JEQ_K, nr.clone3!, 'enosys', 0)
  a.emit(BPF_JEQ_K, nr.clone!, 'flags', 0)
  a.emit(BPF_JEQ_K, nr.unshare!, 'flags', 'allow')
  // clone and unshare take their flags as the first argument on both architectures.
  a.label('flags')
  a.emit(BPF_LD_W_ABS, DATA_ARG0_LO)
  a.emit(BPF_JSET_K, CLONE_NEW_NAMESPACES, 'eperm', 'allow')
  a.label('allow')
  a.emit(BPF_RET_K, SECCOMP_RET_ALLOW)
  a.label('eperm')
  a.emit(BPF_RET_K, SECCOMP_RET_ERRNO | EPERM)
  a.label('enosys')
  a.emit(BPF_RET_K, SECCOMP_RET_ERRNO | ENOSYS)
  return a.resolve()
}

/** The program as the kernel (and `bwrap --seccomp`) reads it: 8 bytes per instruction, native (little) endian. */
export function seccompFilterBytes(arch: SeccompArch): Buffer {
  const program = seccompProgram(arch)
  const buf = Buffer.alloc(program.length * 8)
  program.forEach((ins, i) => {
    buf.writeUInt16LE(ins.code, i * 8)
    buf.writeUInt8(ins.jt, i * 8 + 2)
    buf.writeUInt8(ins.jf, i * 8 + 3)
    buf.writeUInt32LE(ins.k, i * 8 + 4)
  })
  return buf
}

/** What a syscall meets under the filter: the action word the program returns (for tests and doctor). */
export function evaluateSeccomp(program: readonly BpfInstruction[], data: { arch: number; nr: number; arg0?: number }): number {
  let acc = 0
  for (let pc = 0; pc < program.length; ) {
    const ins = program[pc]!
    switch (ins.code) {
      case BPF_LD_W_ABS:
        acc = ins.k === DATA_NR ? data.nr >>> 0 : ins.k === DATA_ARCH ? data.arch >>> 0 : ins.k === DATA_ARG0_LO ? (data.arg0 ?? 0) >>> 0 : 0
        pc++
        break
      case BPF_JEQ_K:
        pc += 1 + (acc === ins.k ? ins.jt : ins.jf)
        break
      case BPF_JGE_K:
        pc += 1 + (acc >= ins.k ? ins.jt : ins.jf)
        break
      case BPF_JSET_K:
        pc += 1 + ((acc & ins.k) !== 0 ? ins.jt : ins.jf)
        break
      case BPF_RET_K:
        return ins.k
      default:
        throw new CorralError('api_error', `seccomp: unknown instruction ${ins.code}`)
    }
  }
  throw new CorralError('api_error', 'seccomp: the program fell off its end')
}

export const auditArch = (arch: SeccompArch): number => AUDIT_ARCH[arch]
export const syscallNumber = (arch: SeccompArch, name: SyscallName): number | undefined => NUMBERS[arch][name]
