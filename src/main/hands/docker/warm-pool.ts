import { createHash } from 'node:crypto'
import { rm } from 'node:fs/promises'
import type { SandboxSettings } from '../settings'
import type { EgressMount } from './container-spec'
import { type DockerContainers, type DockerLive, POOL_LABEL, type WarmSource } from './containers'

/**
 * Warm containers: per environment (and image and container shape) a few started, answering
 * containers waiting for a session, so a first call skips the cold start. They are made by
 * containers.ts like any other; a session's `acquire` claims one (containers.ts renames it and
 * names its volume). A warm container whose host dies without disposing the pool stops by itself.
 */
export interface WarmPoolsOptions {
  containers: DockerContainers
  /** Reserves a directory for a warm container's egress (see DockerSandboxProviderOptions.reserveEgressDir). */
  reserveEgressDir?: () => Promise<EgressMount>
  log: (message: string) => void
}

interface WarmPoolOptions extends WarmPoolsOptions {
  image: string
  settings: SandboxSettings
  environmentId: string
  key: string
}

/** One environment's warm containers, started and answering, waiting for a session. */
class WarmPool implements WarmSource {
  private readonly ready: DockerLive[] = []
  private readonly inflight = new Set<Promise<void>>()
  private disposed = false

  constructor(private readonly o: WarmPoolOptions) {}

  get size(): number {
    return this.ready.length
  }

  owns(containerId: string): boolean {
    return this.ready.some((l) => l.container.id === containerId)
  }

  fill(): void {
    while (!this.disposed && this.ready.length + this.inflight.size < this.o.settings.poolSize) {
      const volume = `corral-pool-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`
      const launching: Promise<void> = this.reserveEgress()
        // stdinOnce: a warm container whose host dies without disposing the pool stops by itself
        // (its runner sees EOF); the next sweep removes it.
        .then((egress) =>
          this.o.containers
            .launch({ image: this.o.image, settings: this.o.settings, volume, labels: { [POOL_LABEL]: this.o.key, 'corral.environment': this.o.environmentId }, volumeLabels: { [POOL_LABEL]: this.o.key }, stdinOnce: true, egress })
            .then((live) => Object.assign(live, { reservedEgress: egress }))
            .catch(async (err) => {
              if (egress) await rm(egress.dir, { recursive: true, force: true })
              throw err
            }),
        )
        .then((live) => {
          if (this.disposed) return this.o.containers.discard(live, { removeVolume: true })
          live.connection.onClosed(() => {
            const i = this.ready.indexOf(live)
            if (i >= 0) this.ready.splice(i, 1)
          })
          this.ready.push(live)
        })
        .catch((err) => this.o.log(`warm pool ${this.o.key}: ${(err as Error).message}`))
        .finally(() => {
          this.inflight.delete(launching)
        })
      this.inflight.add(launching)
    }
  }

  claim(): DockerLive | undefined {
    let live: DockerLive | undefined
    while ((live = this.ready.shift()) && !live.connection.open) void this.o.containers.discard(live, { removeVolume: true })
    this.fill()
    return live
  }

  /** Resolves once the pool holds its target size (or after `timeoutMs`). */
  async waitReady(timeoutMs: number): Promise<number> {
    const deadline = Date.now() + timeoutMs
    this.fill()
    while (this.ready.length < this.o.settings.poolSize && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    return this.ready.length
  }

  /** Removes the warm containers, including those still starting (so a quick exit leaks none). */
  async dispose(): Promise<void> {
    this.disposed = true
    await Promise.all([...this.inflight])
    const all = this.ready.splice(0)
    await Promise.all(all.map((l) => this.o.containers.discard(l, { removeVolume: true })))
  }

  /** A reserved egress directory for a warm container, or none (no reserver, or it failed: logged). */
  private async reserveEgress(): Promise<EgressMount | undefined> {
    if (!this.o.reserveEgressDir) return undefined
    try {
      return await this.o.reserveEgressDir()
    } catch (err) {
      this.o.log(`warm pool: no egress directory (${(err as Error).message}); sessions with egress start cold`)
      return undefined
    }
  }
}

export type { WarmPool }

/** The warm pools of one provider, by environment, image and container shape. */
export class WarmPools {
  private readonly pools = new Map<string, WarmPool>()

  constructor(private readonly o: WarmPoolsOptions) {}

  /** The pool sandboxes of this environment, image and settings share; undefined when `pool_size` is 0. */
  for(p: { environmentId: string; settings: SandboxSettings; image: string }): WarmPool | undefined {
    if (p.settings.poolSize <= 0) return undefined
    const { backend: _b, poolSize: _p, ...shape } = p.settings
    const key = createHash('sha256').update(JSON.stringify({ environmentId: p.environmentId, image: p.image, shape })).digest('hex').slice(0, 16)
    let pool = this.pools.get(key)
    if (!pool) {
      pool = new WarmPool({ ...this.o, image: p.image, settings: p.settings, environmentId: p.environmentId, key })
      this.pools.set(key, pool)
    }
    return pool
  }

  /** Whether a container is one of these pools' ready warm containers (a sweep leaves it). */
  owns(containerId: string): boolean {
    return [...this.pools.values()].some((p) => p.owns(containerId))
  }

  async dispose(): Promise<void> {
    const pools = [...this.pools.values()]
    this.pools.clear()
    await Promise.all(pools.map((p) => p.dispose()))
  }
}
