import { realpathSync, statSync } from 'node:fs'
import { homedir } from 'node:os'
import { join, posix, resolve, sep } from 'node:path'
import { CorralError } from '../../shared/errors'
import type { FolderMount } from './sandbox'
import { WORKSPACE } from './settings'

export type { FolderMount } from './sandbox'

/**
 * `host_folder` session resources (a Corral addition): a directory of the user's machine bound
 * into the sandbox at `mount_path` (default /workspace), read-write or read-only. Docker bind
 * mounts and bwrap binds are resolved by the kernel at mount time, so a symlink inside the folder
 * is read inside the sandbox's own mount namespace: it cannot reach the host outside the folder.
 */
/** What a host folder is checked against: Corral's data directory and the user's home. */
export interface FolderRules {
  dataDir: string
  /** The user's home directory; default os.homedir(). */
  home?: string
  /** Further host paths no folder may be, contain or be inside (Corral's own files, tests' keyrings). */
  protectedPaths?: readonly string[]
}

/** Directories a folder may be neither equal to nor inside of. */
const SYSTEM_TREES = ['/proc', '/sys', '/dev', '/etc', '/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/boot', '/run', '/var', '/System', '/Library']
/** Directories a folder may not be (their subfolders are fine). */
const SYSTEM_ROOTS = ['/', '/home', '/root', '/tmp', '/opt', '/srv', '/mnt', '/media', '/Users', '/private', '/private/tmp', '/private/var']

const within = (path: string, dir: string) => path === dir || path.startsWith(dir.endsWith(sep) ? dir : dir + sep)
const realOr = (p: string) => {
  try {
    return realpathSync(p)
  } catch {
    return resolve(p)
  }
}

/** The user's credential stores: the keychain's files and the usual secret folders. */
function credentialPaths(home: string): string[] {
  const xdgData = process.env.XDG_DATA_HOME || join(home, '.local/share')
  return [join(xdgData, 'keyrings'), join(home, '.local/share/keyrings'), join(home, 'Library/Keychains'), join(home, '.gnupg'), join(home, '.ssh'), join(home, '.password-store')]
}

/**
 * Resolves a host folder with realpath and checks it against the rules. Returns the real path;
 * throws CorralError invalid_request_error naming `field` and the rule it breaks: a path that
 * does not exist or is not a directory, `/` and top-level system directories, anything inside
 * /proc, /sys, /dev, /etc, /usr, /var, /run, …, the home directory itself, and any folder that is,
 * contains or lies inside Corral's data directory or the keychain's files.
 */
export function checkHostFolder(hostPath: string, field: string, rules: FolderRules): string {
  let real: string
  try {
    real = realpathSync(hostPath)
  } catch (err) {
    throw new CorralError('invalid_request_error', `${field}: ${JSON.stringify(hostPath)} does not exist on this machine (${(err as NodeJS.ErrnoException).code ?? 'unreadable'})`, { cause: err })
  }
  if (!statSync(real).isDirectory()) throw new CorralError('invalid_request_error', `${field}: ${JSON.stringify(hostPath)} is not a directory`)
  const shown = real === hostPath ? JSON.stringify(hostPath) : `${JSON.stringify(hostPath)} (resolves to ${JSON.stringify(real)})`
  const refuse = (why: string) => new CorralError('invalid_request_error', `${field}: ${shown} cannot be mounted: ${why}`)
  const home = realOr(rules.home ?? homedir())
  if (real === home) throw refuse('it is your home directory itself; choose a project folder inside it')
  if (SYSTEM_ROOTS.includes(real)) throw refuse(real === '/' ? 'it is the root of the file system' : `it is the system directory ${real} itself; choose a project folder inside it`)
  const tree = SYSTEM_TREES.find((d) => within(real, d))
  if (tree) throw refuse(`it is inside the system directory ${tree}`)
  const guarded: [string, string][] = [
    [realOr(rules.dataDir), "Corral's data directory (sessions, logs, change records)"],
    ...credentialPaths(home).map((p): [string, string] => [realOr(p), 'a keychain or credential folder']),
    ...(rules.protectedPaths ?? []).map((p): [string, string] => [realOr(p), "Corral's own files"]),
  ]
  for (const [p, what] of guarded) {
    if (within(real, p)) throw refuse(`it is inside ${what} (${p})`)
    if (within(p, real)) throw refuse(`it contains ${what} (${p})`)
  }
  return real
}

/** Where a folder goes in the sandbox: /workspace (the default) or a path inside it. */
export function folderTarget(mountPath: unknown, field: string): string {
  if (mountPath === undefined || mountPath === null || mountPath === '') return WORKSPACE
  if (typeof mountPath !== 'string' || !mountPath.startsWith('/')) throw new CorralError('invalid_request_error', `${field}: must be an absolute path in the sandbox`)
  const abs = posix.resolve(mountPath)
  if (abs !== WORKSPACE && !abs.startsWith(WORKSPACE + '/')) throw new CorralError('invalid_request_error', `${field}: ${JSON.stringify(mountPath)} must be ${WORKSPACE} or a path inside it`)
  if (abs.split('/').includes('.corral')) throw new CorralError('invalid_request_error', `${field}: ${JSON.stringify(mountPath)} may not use the name .corral (the runner's own directory)`)
  return abs
}

/**
 * The session's `host_folder` resources as mounts, each folder resolved and checked again (it is
 * a path on a live file system: it may have become a symlink since the session was created).
 * Throws CorralError invalid_request_error naming `resources[i].host_path` / `.mount_path`;
 * two folders on one mount path, or one inside another's, are refused too.
 */
export function folderMounts(resources: readonly Record<string, unknown>[] | undefined, rules: FolderRules): FolderMount[] {
  const mounts: FolderMount[] = []
  ;(resources ?? []).forEach((res, index) => {
    if (res.type !== 'host_folder') return
    const field = `resources[${index}]`
    if (typeof res.host_path !== 'string' || !res.host_path.startsWith('/')) throw new CorralError('invalid_request_error', `${field}.host_path: must be an absolute path`)
    const source = checkHostFolder(res.host_path, `${field}.host_path`, rules)
    const target = folderTarget(res.mount_path, `${field}.mount_path`)
    const clash = mounts.find((m) => within(m.target, target) || within(target, m.target))
    if (clash) throw new CorralError('invalid_request_error', `${field}.mount_path: ${target} overlaps resources[${clash.index}]'s mount at ${clash.target}; give each folder its own path`)
    mounts.push({ index, source, target, readOnly: res.read_only === true })
  })
  return mounts
}
