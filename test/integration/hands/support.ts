import { execFileSync } from 'node:child_process'
import Docker from 'dockerode'
import { dockerScopeFor } from '../../../src/main/engine-hands'
import { defaultImage } from '../../../src/main/hands/paths'
import { findVmImage } from '../../../src/main/hands/vm/image'
import { bubblewrapProbe, dockerProbe, requirement } from '../../support/requirements'
import type { Sandbox } from '../../../src/main/hands/sandbox'

/** Docker and the sandbox image (CI builds it with `npm run sandbox:image` before the tests). */
export const dockerImageProbe = (): string | undefined => {
  const noSocket = dockerProbe()
  if (noSocket) return noSocket
  try {
    execFileSync('docker', ['image', 'inspect', defaultImage()], { stdio: 'ignore', timeout: 10_000 })
    return undefined
  } catch {
    return `the sandbox image ${defaultImage()} is not built (run npm run sandbox:image)`
  }
}

export const runscProbe = (): string | undefined => {
  try {
    const out = execFileSync('docker', ['info', '--format', '{{json .Runtimes}}'], { encoding: 'utf8', timeout: 10_000 })
    return out.includes('runsc') ? undefined : 'dockerd has no runsc runtime (install runsc and run scripts/start-dockerd.sh)'
  } catch (err) {
    return `docker info failed: ${(err as Error).message}`
  }
}

export const dockerReq = () => requirement('docker sandbox image', dockerImageProbe)
export const bwrapReq = () => requirement('bubblewrap', bubblewrapProbe)

/** Containers and volumes Docker still holds for a session. */
export async function dockerLeftovers(docker: Docker, sessionId: string): Promise<string[]> {
  const containers = await docker.listContainers({ all: true, filters: { label: [`corral.session=${sessionId}`] } })
  const named = await docker.listContainers({ all: true, filters: { name: [`corral-sess-${sessionId}`] } })
  const { Volumes } = await docker.listVolumes()
  const vols = (Volumes ?? []).filter((v) => v.Name.includes(sessionId) || v.Labels?.['corral.session'] === sessionId)
  return [...new Set([...containers, ...named].map((c) => `container ${c.Names[0]}`)), ...vols.map((v) => `volume ${v.Name}`)]
}

/** Removes every container an engine on `dataDir` made (its Docker label scope), for a test's afterAll. */
export async function removeScopeContainers(docker: Docker, dataDir: string): Promise<void> {
  for (const c of await docker.listContainers({ all: true, filters: { label: [`corral.managed=${dockerScopeFor(dataDir)}`] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {})
}

/** The container behind a live DockerSandbox (test access to a private field). */
export function liveContainer(sandbox: Sandbox): Docker.Container {
  const live = (sandbox as unknown as { live?: { container: Docker.Container } }).live
  if (!live) throw new Error('the sandbox has no live container')
  return live.container
}

/** qemu and the VM guest image (CI builds it with `npm run vm:image` after the sandbox image). */
export const vmProbe = (): string | undefined => {
  try {
    execFileSync(process.env.CORRAL_QEMU || 'qemu-system-x86_64', ['--version'], { stdio: 'ignore', timeout: 10_000 })
  } catch {
    return 'qemu-system-x86_64 is not installed (apt-get install --no-install-recommends qemu-system-x86 qemu-utils busybox-static e2fsprogs cpio)'
  }
  const found = findVmImage()
  return 'missing' in found ? found.missing : undefined
}

export const vmReq = () => requirement('vm sandbox (qemu and the guest image)', vmProbe)
