import Docker from 'dockerode'
import { defaultImage } from '../paths'
import { packagePlan } from '../packages/plan'
import { InstallFlights } from '../packages/install'
import { type RunnerDeath, RunnerSandbox } from '../runner/runner-sandbox'
import type { EnvironmentPackages, EnvironmentPackagesParams, PackageProgress, SandboxProvider, SandboxProvisionParams } from '../sandbox'
import { type SandboxSettings, sandboxSettings } from '../settings'
import { MANAGED, type EgressMount } from './container-spec'
import { DockerContainers, type DockerLive, dockerError, POOL_LABEL, REF_LABEL, statusOf, containerName } from './containers'
import { imageExists, INSTALL_NAME_PREFIX, packageImage, packageImageName, sweepPackageImages } from './package-image'
import { WarmPools } from './warm-pool'

/**
 * Docker sandboxes: the provider (availability, packages, sweep) and the session's sandbox, over
 * the containers of containers.ts and the warm pools of warm-pool.ts. A small warm pool per
 * environment makes a first call cheap.
 */
export interface DockerSandboxProviderOptions {
  /** A dockerode client; default: the local engine (DOCKER_HOST or /var/run/docker.sock). */
  docker?: Docker
  /** Image used when an environment names none; default: corral-sandbox:<recipe hash>. */
  image?: string
  /** Progress and background failures (pool refills, sweeps). */
  log?: (message: string) => void
  /**
   * Which Corral owns the containers (label `corral.managed=<scope>`): a sweep removes only its
   * own scope's leftovers, so two Corrals (or test files) on one engine leave each other alone.
   * Default `default`.
   */
  scope?: string
  /**
   * A directory for a warm container's egress, mounted before its session is known and opened by
   * the session's egress when the container is claimed (the vault's `EgressProxy.reserveDir`).
   * Without it, a session with egress never takes a warm container.
   */
  reserveEgressDir?: () => Promise<EgressMount>
}


/** What a DockerSandbox works with: the provider's containers and pools, and its image for the session. */
export interface DockerSandboxOptions {
  params: SandboxProvisionParams
  settings: SandboxSettings
  containers: DockerContainers
  pools: WarmPools
  /** The image the session's container starts from (the environment's package image when it lists packages; `progress`: how an install of them goes). */
  image: (progress: PackageProgress) => Promise<string>
  log: (message: string) => void
}

export class DockerSandbox extends RunnerSandbox<DockerLive> {
  readonly backend = 'docker'
  /** Background claim bookkeeping (rename + marker volume) that must finish before a replace or dispose. */
  private pendingClaim: Promise<void> | undefined
  private readonly o: DockerSandboxOptions

  constructor(o: DockerSandboxOptions) {
    super(o.params, o.settings)
    this.o = o
  }

  protected override describeStart(): string {
    return 'a Docker container'
  }

  protected async start(): Promise<DockerLive> {
    await this.pendingClaim
    const image = await this.o.image(this.packageSteps(this.params.packageProgress))
    // A warm container has no host folders bound (mounts are fixed at create).
    const warm = this.params.folders?.length ? undefined : this.o.pools.for({ environmentId: this.params.environmentId, settings: this.settings, image })
    const { live, claim } = await this.o.containers.acquire({ params: this.params, settings: this.settings, image, warm })
    if (claim) this.pendingClaim = claim.catch((err) => this.o.log(`claiming a warm container for ${this.params.sessionId}: ${(err as Error).message}`))
    return live
  }

  protected async diagnose(live: DockerLive): Promise<RunnerDeath> {
    return this.o.containers.diagnose(live)
  }

  protected async discardRunner(live: DockerLive): Promise<void> {
    // The container goes (a re-attach would find the same runner); its workspace volume stays.
    await this.o.containers.discard(live, { removeVolume: false })
  }

  protected async stop(live: DockerLive | undefined, removeWorkspace: boolean): Promise<void> {
    await this.pendingClaim
    await this.o.containers.release(this.params.sessionId, { live, removeWorkspace })
  }
}

export class DockerSandboxProvider implements SandboxProvider {
  readonly backend = 'docker'
  private readonly docker: Docker
  private readonly defaultImageName: string | undefined
  private readonly log: (message: string) => void
  private readonly scope: string
  private readonly containers: DockerContainers
  private readonly pools: WarmPools
  private readonly packageFlights = new InstallFlights()

  constructor(options: DockerSandboxProviderOptions = {}) {
    this.docker = options.docker ?? new Docker()
    this.scope = options.scope ?? 'default'
    this.defaultImageName = options.image
    this.log = options.log ?? (() => {})
    this.containers = new DockerContainers({ docker: this.docker, scope: this.scope, defaultImage: () => this.defaultImageName ?? defaultImage(), log: this.log })
    this.pools = new WarmPools({ containers: this.containers, reserveEgressDir: options.reserveEgressDir, log: this.log })
  }

  imageFor(settings: SandboxSettings): string {
    return settings.image ?? this.defaultImageName ?? defaultImage()
  }

  async available(): Promise<{ ok: boolean; reason?: string }> {
    try {
      await Promise.race([this.docker.ping(), new Promise((_, reject) => setTimeout(() => reject(Object.assign(new Error('no answer within 3 s'), { code: 'ECONNREFUSED' })), 3000))])
    } catch (err) {
      return { ok: false, reason: dockerError(err, 'ping').message }
    }
    const image = this.defaultImageName ?? defaultImage()
    try {
      await this.docker.getImage(image).inspect()
    } catch (err) {
      if (statusOf(err) === 404) return { ok: false, reason: `the Docker engine answers but the sandbox image ${image} is not built: run npm run sandbox:image` }
      return { ok: false, reason: dockerError(err, 'image inspect').message }
    }
    return { ok: true }
  }

  /**
   * Why an environment's `config.corral.image` cannot start a sandbox here (not in the local
   * engine: Corral pulls nothing), or undefined when it is present, or when no Docker engine
   * answers (then nothing can be checked; bubblewrap ignores the field).
   */
  async imageProblem(image: string): Promise<string | undefined> {
    try {
      await this.docker.getImage(image).inspect()
      return undefined
    } catch (err) {
      if (statusOf(err) === 404) return `the image ${image} is not in the local Docker engine (Corral pulls nothing: docker pull or build it first, or leave the field empty for the default image)`
      return undefined
    }
  }

  /** Runtimes the engine knows (e.g. runc, runsc). */
  async runtimes(): Promise<string[]> {
    const info = (await this.docker.info()) as { Runtimes?: Record<string, unknown> }
    return Object.keys(info.Runtimes ?? {})
  }

  create(params: SandboxProvisionParams): DockerSandbox {
    const settings = sandboxSettings(params.config)
    const base = this.imageFor(settings)
    return new DockerSandbox({ params, settings, containers: this.containers, pools: this.pools, image: (progress) => this.sandboxImage({ ...params, packageProgress: progress }, base), log: this.log })
  }

  /**
   * The image a sandbox of these params starts from: `base`, or, when the environment lists
   * packages, `base` with them installed (built once per environment and cached: package-image.ts).
   */
  private async sandboxImage(params: EnvironmentPackagesParams, base: string): Promise<string> {
    const plan = packagePlan(params.config)
    if (!plan) return base
    const settings = sandboxSettings(params.config)
    return packageImage(
      { docker: this.docker, labels: { [MANAGED]: this.scope }, attach: (c) => this.containers.attach(c, { volume: '', start: true }), log: this.log },
      { base, plan, settings, environmentId: params.environmentId, openEgress: params.packageEgress, progress: params.packageProgress, flights: this.packageFlights },
    )
  }

  /** An environment's packages as an image of its own, built from the sandbox image (package-image.ts). */
  readonly packages: EnvironmentPackages = {
    ready: async (params) => {
      const plan = packagePlan(params.config)
      if (!plan) return undefined
      const settings = sandboxSettings(params.config)
      return imageExists(this.docker, (await packageImageName(this.docker, { base: this.imageFor(settings), plan })).image)
    },
    prepare: async (params) => {
      await this.sandboxImage(params, this.imageFor(sandboxSettings(params.config)))
    },
  }

  /** A session's containers (found by name and label, not by a Sandbox of this process) and, with removeWorkspace, its volume. */
  async release(sessionId: string, options?: { removeWorkspace?: boolean }): Promise<void> {
    await this.containers.release(sessionId, { removeWorkspace: options?.removeWorkspace === true })
  }

  /** Fills the environment's warm pool and waits (up to `timeoutMs`) until it is full; returns its size. */
  async warm(params: { environmentId: string; config: Record<string, unknown> }, timeoutMs = 30_000): Promise<number> {
    const settings = sandboxSettings(params.config)
    return this.pools.for({ environmentId: params.environmentId, settings, image: this.imageFor(settings) })?.waitReady(timeoutMs) ?? 0
  }

  /**
   * Removes containers an earlier run left: session containers whose session is not in
   * `keepSessionIds` (kept ones are re-attached on their next call) and unclaimed warm ones.
   * Workspaces (volumes) of sessions stay; unclaimed pool volumes go. Returns containers removed.
   */
  async sweep(keepSessionIds: ReadonlySet<string>): Promise<number> {
    const keepNames = new Set([...keepSessionIds].map((id) => `/${containerName(id)}`))
    let removed = 0
    let containers: Docker.ContainerInfo[]
    try {
      containers = await this.docker.listContainers({ all: true, filters: { label: [`${MANAGED}=${this.scope}`] } })
    } catch (err) {
      throw dockerError(err, 'list')
    }
    for (const c of containers) {
      if (c.Names.some((n) => keepNames.has(n)) || this.pools.owns(c.Id)) continue
      // A package install of this process's still running.
      if (c.Names.some((n) => n.startsWith(`/${INSTALL_NAME_PREFIX}`)) && this.packageFlights.size > 0) continue
      await this.docker
        .getContainer(c.Id)
        .remove({ force: true })
        .then(() => removed++)
        .catch(() => undefined)
    }
    try {
      const { Volumes: refs } = await this.docker.listVolumes({ filters: { label: [REF_LABEL, `${MANAGED}=${this.scope}`] } })
      const claimed = new Set((refs ?? []).map((v) => v.Labels?.[REF_LABEL]))
      const { Volumes: pooled } = await this.docker.listVolumes({ filters: { label: [POOL_LABEL, `${MANAGED}=${this.scope}`] } })
      for (const v of pooled ?? []) if (!claimed.has(v.Name)) await this.docker.getVolume(v.Name).remove().catch(() => undefined)
    } catch (err) {
      this.log(`sweeping pool volumes: ${(err as Error).message}`)
    }
    try {
      for (const image of await sweepPackageImages(this.docker, this.log)) this.log(`removed ${image}: its base image has moved on`)
    } catch (err) {
      this.log(`sweeping environment images: ${(err as Error).message}`)
    }
    return removed
  }

  async dispose(): Promise<void> {
    await this.pools.dispose()
  }
}
