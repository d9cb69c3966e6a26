import { execFile } from 'node:child_process'
import { existsSync } from 'node:fs'
import { delimiter, join } from 'node:path'
import { promisify } from 'node:util'
import { hostSeccompArch, type SeccompArch } from './seccomp'

const run = promisify(execFile)

/**
 * What this host's tools let a bubblewrap sandbox have beyond bwrap's namespaces (red-team issue
 * #15, finding 8). Each part is used when the host has it and reported by `corral doctor` when it
 * does not:
 * - `seccomp`: the filter of seccomp.ts (`bwrap --seccomp`), for x86-64 and aarch64;
 * - `disableUserns`: `--unshare-user --disable-userns` (bwrap ≥ 0.8): no nested user namespaces;
 * - `keyctl`: keyutils' `keyctl session -` starts bwrap in a fresh anonymous session keyring (the
 *   filter refuses the keyring calls anyway; this keeps the user's keyring out of reach even
 *   where no filter can be loaded);
 * - `prlimit`: util-linux's prlimit starts the runner inside the sandbox with RLIMIT_NPROC (the
 *   environment's `pids`, counted in the sandbox's own user namespace), RLIMIT_DATA (`memory_mb`,
 *   per process) and no core dumps; the runner starts the shell with RLIMIT_CPU. There is no
 *   limit on the sandbox's total memory or CPU share: that needs a cgroup, which Corral does not
 *   make (Docker does).
 */
export interface BwrapHardening {
  seccomp?: SeccompArch
  disableUserns: boolean
  keyctl?: string
  prlimit?: string
}

/** CPU seconds each process of a bubblewrap sandbox's shell may use (RLIMIT_CPU): an hour, bash's longest timeout. */
export const SANDBOX_CPU_SECONDS = 3600

function onPath(name: string, pathEnv = process.env.PATH ?? '/usr/bin:/bin'): string | undefined {
  for (const dir of pathEnv.split(delimiter)) {
    if (dir && existsSync(join(dir, name))) return join(dir, name)
  }
  return undefined
}

/** Finds out which parts this host offers (asks `bwrap --help` once). Never throws. */
export async function detectHardening(bwrap: string): Promise<BwrapHardening> {
  let help = ''
  try {
    const out = await run(bwrap, ['--help'], { timeout: 5000 })
    help = out.stdout + out.stderr
  } catch (err) {
    help = String((err as { stdout?: string }).stdout ?? '')
  }
  return {
    seccomp: help.includes('--seccomp') ? hostSeccompArch() : undefined,
    disableUserns: help.includes('--disable-userns'),
    keyctl: onPath('keyctl'),
    // It runs inside the sandbox, where /usr is the host's.
    prlimit: existsSync('/usr/bin/prlimit') ? '/usr/bin/prlimit' : undefined,
  }
}

/**
 * One line per part, for `corral doctor`: what is in force and what is missing. `cgroup`: the
 * controllers a sandbox's own cgroup gets on this host (none: rlimits only).
 */
export function describeHardening(h: BwrapHardening, limits: { pids: number; memoryMb: number; cgroup: readonly string[]; root: boolean }): Record<string, string> {
  const rlimits = h.prlimit ? `per process: ${limits.memoryMb} MiB data, ${SANDBOX_CPU_SECONDS} s CPU (shell), ${limits.pids} processes${limits.root ? ' (not enforced by the kernel while Corral runs as root)' : ''}, no core dumps` : ''
  const cgroup = limits.cgroup.length ? `a cgroup of its own: ${limits.cgroup.map((c) => (c === 'pids' ? `${limits.pids} processes` : `${limits.memoryMb} MiB memory`)).join(', ')} for the whole sandbox` : ''
  return {
    seccomp: h.seccomp ? `filter in force (${h.seccomp}; keyring, perf_event_open, io_uring, bpf, mount, ptrace, new namespaces … refused)` : `no filter: ${hostSeccompArch() ? 'this bwrap has no --seccomp' : `no filter for ${process.arch}`}`,
    user_namespaces: h.disableUserns ? 'nested user namespaces disabled (--disable-userns)' : 'nested user namespaces possible (bwrap older than 0.8 has no --disable-userns)' + (h.seccomp ? '; the seccomp filter refuses CLONE_NEWUSER' : ''),
    keyring: h.keyctl ? 'a fresh anonymous session keyring (keyctl session)' + (h.seccomp ? '; keyring calls refused' : '') : h.seccomp ? 'keyring calls refused by the filter; install keyutils for a fresh session keyring too' : 'the host session keyring is reachable: install keyutils',
    limits: cgroup || rlimits ? [cgroup, rlimits].filter(Boolean).join('; ') + '; no CPU share' : 'none (no writable cgroup, and prlimit from util-linux is missing)',
  }
}
