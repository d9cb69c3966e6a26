import type Docker from 'dockerode'
import { CorralError } from '../../../shared/errors'
import { packageCacheKey, type PackagePlan } from '../packages/plan'
import { installScript } from '../packages/script'
import { installOnce, runInstall, type InstallFlights, type PackageEgressOpener } from '../packages/install'
import type { PackageProgress } from '../packages/status'
import type { RunnerConnection } from '../runner/connection'
import { runnerEnv, type SandboxSettings, WORKSPACE } from '../settings'
import { containerSpec } from './container-spec'

/** Docker's repository for environment images; the tag is the plan's cache key. */
export const PACKAGE_IMAGE_REPO = 'corral-env'
/** On an environment image (and so on every container started from it): its cache key. */
export const PACKAGES_LABEL = 'corral.packages'
/**
 * A setup container's name prefix (a name, not a label: a committed image keeps its container's
 * labels, and every sandbox started from it would carry one).
 */
export const INSTALL_NAME_PREFIX = 'corral-pkg-'
export const PACKAGES_BASE_LABEL = 'corral.packages.base'
/** The base image's name when built: an image whose name now points elsewhere (or nowhere) is stale. */
export const PACKAGES_BASE_REF_LABEL = 'corral.packages.base-ref'

export interface PackageImageDeps {
  docker: Docker
  /** Labels every container Corral makes carries (`corral.managed=<scope>`). */
  labels: Record<string, string>
  /** Starts a created container and returns the connection to its runner (the provider's attach). */
  attach(container: Docker.Container): Promise<{ connection: RunnerConnection }>
  log(message: string): void
}

/**
 * The image an environment's sandboxes start from: `base` with the plan installed, built once
 * (in a root setup container without a network, through a registries-only egress) and committed
 * as `corral-env:<key>`; later calls find it and return at once. The key covers the base image's
 * id, the packages and the mirrors, so a new base or a changed list builds a new image.
 */
export async function packageImage(
  deps: PackageImageDeps,
  p: {
    base: string
    plan: PackagePlan
    settings: SandboxSettings
    environmentId: string
    openEgress?: PackageEgressOpener
    progress?: PackageProgress
    flights: InstallFlights
  },
): Promise<string> {
  const { image, key, baseId } = await packageImageName(deps.docker, { base: p.base, plan: p.plan })
  return installOnce({
    flights: p.flights,
    key,
    result: image,
    cached: () => imageExists(deps.docker, image),
    plan: p.plan,
    environmentId: p.environmentId,
    openEgress: p.openEgress,
    progress: p.progress,
    install: (openEgress, progress) => build(deps, { ...p, baseId, key, image, openEgress, progress }),
  })
}

/** The environment image's name (`corral-env:<key>`) for a plan on `base`. Throws when `base` is not there. */
export async function packageImageName(docker: Docker, p: { base: string; plan: PackagePlan }): Promise<{ image: string; key: string; baseId: string }> {
  const { base, plan } = p
  let baseId: string
  try {
    baseId = ((await docker.getImage(base).inspect()) as { Id: string }).Id
  } catch (err) {
    throw new CorralError('sandbox_error', `the sandbox image ${base} is not there: build it with npm run sandbox:image (or name an image that exists)`, { cause: err })
  }
  const key = packageCacheKey(plan, baseId)
  return { image: `${PACKAGE_IMAGE_REPO}:${key}`, key, baseId }
}

export async function imageExists(docker: Docker, image: string): Promise<boolean> {
  try {
    await docker.getImage(image).inspect()
    return true
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return false
    throw new CorralError('sandbox_error', `docker image inspect ${image} failed: ${(err as Error).message}`, { cause: err })
  }
}

async function build(
  deps: PackageImageDeps,
  p: { base: string; baseId: string; key: string; image: string; plan: PackagePlan; settings: SandboxSettings; environmentId: string; openEgress: PackageEgressOpener; progress: PackageProgress },
): Promise<void> {
  const started = Date.now()
  const say = (m: string) => deps.log(`packages for ${p.environmentId} (${p.image}): ${m}`)
  say(`installing ${p.plan.summary}`)
  const egress = await p.openEgress(p.plan.mirrorHosts)
  let container: Docker.Container | undefined
  try {
    // A sandbox's container, changed where installing needs it: root (apt, the system prefixes)
    // with only the capabilities package scripts use, a writable root, no workspace volume
    // (tmpfs is never committed). Still no network: the proxy's socket is the way out, and the
    // proxy variables reach only the install's shell (never the committed image's config).
    const spec = containerSpec({ image: p.base, settings: p.settings, volume: '', labels: deps.labels, bindRunner: false, stdinOnce: true })
    const env = { ...runnerEnv(p.settings), HOME: '/root', LANG: 'C.UTF-8', PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' }
    container = await deps.docker.createContainer({
      ...spec,
      name: `${INSTALL_NAME_PREFIX}${p.key}-${Date.now().toString(36)}`,
      User: '0:0',
      Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
      HostConfig: {
        ...spec.HostConfig,
        CapAdd: ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'SETUID', 'SETGID', 'KILL', 'SETFCAP'],
        ReadonlyRootfs: false,
        PidsLimit: Math.max(p.settings.pids, 1024),
        Tmpfs: { [WORKSPACE]: 'rw,exec,size=256m,mode=0755', '/tmp': 'rw,exec,size=1g,mode=1777' },
        Mounts: [{ Type: 'bind', Source: egress.dir, Target: egress.sandboxDir, ReadOnly: true }],
      },
    })
    const { connection } = await deps.attach(container)
    await connection.egress({ env: egress.env, socket: egress.bridge.socket, port: egress.bridge.port })
    try {
      await runInstall(connection, {
        script: installScript(p.plan),
        idPrefix: `packages-${p.key}`,
        environmentId: p.environmentId,
        progress: (line) => {
          say(line)
          p.progress({ kind: 'line', line })
        },
      })
    } finally {
      connection.close('install finished')
    }
    await container.kill().catch(() => undefined)
    await container.wait().catch(() => undefined)
    await container.commit({
      repo: PACKAGE_IMAGE_REPO,
      tag: p.key,
      comment: `Corral: ${p.plan.summary}`,
      // The committed config must be a sandbox's, not the setup container's.
      changes: ['USER 1000:1000', 'ENV HOME=/home/corral', `LABEL ${PACKAGES_LABEL}=${p.key} ${PACKAGES_BASE_LABEL}=${p.baseId} ${PACKAGES_BASE_REF_LABEL}=${JSON.stringify(p.base)}`].join('\n'),
    })
    say(`built in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  } catch (err) {
    say(`failed after ${((Date.now() - started) / 1000).toFixed(1)} s: ${(err as Error).message.split('\n')[0]}`)
    throw err
  } finally {
    await container?.remove({ force: true }).catch(() => undefined)
    await egress.close().catch(() => undefined)
  }
}

/**
 * Removes environment images whose base has moved on (its name now names another image, or none):
 * no new sandbox starts from them. An image a container still uses stays (Docker refuses).
 * Returns the images removed.
 */
export async function sweepPackageImages(docker: Docker, log: (m: string) => void): Promise<string[]> {
  const removed: string[] = []
  const images = await docker.listImages({ filters: { label: [PACKAGES_LABEL] } })
  for (const img of images) {
    const ref = img.Labels?.[PACKAGES_BASE_REF_LABEL]
    const baseId = img.Labels?.[PACKAGES_BASE_LABEL]
    if (!ref || !baseId) continue
    let current: string | undefined
    try {
      current = ((await docker.getImage(ref).inspect()) as { Id: string }).Id
    } catch {
      current = undefined
    }
    if (current === baseId) continue
    const name = img.RepoTags?.find((t) => t.startsWith(`${PACKAGE_IMAGE_REPO}:`)) ?? img.Id
    try {
      await docker.getImage(name).remove()
      removed.push(name)
    } catch (err) {
      log(`keeping ${name} (built on an older ${ref}): ${(err as Error).message}`)
    }
  }
  return removed
}
