import Docker from 'dockerode'
import { describe, expect, it } from 'vitest'
import { BubblewrapSandboxProvider } from '../../../src/main/hands/bubblewrap/bubblewrap-sandbox'
import { DockerSandboxProvider } from '../../../src/main/hands/docker/provider'
import { detectBackends } from '../../../src/main/hands/doctor'
import { bwrapReq, dockerReq } from './support'

const docker = dockerReq()
const bwrap = bwrapReq()

describe.skipIf(!docker.ok || !bwrap.ok)('detectBackends (corral doctor)', () => {
  it('reports the backends that work here, gVisor among Docker runtimes, and why the others do not', async () => {
    const reports = await detectBackends([
      new DockerSandboxProvider({ docker: new Docker() }),
      new DockerSandboxProvider({ docker: new Docker({ socketPath: '/nonexistent/docker.sock' }) }),
      new BubblewrapSandboxProvider({ dataDir: '/nonexistent-unused', bwrap: 'bwrap' }),
      new BubblewrapSandboxProvider({ dataDir: '/nonexistent-unused', bwrap: 'no-such-bwrap-binary' }),
    ])
    expect(reports[0]).toMatchObject({ backend: 'docker', ok: true, details: { runtimes: expect.arrayContaining(['runc']) } })
    expect(reports[1]).toMatchObject({ backend: 'docker', ok: false, reason: expect.stringContaining('Docker engine is not answering') })
    expect(reports[2]).toMatchObject({ backend: 'bubblewrap', ok: true })
    // What bubblewrap's sandboxes get on this host (Debian 12: bwrap 0.8, x86-64 or aarch64, util-linux).
    expect(reports[2]!.details).toMatchObject({
      seccomp: expect.stringMatching(/^filter in force \((x86_64|aarch64);/),
      user_namespaces: 'nested user namespaces disabled (--disable-userns)',
      keyring: expect.stringMatching(/keyring calls refused|fresh anonymous session keyring/),
      limits: expect.stringMatching(/^(a cgroup of its own|per process)/),
    })
    expect(reports[3]).toMatchObject({ backend: 'bubblewrap', ok: false, reason: expect.stringContaining('not installed') })
    expect(reports.at(-1)).toMatchObject({ backend: 'seatbelt', ok: false, reason: 'macOS only' })
  })
})
