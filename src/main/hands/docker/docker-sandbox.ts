import { createHash } from 'node:crypto'
import { rm } from 'node:fs/promises'
import { PassThrough, type Writable } from 'node:stream'
import Docker from 'dockerode'
import { CorralError } from '../../../shared/errors'
import { defaultImage } from '../paths'
import { packagePlan } from '../packages/plan'
import { InstallFlights } from '../packages/install'
import { RunnerConnection } from '../runner/connection'
import { type LiveRunner, type RunnerDeath, RunnerSandbox } from '../runner/runner-sandbox'
import type { SandboxEgress, SandboxProvider, SandboxProvisionParams } from '../sandbox'
import type { FolderMount } from '../folders'
import { type SandboxSettings, sandboxSettings, STATE_MOUNT, WORKSPACE } from '../settings'
import { containerSpec, MANAGED, type EgressMount } from './container-spec'
import { imageExists, INSTALL_NAME_PREFIX, packageImage, packageImageName, sweepPackageImages } from './package-image'

/**
 * Docker sandboxes: one container per session running the runner as its main process, reached
 * over the container's attached stdio. `--network none`, all capabilities dropped,
 * no-new-privileges, uid 1000, read-only root with a tmpfs /tmp, pids/memory/CPU limits,
 * `--init`, labelled `corral.session=<id>`. The workspace is a named volume that a replacement
 * container mounts again. A small warm pool per environment makes a first call cheap.
 *
 * Names: container `corral-sess-<key>`, workspace volume `corral-ws-<key>`; a workspace taken
 * from the pool is a `corral-pool-*` volume named by a `corral-ref-<key>` marker volume
 * (label `corral.workspace`), so the mapping lives in Docker and survives a restart.
 */
const SESSION = 'corral.session'
const POOL = 'corral.pool'
const REF = 'corral.workspace'

export { containerSpec, type EgressMount } from './container-spec'

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


/** A session id as a Docker name part: itself when safe, else a hash. */
export function sessionKey(sessionId: string): string {
  return /^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$/.test(sessionId) ? sessionId : 'h' + createHash('sha256').update(sessionId).digest('hex').slice(0, 32)
}

export const containerName = (sessionId: string) => `corral-sess-${sessionKey(sessionId)}`
const workspaceVolume = (sessionId: string) => `corral-ws-${sessionKey(sessionId)}`
const refVolume = (sessionId: string) => `corral-ref-${sessionKey(sessionId)}`

interface DockerLive extends LiveRunner {
  container: Docker.Container
  volume: string
  stderr: () => string
  /** A warm container's reserved egress directory (mounted, not yet opened by a session). */
  reservedEgress?: EgressMount
}

function isUnreachable(err: unknown): boolean {
  const code = (err as { code?: string }).code
  return code === 'ENOENT' || code === 'ECONNREFUSED' || code === 'ECONNRESET' || code === 'EPIPE' || code === 'EACCES'
}

const statusOf = (err: unknown) => (err as { statusCode?: number }).statusCode

/** A Docker failure as CorralError sandbox_error with a sentence a user can act on. */
export function dockerError(err: unknown, doing: string): CorralError {
  if (err instanceof CorralError) return err
  const message = (err as { json?: { message?: string } }).json?.message ?? (err as Error).message ?? String(err)
  if (isUnreachable(err)) {
    return new CorralError('sandbox_error', `the Docker engine is not answering (${(err as { code?: string }).code}: ${(err as Error).message}); start the Docker engine (sudo systemctl start docker, or open Docker Desktop) and sandboxes work again as soon as it answers`, { cause: err })
  }
  return new CorralError('sandbox_error', `docker ${doing} failed: ${message}`, { cause: err })
}

/** One environment's warm containers, started and answering, waiting for a session. */
class WarmPool {
  private readonly ready: DockerLive[] = []
  private readonly inflight = new Set<Promise<void>>()
  private disposed = false

  constructor(
    private readonly provider: DockerSandboxProvider,
    private readonly image: string,
    private readonly settings: SandboxSettings,
    private readonly environmentId: string,
    private readonly key: string,
  ) {}

  get size(): number {
    return this.ready.length
  }

  owns(containerId: string): boolean {
    return this.ready.some((l) => l.container.id === containerId)
  }

  fill(): void {
    while (!this.disposed && this.ready.length + this.inflight.size < this.settings.poolSize) {
      const volume = `corral-pool-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`
      const launching: Promise<void> = this.provider
        .reserveEgress()
        // stdinOnce: a warm container whose host dies without disposing the pool stops by itself
        // (its runner sees EOF); the next sweep removes it.
        .then((egress) =>
          this.provider
            .launch({ image: this.image, settings: this.settings, volume, labels: { [POOL]: this.key, 'corral.environment': this.environmentId }, volumeLabels: { [POOL]: this.key }, stdinOnce: true, egress })
            .then((live) => Object.assign(live, { reservedEgress: egress }))
            .catch(async (err) => {
              if (egress) await rm(egress.dir, { recursive: true, force: true })
              throw err
            }),
        )
        .then((live) => {
          if (this.disposed) return this.provider.discard(live, true)
          live.connection.onClosed(() => {
            const i = this.ready.indexOf(live)
            if (i >= 0) this.ready.splice(i, 1)
          })
          this.ready.push(live)
        })
        .catch((err) => this.provider.log(`warm pool ${this.key}: ${(err as Error).message}`))
        .finally(() => {
          this.inflight.delete(launching)
        })
      this.inflight.add(launching)
    }
  }

  claim(): DockerLive | undefined {
    let live: DockerLive | undefined
    while ((live = this.ready.shift()) && !live.connection.open) void this.provider.discard(live, true)
    this.fill()
    return live
  }

  /** Resolves once the pool holds its target size (or after `timeoutMs`). */
  async waitReady(timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs
    this.fill()
    while (this.ready.length < this.settings.poolSize && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    return this.ready.length
  }

  /** Removes the warm containers, including those still starting (so a quick exit leaks none). */
  async dispose(): Promise<void> {
    this.disposed = true
    await Promise.all([...this.inflight])
    const all = this.ready.splice(0)
    await Promise.all(all.map((l) => this.provider.discard(l, true)))
  }
}

export class DockerSandbox extends RunnerSandbox<DockerLive> {
  readonly backend = 'docker'
  /** Background claim bookkeeping (rename + marker volume) that must finish before a replace or dispose. */
  private pendingClaim: Promise<void> | undefined

  constructor(
    private readonly provider: DockerSandboxProvider,
    params: SandboxProvisionParams,
    settings: SandboxSettings,
    private readonly image: string,
  ) {
    super(params, settings)
  }

  protected async start(): Promise<DockerLive> {
    await this.pendingClaim
    const image = await this.provider.sandboxImage(this.params, this.settings, this.image)
    const { live, claim } = await this.provider.acquire({ params: this.params, settings: this.settings, image })
    if (claim) this.pendingClaim = claim.catch((err) => this.provider.log(`claiming a warm container for ${this.params.sessionId}: ${(err as Error).message}`))
    return live
  }

  protected async diagnose(live: DockerLive): Promise<RunnerDeath> {
    return this.provider.diagnose(live)
  }

  protected async discardRunner(live: DockerLive): Promise<void> {
    // The container goes (a re-attach would find the same runner); its workspace volume stays.
    await this.provider.discard(live, false)
  }

  protected async stop(live: DockerLive | undefined, removeWorkspace: boolean): Promise<void> {
    await this.pendingClaim
    await this.provider.release(this.params.sessionId, live, removeWorkspace)
  }
}

export class DockerSandboxProvider implements SandboxProvider {
  readonly backend = 'docker'
  readonly docker: Docker
  private readonly defaultImageName: string | undefined
  private readonly pools = new Map<string, WarmPool>()
  private readonly packageFlights = new InstallFlights()
  readonly log: (message: string) => void
  readonly scope: string

  constructor(private readonly options: DockerSandboxProviderOptions = {}) {
    this.docker = options.docker ?? new Docker()
    this.scope = options.scope ?? 'default'
    this.defaultImageName = options.image
    this.log = options.log ?? (() => {})
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
    return new DockerSandbox(this, params, settings, this.imageFor(settings))
  }

  /**
   * The image a sandbox of these params starts from: `base`, or, when the environment lists
   * packages, `base` with them installed (built once per environment and cached: package-image.ts).
   */
  async sandboxImage(params: SandboxProvisionParams, settings: SandboxSettings, base: string): Promise<string> {
    const plan = packagePlan(params.config)
    if (!plan) return base
    return packageImage(
      { docker: this.docker, labels: { [MANAGED]: this.scope }, attach: (c) => this.attach(c, '', true), log: this.log },
      { base, plan, settings, environmentId: params.environmentId, openEgress: params.packageEgress, progress: params.packageProgress, flights: this.packageFlights },
    )
  }

  async packagesReady(params: SandboxProvisionParams): Promise<boolean | undefined> {
    const plan = packagePlan(params.config)
    if (!plan) return undefined
    const settings = sandboxSettings(params.config)
    return imageExists(this.docker, (await packageImageName(this.docker, this.imageFor(settings), plan)).image)
  }

  async preparePackages(params: SandboxProvisionParams): Promise<void> {
    const settings = sandboxSettings(params.config)
    await this.sandboxImage(params, settings, this.imageFor(settings))
  }

  /** A reserved egress directory for a warm container, or none (no reserver, or it failed: logged). */
  async reserveEgress(): Promise<EgressMount | undefined> {
    if (!this.options.reserveEgressDir) return undefined
    try {
      return await this.options.reserveEgressDir()
    } catch (err) {
      this.log(`warm pool: no egress directory (${(err as Error).message}); sessions with egress start cold`)
      return undefined
    }
  }

  /** Fills the environment's warm pool and waits (up to `timeoutMs`) until it is full; returns its size. */
  async warm(params: { environmentId: string; config: Record<string, unknown> }, timeoutMs = 30_000): Promise<number> {
    const settings = sandboxSettings(params.config)
    return this.poolFor(params.environmentId, settings, this.imageFor(settings))?.waitReady(timeoutMs) ?? 0
  }

  private poolFor(environmentId: string, settings: SandboxSettings, image: string): WarmPool | undefined {
    if (settings.poolSize <= 0) return undefined
    const { backend: _b, poolSize: _p, ...shape } = settings
    const key = createHash('sha256').update(JSON.stringify({ environmentId, image, shape })).digest('hex').slice(0, 16)
    let pool = this.pools.get(key)
    if (!pool) {
      pool = new WarmPool(this, image, settings, environmentId, key)
      this.pools.set(key, pool)
    }
    return pool
  }

  /** Creates a container on `volume`, attaches to its stdio, starts it and waits for the runner. */
  async launch(p: { image: string; settings: SandboxSettings; volume: string; name?: string; labels: Record<string, string>; volumeLabels: Record<string, string>; stdinOnce?: boolean; egress?: EgressMount; folders?: readonly FolderMount[] }): Promise<DockerLive> {
    let container: Docker.Container
    try {
      await this.docker.createVolume({ Name: p.volume, Labels: { [MANAGED]: this.scope, ...p.volumeLabels } })
      container = await this.docker.createContainer(containerSpec({ ...p, labels: { [MANAGED]: this.scope, ...p.labels }, bindRunner: p.image !== (this.defaultImageName ?? defaultImage()) }))
    } catch (err) {
      if (statusOf(err) === 404) throw new CorralError('sandbox_error', `the sandbox image ${p.image} is not there: build it with npm run sandbox:image (or name an image that exists)`, { cause: err })
      throw dockerError(err, 'create')
    }
    try {
      return await this.attach(container, p.volume, true)
    } catch (err) {
      await container.remove({ force: true }).catch(() => undefined)
      throw err
    }
  }

  private async attach(container: Docker.Container, volume: string, start: boolean): Promise<DockerLive> {
    let stream: NodeJS.ReadWriteStream
    try {
      stream = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as NodeJS.ReadWriteStream
    } catch (err) {
      throw dockerError(err, 'attach')
    }
    const out = new PassThrough()
    const err = new PassThrough()
    let stderrTail = ''
    err.on('data', (d: Buffer) => {
      stderrTail = (stderrTail + d.toString()).slice(-2000)
    })
    this.docker.modem.demuxStream(stream, out, err)
    stream.on('end', () => out.end())
    stream.on('close', () => out.end())
    stream.on('error', (e) => out.destroy(e))
    const connection = new RunnerConnection({ input: stream as unknown as Writable, output: out })
    if (start) {
      try {
        await container.start()
      } catch (e) {
        connection.close('the container did not start')
        throw dockerError(e, 'start')
      }
    }
    try {
      await connection.hello(20_000)
    } catch (e) {
      connection.close('no hello')
      throw new CorralError('sandbox_error', `the sandbox runner did not start: ${(e as Error).message}${stderrTail ? `; its stderr: ${stderrTail.trim()}` : ''}`, { cause: e })
    }
    return { container, connection, volume, fresh: true, stderr: () => stderrTail }
  }

  /** The session's workspace volume, if it has one already. */
  private async existingVolume(sessionId: string): Promise<string | undefined> {
    try {
      const ref = (await this.docker.getVolume(refVolume(sessionId)).inspect()) as { Labels?: Record<string, string> }
      if (ref.Labels?.[REF]) return ref.Labels[REF]
    } catch (err) {
      if (statusOf(err) !== 404) throw dockerError(err, 'volume inspect')
    }
    try {
      await this.docker.getVolume(workspaceVolume(sessionId)).inspect()
      return workspaceVolume(sessionId)
    } catch (err) {
      if (statusOf(err) !== 404) throw dockerError(err, 'volume inspect')
      return undefined
    }
  }

  /**
   * The session's runner: its running container re-attached (a restarted host), else a warm
   * container when the session has no workspace yet, else a new container on its workspace.
   * `claim` finishes the bookkeeping of a pool hit in the background.
   */
  async acquire(p: { params: SandboxProvisionParams; settings: SandboxSettings; image: string }): Promise<{ live: DockerLive; claim?: Promise<void> }> {
    const { sessionId, environmentId } = p.params
    const name = containerName(sessionId)
    let volume: string | undefined
    let egress: SandboxEgress | undefined
    let egressOpened = false
    const openEgress = async (dir?: string) => {
      if (!egressOpened) egress = await p.params.egress?.open(dir)
      egressOpened = true
      return egress
    }
    try {
      const info = await this.docker.getContainer(name).inspect()
      volume = info.Mounts.find((m) => m.Type === 'volume' && (m.Destination === WORKSPACE || m.Destination === STATE_MOUNT))?.Name
      // The session's folders are bound for the container's life: one bound elsewhere (the folder moved) is replaced.
      const binds = new Set(info.Mounts.filter((m) => m.Type === 'bind').map((m) => `${m.Source}\0${m.Destination}\0${m.RW ? 'rw' : 'ro'}`))
      const foldersMatch = (p.params.folders ?? []).every((f) => binds.has(`${f.source}\0${f.target}\0${f.readOnly ? 'ro' : 'rw'}`))
      if (info.State.Running && foldersMatch) {
        // A container mounts its egress directory for life: one from an earlier process's proxy is replaced.
        const e = p.params.egress ? await openEgress() : undefined
        const mounted = e ? info.Mounts.find((m) => m.Destination === e.sandboxDir)?.Source : undefined
        if (!e || mounted === e.dir) {
          try {
            const live = await this.attach(this.docker.getContainer(info.Id), volume ?? '', false)
            live.fresh = false
            live.egress = e
            return { live }
          } catch (err) {
            this.log(`re-attaching ${name} failed, replacing it: ${(err as Error).message}`)
          }
        } else this.log(`${name} mounts another process's egress directory; replacing it (the workspace stays)`)
      }
      await this.docker.getContainer(info.Id).remove({ force: true })
    } catch (err) {
      if (statusOf(err) !== 404) throw dockerError(err, 'inspect')
    }
    volume ??= await this.existingVolume(sessionId)
    // A warm container has no host folders bound (mounts are fixed at create).
    const pool = p.params.folders?.length ? undefined : this.poolFor(environmentId, p.settings, p.image)
    if (!volume && pool) {
      const live = pool.claim()
      if (live) {
        // The session's egress opens in the directory the warm container already mounts.
        const e = await openEgress(live.reservedEgress?.dir)
        if (!e || e.dir === live.reservedEgress?.dir) {
          live.egress = e
          live.reservedEgress = undefined
          const claim = (async () => {
            await live.container.rename({ name })
            await this.docker.createVolume({ Name: refVolume(sessionId), Labels: { [MANAGED]: this.scope, [SESSION]: sessionId, [REF]: live.volume } })
          })()
          return { live, claim }
        }
        await this.discard(live, true)
      }
    }
    const e = await openEgress()
    const live = await this.launch({
      image: p.image,
      settings: p.settings,
      volume: volume ?? workspaceVolume(sessionId),
      name,
      labels: { [SESSION]: sessionId, 'corral.environment': environmentId },
      volumeLabels: { [SESSION]: sessionId },
      egress: e,
      folders: p.params.folders,
    })
    live.egress = e
    pool?.fill()
    return { live }
  }

  /** Why a runner's connection closed: waits (≤ 1.5 s) for the container to stop, then inspects it. */
  async diagnose(live: DockerLive): Promise<RunnerDeath> {
    try {
      await Promise.race([live.container.wait(), new Promise((r) => setTimeout(r, 1500))])
      const info = await live.container.inspect()
      const st = info.State
      if (st.Running) return { message: 'the sandbox runner stopped answering (its container still runs; it will be replaced)' }
      const oom = st.OOMKilled ? ', killed: out of memory (OOM)' : st.ExitCode === 137 ? ', killed (SIGKILL)' : ''
      return { message: `the sandbox container ${st.Status} (exit ${st.ExitCode}${oom})`, exitCode: st.ExitCode }
    } catch (err) {
      if (statusOf(err) === 404) return { message: 'the sandbox container was removed' }
      return { message: dockerError(err, 'inspect').message }
    }
  }

  async discard(live: DockerLive, removeVolume: boolean): Promise<void> {
    live.connection.close('discarded')
    // A warm container's egress directory that no session opened.
    if (live.reservedEgress) await rm(live.reservedEgress.dir, { recursive: true, force: true })
    await live.container.remove({ force: true }).catch((err) => {
      if (statusOf(err) !== 404) this.log(`removing ${live.container.id}: ${(err as Error).message}`)
    })
    if (removeVolume) await this.docker.getVolume(live.volume).remove().catch(() => undefined)
  }

  /** Removes the session's container(s); with `removeWorkspace`, its workspace volume too. */
  async release(sessionId: string, live: DockerLive | undefined, removeWorkspace: boolean): Promise<void> {
    const ids = new Set<string>()
    if (live) ids.add(live.container.id)
    try {
      ids.add((await this.docker.getContainer(containerName(sessionId)).inspect()).Id)
    } catch (err) {
      if (statusOf(err) !== 404) throw dockerError(err, 'inspect')
    }
    try {
      const labelled = await this.docker.listContainers({ all: true, filters: { label: [`${SESSION}=${sessionId}`] } })
      for (const c of labelled) ids.add(c.Id)
    } catch (err) {
      throw dockerError(err, 'list')
    }
    await Promise.all(
      [...ids].map((id) =>
        this.docker
          .getContainer(id)
          .remove({ force: true })
          .catch((err) => {
            if (statusOf(err) !== 404) throw dockerError(err, 'remove')
          }),
      ),
    )
    if (!removeWorkspace) return
    const volume = (await this.existingVolume(sessionId)) ?? live?.volume
    for (const v of [volume, refVolume(sessionId)]) {
      if (!v) continue
      await this.docker
        .getVolume(v)
        .remove()
        .catch((err) => {
          if (statusOf(err) !== 404) throw dockerError(err, 'volume remove')
        })
    }
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
    const ownPool = (id: string) => [...this.pools.values()].some((p) => p.owns(id))
    for (const c of containers) {
      if (c.Names.some((n) => keepNames.has(n)) || ownPool(c.Id)) continue
      // A package install of this process's still running.
      if (c.Names.some((n) => n.startsWith(`/${INSTALL_NAME_PREFIX}`)) && this.packageFlights.size > 0) continue
      await this.docker
        .getContainer(c.Id)
        .remove({ force: true })
        .then(() => removed++)
        .catch(() => undefined)
    }
    try {
      const { Volumes: refs } = await this.docker.listVolumes({ filters: { label: [REF, `${MANAGED}=${this.scope}`] } })
      const claimed = new Set((refs ?? []).map((v) => v.Labels?.[REF]))
      const { Volumes: pooled } = await this.docker.listVolumes({ filters: { label: [POOL, `${MANAGED}=${this.scope}`] } })
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
    const pools = [...this.pools.values()]
    this.pools.clear()
    await Promise.all(pools.map((p) => p.dispose()))
  }
}
