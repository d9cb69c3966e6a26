import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/**
 * A cgroup (v1 `pids` and `memory` controllers) of one bubblewrap sandbox, made under this
 * process's own cgroup where the host lets this process write there (root, or a delegated
 * hierarchy). It caps the whole sandbox: its number of processes and its memory, which the
 * per-process rlimits cannot (and which the kernel does not enforce at all for RLIMIT_NPROC when
 * the sandbox's user maps to root). Undefined where no controller is writable; the sandbox then
 * has only the rlimits.
 */
export interface SandboxCgroup {
  /** The controllers in force: 'pids', 'memory'. */
  readonly controllers: readonly string[]
  /** `cgroup.procs` files a process writes its pid to, to join (the launcher does it before exec). */
  readonly procsFiles: readonly string[]
  /** Removes the cgroup directories once their processes are gone (best effort, never throws). */
  dispose(): Promise<void>
}

const ROOT = '/sys/fs/cgroup'

/** This process's cgroup path per v1 controller, from /proc/self/cgroup. */
function ownCgroups(): Map<string, string> {
  const out = new Map<string, string>()
  try {
    for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
      const m = /^\d+:([^:]*):(.*)$/.exec(line)
      if (!m) continue
      for (const c of m[1]!.split(',')) if (c) out.set(c, m[2]!)
    }
  } catch {
    // not Linux, or no procfs
  }
  return out
}

/** Makes the sandbox's cgroup with its limits; undefined when the host offers none to this process. */
export function openSandboxCgroup(name: string, limits: { pids: number; memoryBytes: number }): SandboxCgroup | undefined {
  const own = ownCgroups()
  const dirs: { controller: string; dir: string }[] = []
  const settings: Record<string, [string, string][]> = {
    pids: [['pids.max', String(limits.pids)]],
    memory: [
      ['memory.limit_in_bytes', String(limits.memoryBytes)],
      ['memory.memsw.limit_in_bytes', String(limits.memoryBytes)],
    ],
  }
  for (const controller of ['pids', 'memory']) {
    const path = own.get(controller)
    if (path === undefined) continue
    const dir = join(ROOT, controller, path, `corral-${name}`)
    try {
      mkdirSync(dir, { recursive: true })
      for (const [file, value] of settings[controller]!) {
        // memsw exists only with swap accounting; the memory limit alone still holds.
        if (file === 'memory.memsw.limit_in_bytes' && !existsSync(join(dir, file))) continue
        writeFileSync(join(dir, file), value)
      }
      dirs.push({ controller, dir })
    } catch {
      try {
        rmdirSync(dir)
      } catch {
        // not made, or not ours to remove
      }
    }
  }
  if (dirs.length === 0) return undefined
  return {
    controllers: dirs.map((d) => d.controller),
    procsFiles: dirs.map((d) => join(d.dir, 'cgroup.procs')),
    async dispose() {
      for (let attempt = 0; attempt < 20 && dirs.length; attempt++) {
        for (const d of [...dirs]) {
          try {
            rmdirSync(d.dir)
            dirs.splice(dirs.indexOf(d), 1)
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code === 'ENOENT') dirs.splice(dirs.indexOf(d), 1)
          }
        }
        if (dirs.length) await new Promise((r) => setTimeout(r, 50))
      }
    },
  }
}

/**
 * The launcher's prefix that puts the process into `cgroup` before it execs the command: a
 * POSIX shell writes its own pid to each `cgroup.procs` file, so every process of the sandbox
 * starts inside (nothing escapes by forking first).
 */
export function cgroupLauncher(cgroup: SandboxCgroup): string[] {
  return ['/bin/sh', '-c', 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; n=$((n - 1)); done; exec "$@"', 'corral-cgroup', String(cgroup.procsFiles.length), ...cgroup.procsFiles]
}
