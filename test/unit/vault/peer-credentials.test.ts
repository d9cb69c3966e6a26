import { describe, expect, it } from 'vitest'
import { egressPeerRefusal, inDockerContainer } from '../../../src/main/vault/peer-credentials'

const CONTAINER_ID = 'a'.repeat(64)
const cgroups: Record<number, string> = {
  10: `0::/docker/${CONTAINER_ID}\n`,
  11: `1:name=systemd:/system.slice/docker-${CONTAINER_ID}.scope\n0::/system.slice/docker-${CONTAINER_ID}.scope\n`,
  12: '0::/user.slice/user-1000.slice/session-2.scope\n',
  13: '0::/docker-not-a-container/x\n',
}
const readCgroup = (pid: number) => {
  const c = cgroups[pid]
  if (c === undefined) throw new Error('ENOENT')
  return c
}
const rule = { ownUid: 4242, containerUids: [1000], readCgroup }

describe('egress socket peers', () => {
  it('accepts any process of Corral’s own uid (Corral itself, and bubblewrap sandboxes mapped back to it)', () => {
    expect(egressPeerRefusal({ pid: 12, uid: 4242, gid: 4242 }, rule)).toBeUndefined()
  })

  it('accepts the Docker sandbox uid from inside a Docker container, under the cgroupfs and the systemd drivers', () => {
    expect(egressPeerRefusal({ pid: 10, uid: 1000, gid: 1000 }, rule)).toBeUndefined()
    expect(egressPeerRefusal({ pid: 11, uid: 1000, gid: 1000 }, rule)).toBeUndefined()
  })

  it('refuses the Docker sandbox uid from a process that is not in a container (a local person with uid 1000)', () => {
    expect(egressPeerRefusal({ pid: 12, uid: 1000, gid: 1000 }, rule)).toMatch(/uid 1000 \(pid 12\) is a Docker sandbox's uid but the process is not in a Docker container/)
    expect(egressPeerRefusal({ pid: 13, uid: 1000, gid: 1000 }, rule)).toMatch(/not in a Docker container/)
  })

  it('refuses the Docker sandbox uid when the process’s cgroup cannot be read (gone, or hidden by hidepid)', () => {
    expect(egressPeerRefusal({ pid: 99, uid: 1000, gid: 1000 }, rule)).toMatch(/not in a Docker container/)
  })

  it('refuses every other uid, naming it and the uids it accepts', () => {
    expect(egressPeerRefusal({ pid: 10, uid: 1234, gid: 1234 }, rule)).toBe("uid 1234 (pid 10) is neither Corral's user (4242) nor a Docker sandbox's (1000)")
  })

  it('recognises a Docker container only by a full container id in a docker cgroup path', () => {
    expect(inDockerContainer(10, readCgroup)).toBe(true)
    expect(inDockerContainer(11, readCgroup)).toBe(true)
    expect(inDockerContainer(12, readCgroup)).toBe(false)
    expect(inDockerContainer(13, readCgroup)).toBe(false)
  })
})
