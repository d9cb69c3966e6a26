import { createHash } from 'node:crypto'
import { rm } from 'node:fs/promises'
import { PassThrough, type Writable } from 'node:stream'
import type Docker from 'dockerode'
import { CorralError } from '../../../shared/errors'
import type { FolderMount } from '../folders'
import type { LiveRunner, RunnerDeath } from '../runner/runner-sandbox'
import { startRunner } from '../runner/start'
import type { SandboxEgress, SandboxProvisionParams } from '../sandbox'
import { type SandboxSettings, STATE_MOUNT, WORKSPACE } from '../settings'
import { containerSpec, MANAGED, type EgressMount } from './container-spec'

/**
 * The containers and volumes of Docker sandboxes: one container per session running the runner
 * as its main process, reached over the container's attached stdio. `--network none`, all
 * capabilities dropped, no-new-privileges, uid 1000, read-only root with a tmpfs /tmp,
 * pids/memory/CPU limits, `--init`, labelled `corral.session=<id>`. The workspace is a named
 * volume that a replacement container mounts again.
 *
 * Names: container `corral-sess-<key>`, workspace volume `corral-ws-<key>`; a workspace taken
 * from the warm pool is a `corral-pool-*` volume named by a `corral-ref-<key>` marker volume
 * (label `corral.workspace`), so the mapping lives in Docker and survives a restart.
 */
export const SESSION_LABEL = 'corral.session'
export const POOL_LABEL = 'corral.pool'
export const REF_LABEL = 'corral.workspace'

/** A session id as a Docker name part: itself when safe, else a hash. */
export function sessionKey(sessionId: string): string {
  return /^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$/.test(sessionId) ? sessionId : 'h' + createHash('sha256').update(sessionId).digest('hex').slice(0, 32)
}

export const containerName = (sessionId: string) => `corral-sess-${sessionKey(sessionId)}`
const workspaceVolume = (sessionId: string) => `corral-ws-${sessionKey(sessionId)}`
const refVolume = (sessionId: string) => `corral-ref-${sessionKey(sessionId)}`

export interface DockerLive extends LiveRunner {
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

/** The HTTP status of a Docker API failure (404: no such object). */
export const statusOf = (err: unknown) => (err as { statusCode?: number }).statusCode

/** A Docker failure as CorralError sandbox_error with a sentence a user can act on. */
export function dockerError(err: unknown, doing: string): CorralError {
  if (err instanceof CorralError) return err
  const message = (err as { json?: { message?: string } }).json?.message ?? (err as Error).message ?? String(err)
  if (isUnreachable(err)) {
    return new CorralError('sandbox_error', `the Docker engine is not answering (${(err as { code?: string }).code}: ${(err as Error).message}); start the Docker engine (sudo systemctl start docker, or open Docker Desktop) and sandboxes work again as soon as it answers`, { cause: err })
  }
  return new CorralError('sandbox_error', `docker ${doing} failed: ${message}`, { cause: err })
}

export interface DockerContainersOptions {
  docker: Docker
  /** Which Corral owns the containers (label `corral.managed=<scope>`). */
  scope: string
  /** The image whose runner is baked in (any other image gets the runner bind-mounted); asked at each launch. */
  defaultImage: () => string
  log: (message: string) => void
}

export interface LaunchParams {
  image: string
  settings: SandboxSettings
  volume: string
  name?: string
  labels: Record<string, string>
  volumeLabels: Record<string, string>
  stdinOnce?: boolean
  egress?: EgressMount
  folders?: readonly FolderMount[]
}

/** Where `acquire` may take a started container from (an environment's warm pool). */
export interface WarmSource {
  /** A started, answering warm container, or undefined when none is ready. */
  claim(): DockerLive | undefined
  /** Starts warm containers until the pool is full again. */
  fill(): void
}

export interface AcquireParams {
  params: SandboxProvisionParams
  settings: SandboxSettings
  image: string
  /** The environment's warm pool, when the session may take a warm container. */
  warm?: WarmSource
}

/** A runner `acquire` found or started; `claim` finishes the bookkeeping of a pool hit in the background. */
export interface Acquired {
  live: DockerLive
  claim?: Promise<void>
}

/** The session's egress, opened at most once whichever path `acquire` takes (in `dir` when the first open names one). */
class EgressOnce {
  private opened: Promise<SandboxEgress | undefined> | undefined

  constructor(private readonly source: SandboxProvisionParams['egress']) {}

  get wanted(): boolean {
    return this.source !== undefined
  }

  open(dir?: string): Promise<SandboxEgress | undefined> {
    this.opened ??= Promise.resolve(this.source?.open(dir))
    return this.opened
  }
}

/** The containers and volumes of one Corral's Docker sandboxes (one label scope on one engine). */
export class DockerContainers {
  constructor(private readonly o: DockerContainersOptions) {}

  /** Creates a container on `volume`, attaches to its stdio, starts it and waits for the runner. */
  async launch(p: LaunchParams): Promise<DockerLive> {
    const docker = this.o.docker
    let container: Docker.Container
    try {
      await docker.createVolume({ Name: p.volume, Labels: { [MANAGED]: this.o.scope, ...p.volumeLabels } })
      container = await docker.createContainer(containerSpec({ ...p, labels: { [MANAGED]: this.o.scope, ...p.labels }, bindRunner: p.image !== this.o.defaultImage() }))
    } catch (err) {
      if (statusOf(err) === 404) throw new CorralError('sandbox_error', `the sandbox image ${p.image} is not there: build it with npm run sandbox:image (or name an image that exists)`, { cause: err })
      throw dockerError(err, 'create')
    }
    try {
      return await this.attach(container, { volume: p.volume, start: true })
    } catch (err) {
      await container.remove({ force: true }).catch(() => undefined)
      throw err
    }
  }

  /** Attaches to a container's stdio (starting it when `start`) and waits for its runner's hello. */
  async attach(container: Docker.Container, p: { volume: string; start: boolean }): Promise<DockerLive> {
    let stream: NodeJS.ReadWriteStream
    try {
      stream = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as NodeJS.ReadWriteStream
    } catch (err) {
      throw dockerError(err, 'attach')
    }
    const out = new PassThrough()
    const err = new PassThrough()
    this.o.docker.modem.demuxStream(stream, out, err)
    stream.on('end', () => out.end())
    stream.on('close', () => out.end())
    stream.on('error', (e) => out.destroy(e))
    const { connection, stderr } = await startRunner({
      input: stream as unknown as Writable,
      output: out,
      stderr: err,
      start: p.start
        ? async (connection) => {
            try {
              await container.start()
            } catch (e) {
              connection.close('the container did not start')
              throw dockerError(e, 'start')
            }
          }
        : undefined,
      helloTimeoutMs: 20_000,
      failure: 'the sandbox runner did not start',
      stderrLabel: 'its stderr',
    })
    return { container, connection, volume: p.volume, fresh: true, stderr }
  }

  /**
   * The session's runner: its running container re-attached (a restarted host), else a warm
   * container when the session has no workspace yet, else a new container on its workspace.
   */
  async acquire(p: AcquireParams): Promise<Acquired> {
    const egress = new EgressOnce(p.params.egress)
    const found = await this.reattach(p.params, egress)
    if (found.live) return { live: found.live }
    const volume = found.volume ?? (await this.existingVolume(p.params.sessionId))
    if (!volume && p.warm) {
      const claimed = await this.claimWarm({ warm: p.warm, sessionId: p.params.sessionId, egress })
      if (claimed) return claimed
    }
    const live = await this.launchCold(p, { volume, egress })
    p.warm?.fill()
    return { live }
  }

  /**
   * The session's container when it still runs with the session's folders and egress directory
   * (re-attached, not fresh); otherwise the container is removed and its workspace volume named.
   */
  private async reattach(params: SandboxProvisionParams, egress: EgressOnce): Promise<{ live?: DockerLive; volume?: string }> {
    const docker = this.o.docker
    const name = containerName(params.sessionId)
    let info: Docker.ContainerInspectInfo
    try {
      info = await docker.getContainer(name).inspect()
    } catch (err) {
      if (statusOf(err) !== 404) throw dockerError(err, 'inspect')
      return {}
    }
    // Named before anything can fail: a container gone meanwhile (404) still leaves its workspace.
    const volume = info.Mounts.find((m) => m.Type === 'volume' && (m.Destination === WORKSPACE || m.Destination === STATE_MOUNT))?.Name
    try {
      // The session's folders are bound for the container's life: one bound elsewhere (the folder moved) is replaced.
      const binds = new Set(info.Mounts.filter((m) => m.Type === 'bind').map((m) => `${m.Source}\0${m.Destination}\0${m.RW ? 'rw' : 'ro'}`))
      const foldersMatch = (params.folders ?? []).every((f) => binds.has(`${f.source}\0${f.target}\0${f.readOnly ? 'ro' : 'rw'}`))
      if (info.State.Running && foldersMatch) {
        // A container mounts its egress directory for life: one from an earlier process's proxy is replaced.
        const e = egress.wanted ? await egress.open() : undefined
        const mounted = e ? info.Mounts.find((m) => m.Destination === e.sandboxDir)?.Source : undefined
        if (!e || mounted === e.dir) {
          try {
            const live = await this.attach(docker.getContainer(info.Id), { volume: volume ?? '', start: false })
            live.fresh = false
            live.egress = e
            return { live }
          } catch (err) {
            this.o.log(`re-attaching ${name} failed, replacing it: ${(err as Error).message}`)
          }
        } else this.o.log(`${name} mounts another process's egress directory; replacing it (the workspace stays)`)
      }
      await docker.getContainer(info.Id).remove({ force: true })
      return { volume }
    } catch (err) {
      if (statusOf(err) !== 404) throw dockerError(err, 'inspect')
      return { volume }
    }
  }

  /**
   * A warm container for a session without a workspace, its egress opened in the directory the
   * container already mounts; undefined (the container discarded) when the egress opened elsewhere.
   */
  private async claimWarm(p: { warm: WarmSource; sessionId: string; egress: EgressOnce }): Promise<Acquired | undefined> {
    const { warm, sessionId, egress } = p
    const live = warm.claim()
    if (!live) return undefined
    const e = await egress.open(live.reservedEgress?.dir)
    if (e && e.dir !== live.reservedEgress?.dir) {
      await this.discard(live, { removeVolume: true })
      return undefined
    }
    live.egress = e
    live.reservedEgress = undefined
    const claim = (async () => {
      await live.container.rename({ name: containerName(sessionId) })
      await this.o.docker.createVolume({ Name: refVolume(sessionId), Labels: { [MANAGED]: this.o.scope, [SESSION_LABEL]: sessionId, [REF_LABEL]: live.volume } })
    })()
    return { live, claim }
  }

  /** A new container for the session, on its workspace volume (`volume`, else a new one). */
  private async launchCold(p: AcquireParams, found: { volume?: string; egress: EgressOnce }): Promise<DockerLive> {
    const { sessionId, environmentId } = p.params
    const e = await found.egress.open()
    const live = await this.launch({
      image: p.image,
      settings: p.settings,
      volume: found.volume ?? workspaceVolume(sessionId),
      name: containerName(sessionId),
      labels: { [SESSION_LABEL]: sessionId, 'corral.environment': environmentId },
      volumeLabels: { [SESSION_LABEL]: sessionId },
      egress: e,
      folders: p.params.folders,
    })
    live.egress = e
    return live
  }

  /** The session's workspace volume, if it has one already. */
  private async existingVolume(sessionId: string): Promise<string | undefined> {
    const docker = this.o.docker
    try {
      const ref = (await docker.getVolume(refVolume(sessionId)).inspect()) as { Labels?: Record<string, string> }
      if (ref.Labels?.[REF_LABEL]) return ref.Labels[REF_LABEL]
    } catch (err) {
      if (statusOf(err) !== 404) throw dockerError(err, 'volume inspect')
    }
    try {
      await docker.getVolume(workspaceVolume(sessionId)).inspect()
      return workspaceVolume(sessionId)
    } catch (err) {
      if (statusOf(err) !== 404) throw dockerError(err, 'volume inspect')
      return undefined
    }
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

  /** Removes a runner's container (and, with `removeVolume`, its volume); a warm one's unopened egress directory goes too. */
  async discard(live: DockerLive, p: { removeVolume: boolean }): Promise<void> {
    live.connection.close('discarded')
    // A warm container's egress directory that no session opened.
    if (live.reservedEgress) await rm(live.reservedEgress.dir, { recursive: true, force: true })
    await live.container.remove({ force: true }).catch((err) => {
      if (statusOf(err) !== 404) this.o.log(`removing ${live.container.id}: ${(err as Error).message}`)
    })
    if (p.removeVolume) await this.o.docker.getVolume(live.volume).remove().catch(() => undefined)
  }

  /** Removes the session's container(s) (`live`'s too); with `removeWorkspace`, its workspace volume too. */
  async release(sessionId: string, p: { live?: DockerLive; removeWorkspace: boolean }): Promise<void> {
    const docker = this.o.docker
    const ids = new Set<string>()
    if (p.live) ids.add(p.live.container.id)
    try {
      ids.add((await docker.getContainer(containerName(sessionId)).inspect()).Id)
    } catch (err) {
      if (statusOf(err) !== 404) throw dockerError(err, 'inspect')
    }
    try {
      const labelled = await docker.listContainers({ all: true, filters: { label: [`${SESSION_LABEL}=${sessionId}`] } })
      for (const c of labelled) ids.add(c.Id)
    } catch (err) {
      throw dockerError(err, 'list')
    }
    await Promise.all(
      [...ids].map((id) =>
        docker
          .getContainer(id)
          .remove({ force: true })
          .catch((err) => {
            if (statusOf(err) !== 404) throw dockerError(err, 'remove')
          }),
      ),
    )
    if (!p.removeWorkspace) return
    const volume = (await this.existingVolume(sessionId)) ?? p.live?.volume
    for (const v of [volume, refVolume(sessionId)]) {
      if (!v) continue
      await docker
        .getVolume(v)
        .remove()
        .catch((err) => {
          if (statusOf(err) !== 404) throw dockerError(err, 'volume remove')
        })
    }
  }
}
