import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join, resolve } from 'node:path'
import type { Socket } from 'node:net'

/*
 * Who is on the other end of an egress socket. The proxy's unix sockets live in a 0700 directory
 * that only Corral's user can traverse; sandboxes reach their own socket through a bind mount of
 * their session directory, which does not traverse the host path. That keeps other local users
 * out by path. This file is the second check, on every accepted connection: the kernel's record
 * of the connecting process (SO_PEERCRED on Linux, getpeereid on macOS, through the small N-API
 * addon in native/peercred: Node has no API for it).
 *
 * Which peers a session's socket accepts (measured here, Debian 12, rootful Docker):
 * - Corral's own uid: Corral itself, and bubblewrap sandboxes, whose user namespace maps the
 *   sandbox's uid 1000 back to the uid that ran bwrap (the host sees Corral's uid).
 * - a Docker sandbox's uid (1000 by default: the container runs as 1000:1000 and, without
 *   userns-remap, the host sees 1000) only when the process is inside a Docker container (its
 *   /proc/<pid>/cgroup names one). A local person who happens to have uid 1000 is not in a
 *   container, and cannot put a process in one without access to the Docker socket (root-equivalent).
 * Everyone else is refused before a byte is read.
 */

/** The kernel's record of the process that connected a unix socket (ids as seen from Corral's user namespace). */
export interface PeerCredentials {
  pid: number
  uid: number
  gid: number
}

/** Reads a connected unix socket's peer credentials from its file descriptor. */
export type PeerCredentialsReader = (fd: number) => PeerCredentials

let loaded: { read: PeerCredentialsReader } | { unavailable: string } | undefined

/**
 * The native reader (native/peercred), loaded once: from the `corral-peercred` package that
 * `npm install` builds, else from the build directory next to the source tree or the bundle.
 * `{ unavailable }` says why when it is not built (or the platform has no such call).
 */
export function peerCredentialsReader(): { read: PeerCredentialsReader } | { unavailable: string } {
  if (loaded) return loaded
  const req = createRequire(typeof __filename === 'string' ? __filename : join(process.cwd(), 'index.js'))
  const candidates = [
    'corral-peercred',
    ...(typeof __dirname === 'string' ? [resolve(__dirname, '../../../native/peercred'), resolve(__dirname, '../../native/peercred')] : []),
    resolve(process.cwd(), 'native/peercred'),
  ]
  const errors: string[] = []
  for (const c of candidates) {
    try {
      const mod = req(c) as { peerCredentials?: PeerCredentialsReader }
      if (typeof mod.peerCredentials === 'function') return (loaded = { read: mod.peerCredentials })
    } catch (err) {
      errors.push(`${c}: ${(err as Error).message.split('\n')[0]}`)
    }
  }
  return (loaded = { unavailable: `the peer-credentials addon is not built (npm install builds native/peercred; or run npm run build:native): ${errors.join('; ')}` })
}

/** A connected unix socket's file descriptor (Node keeps it on the socket's handle). */
export function socketFd(socket: Socket): number | undefined {
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd
  return typeof fd === 'number' && fd >= 0 ? fd : undefined
}

/** Whether the process `pid` is inside a Docker container, from its cgroup paths (cgroupfs or systemd driver). */
export function inDockerContainer(pid: number, readCgroup: (pid: number) => string = (p) => readFileSync(`/proc/${p}/cgroup`, 'utf8')): boolean {
  let text: string
  try {
    text = readCgroup(pid)
  } catch {
    return false // gone already, or /proc hides it (hidepid): not provably a sandbox
  }
  return /(^|\n)[^\n]*:[^\n]*\/docker[-/][0-9a-f]{64}(\.scope)?(\/|\n|$)/.test(text)
}

export interface EgressPeerRule {
  /** Corral's own uid (and so a bubblewrap sandbox's, seen from the host). */
  ownUid: number
  /** The uids the host sees for Docker sandboxes (default [1000]; rootless Docker or userns-remap map them elsewhere). */
  containerUids: readonly number[]
  /** Reads /proc/<pid>/cgroup (injectable for unit tests). */
  readCgroup?: (pid: number) => string
}

/** Why a peer may not use an egress socket, or undefined when it may (the rule above). */
export function egressPeerRefusal(peer: PeerCredentials, rule: EgressPeerRule): string | undefined {
  if (peer.uid === rule.ownUid) return undefined
  if (rule.containerUids.includes(peer.uid)) {
    if (inDockerContainer(peer.pid, rule.readCgroup)) return undefined
    return `uid ${peer.uid} (pid ${peer.pid}) is a Docker sandbox's uid but the process is not in a Docker container`
  }
  return `uid ${peer.uid} (pid ${peer.pid}) is neither Corral's user (${rule.ownUid}) nor a Docker sandbox's (${rule.containerUids.join(', ') || 'none'})`
}
