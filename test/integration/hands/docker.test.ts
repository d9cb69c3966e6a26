import Docker from 'dockerode'
import { describe } from 'vitest'
import { DockerSandboxProvider } from '../../../src/main/hands/docker/provider'
import { sandboxContract } from './sandbox.contract'
import { dockerLeftovers, dockerReq, liveContainer } from './support'

const docker = dockerReq()

describe.skipIf(!docker.ok)('DockerSandbox', () => {
  const client = new Docker()
  sandboxContract('docker', {
    provider: () => new DockerSandboxProvider({ docker: client }),
    config: { type: 'cloud', networking: { type: 'unrestricted' }, corral: { pool_size: 0, memory_mb: 512, pids: 256, cpus: 1 } },
    killRunner: async (sandbox) => {
      await liveContainer(sandbox).kill()
    },
    leftovers: (sessionId) => dockerLeftovers(client, sessionId),
  })
})
