import { CorralError, isCorralError } from '../../shared/errors'
import type { ToolCall, ToolOutcome, ToolRecovery, ToolRouter, ToolTarget } from './tool-router'
import type { SessionChanges } from './changes/session-changes'
import { folderMounts, type FolderMount, type FolderRules } from './folders'
import type { MemoryMounts } from './resources/memory-mounts'
import type { FileMounts } from './resources/file-mounts'
import { outputsNote, type SessionOutputs } from './resources/session-outputs'
import type { SkillMounts } from './resources/skill-mounts'
import { packagePlan, type PackagePlan } from './packages/plan'
import type { PackageEgressOpener } from './packages/install'
import { PackageStatusBoard, type PackageStatus } from './packages/status'
import type { Sandbox, SandboxEgressSource, SandboxProvider } from './sandbox'
import { sandboxSettings } from './settings'
import { HOST_TOOLS, parseToolsetInput, SANDBOX_TOOLS, TOOLSET, webFetch } from './toolset'
import { detectBackends, type BackendReport } from './doctor'

/**
 * The input's size as JSON text, roughly (strings by their UTF-8 length), without serialising
 * it: a 100 MB argument is measured by its length in O(1) and refused, never copied on the
 * event loop. Stops counting once past `limit`.
 */
export function inputSize(value: unknown, limit: number): number {
  let total = 0
  const stack: unknown[] = [value]
  while (stack.length && total <= limit) {
    const v = stack.pop()
    if (typeof v === 'string') total += v.length > limit ? v.length : Buffer.byteLength(v) + 2
    else if (Array.isArray(v)) {
      total += 2
      stack.push(...v)
    } else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        total += k.length + 4
        stack.push(x)
      }
    } else total += 8
  }
  return total
}

export interface SandboxEnvironment {
  environmentId: string
  /** The environment's `config` as stored, with Corral's optional `corral` additions. */
  config: Record<string, unknown>
  /** The session's resources (repositories, files) placed in the workspace at provision. */
  resources?: readonly Record<string, unknown>[]
  /** The session's egress through Corral's proxy (opened when the sandbox starts); absent: no egress. */
  egress?: SandboxEgressSource
  /** Opens the egress that installs the environment's `packages` at provision (the vault's packageEgress). */
  packageEgress?: PackageEgressOpener
}

export interface SandboxToolRouterOptions {
  /** Backends in order of preference (e.g. docker, then bubblewrap); the router disposes them in dispose(). */
  providers: readonly SandboxProvider[]
  /** The session's environment and resources; called on the session's first sandbox call and on each web_fetch. */
  resolveEnvironment(sessionId: string): Promise<SandboxEnvironment> | SandboxEnvironment
  /** An environment by id (config and package egress; no session): for `packageStatus` / `preparePackages`. */
  resolveEnvironmentById?(environmentId: string): Promise<Omit<SandboxEnvironment, 'resources' | 'egress'>> | Omit<SandboxEnvironment, 'resources' | 'egress'>
  /** Largest tool input (as JSON) sent into a sandbox; default 8 MiB. */
  maxInputBytes?: number
  /** How long a backend's availability answer is trusted, in ms; default 5 s. */
  availabilityTtlMs?: number
  /** What a session's `host_folder` resources are checked against at provision; absent: such sessions get no sandbox. */
  folderRules?: FolderRules
  /** Records what tool calls change in the sessions' read-write host folders (baseline, pre-images, scans). */
  changes?: SessionChanges
  /** The sessions' memory stores: mounted at provision, synced after each sandbox call and at release. */
  memory?: MemoryMounts
  /** The sessions' `file` resources: one read-only folder bound at /mnt/session/uploads. */
  files?: FileMounts
  /** The sessions' outputs folder (/mnt/session/outputs), collected into session files after each sandbox call and at release. */
  outputs?: SessionOutputs
  /** The sessions' skills: one read-only folder bound at /mnt/skills, placed at provision. */
  skills?: SkillMounts
}

/**
 * Routes toolset calls to the session's Sandbox: created and provisioned lazily on the
 * session's first toolset call (never before), on the environment's backend (config.corral.backend)
 * or the first available one. A sandbox whose runner died is replaced by the sandbox itself on
 * the next call. Failures the model should see come back as `isError` outcomes, never throws.
 */
export class SandboxToolRouter implements ToolRouter {
  private readonly sandboxes = new Map<string, Promise<Sandbox>>()
  /** The egress web_fetch opened for a session (closed at release when no sandbox does it). */
  private readonly fetchEgress = new Map<string, SandboxEgressSource>()
  /** The Docker runtime each session's container was created with (runc, runsc). */
  private readonly runtimes = new Map<string, string>()
  private readonly availability = new Map<SandboxProvider, { at: number; result: Promise<{ ok: boolean; reason?: string }> }>()
  private readonly maxInputBytes: number
  private readonly ttl: number
  /** This process's package installs, by environment. */
  readonly packages = new PackageStatusBoard()

  constructor(private readonly options: SandboxToolRouterOptions) {
    if (options.providers.length === 0) throw new CorralError('api_error', 'SandboxToolRouter needs at least one sandbox provider')
    this.maxInputBytes = options.maxInputBytes ?? 8 * 1024 * 1024
    this.ttl = options.availabilityTtlMs ?? 5000
  }

  /** Whether the call names a toolset tool (the sandbox's, or web_fetch on the host): every other name is not this router's. */
  async serves(call: ToolTarget): Promise<boolean> {
    return SANDBOX_TOOLS.has(call.name) || HOST_TOOLS.has(call.name)
  }

  /**
   * Runs a toolset call: its input is checked against the toolset table first (an unknown,
   * missing or mistyped field is an `isError` outcome naming the field and the rule, and no
   * sandbox is made for it); the sandbox then gets exactly the validated fields. web_fetch runs
   * on the host, through the session's egress proxy.
   */
  async execute(call: ToolCall): Promise<ToolOutcome> {
    if (!SANDBOX_TOOLS.has(call.name) && !HOST_TOOLS.has(call.name)) {
      return { content: `unknown tool "${call.name}": this router runs the toolset tools ${TOOLSET.map((t) => t.name).join(', ')}`, isError: true }
    }
    const size = inputSize(call.input ?? {}, this.maxInputBytes)
    if (size > this.maxInputBytes) {
      return { content: `${call.name}: the input is over the ${this.maxInputBytes}-byte limit (at least ${size} bytes); write large content in parts`, isError: true }
    }
    const parsed = parseToolsetInput(call.name, call.input ?? {})
    if (!parsed.ok) return { content: parsed.message, isError: true }
    if (HOST_TOOLS.has(call.name)) return this.fetchPage(call, String(parsed.input.url))
    let sandbox: Sandbox
    try {
      sandbox = await this.sandboxFor(call.sessionId)
    } catch (err) {
      return { content: `${call.name}: no sandbox for this session: ${isCorralError(err) ? err.message : String(err)}`, isError: true }
    }
    const changes = this.options.changes
    // The change records are the user's safety net, but never a reason to fail the agent's call.
    const tracking = changes ? await changes.beforeCall(call.sessionId, { name: call.name, input: parsed.input }).then(() => undefined, (err: Error) => err) : undefined
    // Memory mounts sync before the call (another session's changes reach this one) and after it
    // (this call's changes reach the stores before its result returns).
    const before = await this.syncMemory(call.sessionId, { content: '', isError: false })
    const r0 = await sandbox.execute({ toolUseId: call.toolUseId, name: call.name, input: parsed.input, signal: call.signal, onOutput: call.onOutput })
    const r1 = await this.collectOutputs(call.sessionId, sandbox, await this.syncMemory(call.sessionId, r0))
    const r = before.content ? { ...r1, content: r1.content + before.content } : r1
    const after = changes && !tracking ? await changes.afterCall(call.sessionId, { toolUseId: call.toolUseId, name: call.name }).then(() => undefined, (err: Error) => err) : tracking
    if (!after) return r
    return { ...r, content: `${r.content}\n[corral: the changes of this call to the mounted folder could not be recorded: ${after.message}]` }
  }

  /**
   * A `file` resource added to or removed from a live session: its copy in the session's uploads
   * folder is made or removed, so a sandbox that binds the folder sees it at once (one provisioned
   * later binds it with the file). A sandbox started without any file keeps no bind to add to.
   */
  async fileResourceChanged(sessionId: string, change: { kind: 'added' | 'deleted'; resource: Record<string, unknown> }): Promise<void> {
    const files = this.options.files
    if (!files || change.resource.type !== 'file') return
    if (change.kind === 'added') await files.add(sessionId, change.resource)
    else await files.remove(sessionId, change.resource)
  }

  /** The session's outputs folder, collected before the call's result returns (a failure is noted, never the call's). */
  private async collectOutputs(sessionId: string, sandbox: Sandbox, r: ToolOutcome): Promise<ToolOutcome> {
    const outputs = this.options.outputs
    if (!outputs) return r
    try {
      const note = outputsNote(await outputs.collect(sessionId, sandbox))
      return note ? { ...r, content: r.content + note } : r
    } catch (err) {
      return { ...r, content: `${r.content}\n[corral: the outputs folder could not be collected after this call: ${isCorralError(err) ? err.message : (err as Error).message}]` }
    }
  }

  /** The call's changes to the session's memory mounts go to their stores before the result returns. */
  private async syncMemory(sessionId: string, r: ToolOutcome): Promise<ToolOutcome> {
    const memory = this.options.memory
    if (!memory?.has(sessionId)) return r
    try {
      await memory.sync(sessionId)
      memory.syncSoon(sessionId)
      return r
    } catch (err) {
      return { ...r, content: `${r.content}\n[corral: the memory stores could not be synced after this call: ${(err as Error).message}]` }
    }
  }

  /**
   * web_fetch: the page fetched host-side through the session's egress (the same proxy decisions
   * as the sandbox's own requests). Text over the environment's output cap is cut to its head and
   * the whole text saved in the sandbox at /workspace/.corral/outputs/<tool_use_id>.txt (written
   * with the toolset's own `write`), named in the result.
   */
  private async fetchPage(call: ToolCall, url: string): Promise<ToolOutcome> {
    const started = Date.now()
    let env: SandboxEnvironment
    let egress
    try {
      env = await this.options.resolveEnvironment(call.sessionId)
      if (env.egress) this.fetchEgress.set(call.sessionId, env.egress)
      egress = await env.egress?.open()
    } catch (err) {
      return { content: `web_fetch: the session's egress could not be opened: ${isCorralError(err) ? err.message : String(err)}`, isError: true }
    }
    const r = await webFetch({ url, egress, signal: call.signal })
    if (!r.ok) return { content: r.message, isError: true, durationMs: Date.now() - started }
    const header = `${r.url} (${r.contentType}, HTTP ${r.status})\n\n`
    const cap = sandboxSettings(env.config).outputCapBytes
    const bytes = Buffer.byteLength(r.text)
    if (bytes + header.length <= cap) return { content: header + r.text, isError: false, durationMs: Date.now() - started }
    const file = `/workspace/.corral/outputs/${call.toolUseId.replace(/[^A-Za-z0-9_.-]/g, '_')}.txt`
    let saved = `the whole text could not be saved in the sandbox`
    try {
      const sandbox = await this.sandboxFor(call.sessionId)
      const w = await sandbox.execute({ toolUseId: `${call.toolUseId}.page`, name: 'write', input: { file_path: file, content: r.text } })
      if (!w.isError) saved = `the whole text is saved in the sandbox at ${file} (read it with offset and limit, or grep it)`
      else saved += ` (${w.content})`
    } catch (err) {
      saved += ` (${isCorralError(err) ? err.message : String(err)})`
    }
    const head = Buffer.from(r.text).subarray(0, Math.max(0, cap - header.length - 400)).toString('utf8').replace(/\uFFFD$/, '')
    return { content: `${header}${head}\n\n[... page truncated: ${bytes} bytes of text, showing the first ${Buffer.byteLength(head)}; ${saved} ...]`, isError: false, durationMs: Date.now() - started }
  }

  async recover(call: Omit<ToolCall, 'signal' | 'onOutput'>): Promise<ToolRecovery> {
    if (!SANDBOX_TOOLS.has(call.name)) return { state: 'unknown' }
    try {
      const sandbox = await this.sandboxFor(call.sessionId)
      return (await sandbox.recover?.(call.toolUseId)) ?? { state: 'unknown' }
    } catch {
      return { state: 'unknown' }
    }
  }

  /**
   * Disposes the session's sandbox; with removeWorkspace, its workspace too. A session with no
   * sandbox in this process (a restarted host, a deleted session) is released by its id on every
   * available backend (SandboxProvider.release), without asking for its environment: its session
   * row may already be gone.
   */
  async release(sessionId: string, options?: { removeWorkspace?: boolean }): Promise<void> {
    await this.options.memory?.release(sessionId)
    await this.options.files?.release(sessionId)
    await this.options.skills?.release(sessionId)
    const pending = this.sandboxes.get(sessionId)
    this.sandboxes.delete(sessionId)
    const fetched = this.fetchEgress.get(sessionId)
    this.fetchEgress.delete(sessionId)
    // A session that only fetched pages has an open egress and no sandbox to close it.
    if (!pending && fetched) await fetched.release().catch(() => undefined)
    this.runtimes.delete(sessionId)
    if (pending) {
      const sandbox = await pending.catch(() => undefined)
      // What a background process wrote since the last call is kept before the sandbox goes.
      if (sandbox && this.options.outputs && !options?.removeWorkspace) await this.options.outputs.collect(sessionId, sandbox).catch(() => undefined)
      this.options.outputs?.forget(sessionId)
      await sandbox?.dispose(options)
      return
    }
    if (!options?.removeWorkspace) return
    await Promise.all(
      this.options.providers.map(async (p) => {
        if (!(await this.isAvailable(p)).ok) return
        await p.release(sessionId, options).catch(() => undefined)
      }),
    )
  }

  /**
   * Start-up: removes what an earlier run left on every backend (containers of sessions not in
   * `keepSessionIds`, unclaimed warm containers). Kept sessions' containers are re-attached on
   * their next call. Returns how many were removed.
   */
  async sweep(keepSessionIds: ReadonlySet<string>): Promise<number> {
    let removed = 0
    for (const p of this.options.providers) {
      if (!p.sweep || !(await this.isAvailable(p)).ok) continue
      removed += await p.sweep(keepSessionIds).catch(() => 0)
    }
    return removed
  }

  /**
   * Shutdown: releases every session's sandbox (workspaces stay) and disposes the providers it
   * was given (their warm pools go too). The router owns its providers from construction on.
   */
  async dispose(): Promise<void> {
    await Promise.all([...this.sandboxes.keys()].map((id) => this.release(id)))
    this.options.memory?.dispose()
    await Promise.all(this.options.providers.map((p) => p.dispose().catch(() => undefined)))
  }

  private sandboxFor(sessionId: string): Promise<Sandbox> {
    let pending = this.sandboxes.get(sessionId)
    if (!pending) {
      pending = this.createSandbox(sessionId, true)
      this.sandboxes.set(sessionId, pending)
      // A failed choice (backend down) is forgotten, so the next call tries again.
      pending.catch(() => {
        if (this.sandboxes.get(sessionId) === pending) this.sandboxes.delete(sessionId)
      })
    }
    return pending
  }

  /**
   * The backend a session's sandbox runs on, once its first toolset call provisioned one (null
   * before): for the session header ("Docker (gVisor)", "bubblewrap").
   */
  async sessionBackend(sessionId: string): Promise<{ backend: string; runtime: string | null; label: string } | null> {
    const pending = this.sandboxes.get(sessionId)
    if (!pending) return null
    const sandbox = await pending.catch(() => undefined)
    if (!sandbox) return null
    const runtime = this.runtimes.get(sessionId) ?? null
    const label = sandbox.backend === 'docker' ? `Docker (${runtime === 'runsc' ? 'gVisor' : runtime ?? 'runc'})` : sandbox.backend
    return { backend: sandbox.backend, runtime, label }
  }

  /**
   * Why a call of `toolName` in this session cannot get a sandbox now (no backend can serve the
   * session's environment), or undefined when it can, or the tool needs none. The harness asks
   * before putting an `ask` call to the user, so nobody approves a call that cannot run.
   */
  async unavailable(sessionId: string, toolName: string): Promise<string | undefined> {
    if (!SANDBOX_TOOLS.has(toolName) || this.sandboxes.has(sessionId)) return undefined
    try {
      const env = await this.options.resolveEnvironment(sessionId)
      if (env.config.type === 'self_hosted') return undefined
      await this.chooseProvider(sandboxSettings(env.config).backend, true)
      return undefined
    } catch (err) {
      return (err as Error).message
    }
  }

  /** Why an environment's `config.corral.image` cannot be used here, or undefined (see DockerSandboxProvider.imageProblem). */
  async imageProblem(image: string): Promise<string | undefined> {
    const docker = this.options.providers.find((p) => p.backend === 'docker') as { imageProblem?: (image: string) => Promise<string | undefined> } | undefined
    return docker?.imageProblem?.(image)
  }

  /** Every backend's availability on this machine (the app's sandbox banner, doctor). */
  backends(): Promise<BackendReport[]> {
    return detectBackends(this.options.providers)
  }

  private async createSandbox(sessionId: string, checkAvailable: boolean): Promise<Sandbox> {
    const env = await this.options.resolveEnvironment(sessionId)
    const settings = sandboxSettings(env.config)
    const provider = await this.chooseProvider(settings.backend, checkAvailable)
    if (provider.backend === 'docker') this.runtimes.set(sessionId, settings.runtime ?? 'runc')
    const hostFolders = this.foldersOf(env.resources)
    const memory = (await this.options.memory?.prepare(sessionId, env.resources)) ?? []
    const uploads = (await this.options.files?.prepare(sessionId, env.resources)) ?? []
    const skills = (await this.options.skills?.prepare(sessionId)) ?? []
    const binds = [...memory, ...uploads, ...skills]
    const folders = hostFolders || binds.length ? [...(hostFolders ?? []), ...binds] : undefined
    return provider.create({
      sessionId,
      environmentId: env.environmentId,
      config: env.config,
      // files bound from the uploads folder are not placed again by the runner
      resources: uploads.length ? env.resources?.filter((r) => r.type !== 'file') : env.resources,
      folders,
      egress: env.egress,
      packageEgress: env.packageEgress,
      packageProgress: this.packages.reporter(env.environmentId, provider.backend),
    })
  }

  /** The session's host folders, resolved and checked again at provision (throws naming resources[i]). */
  private foldersOf(resources: readonly Record<string, unknown>[] | undefined): FolderMount[] | undefined {
    if (!resources?.some((r) => r.type === 'host_folder')) return undefined
    if (!this.options.folderRules) throw new CorralError('sandbox_error', 'this Corral mounts no host folders (its sandbox router has no folder rules)')
    return folderMounts(resources, this.options.folderRules)
  }

  /**
   * Where an environment's packages stand on the backend its sandboxes would use: an install of
   * this process (installing, or how the last one ended) for the current package list, else
   * whether the backend has them cached (ready) or not (missing).
   */
  async packageStatus(environmentId: string): Promise<PackageStatus> {
    const { env, plan, provider } = await this.packageTarget(environmentId)
    if (!plan || !provider) return { environment_id: environmentId, state: 'none', progress: [] }
    const known = this.packages.get(environmentId)
    const current = known && known.summary === plan.summary && known.backend === provider.backend ? known : undefined
    if (current?.state === 'installing') return current
    const ready = await provider.packages?.ready({ environmentId, config: env.config })
    if (ready) return { ...(current ?? { progress: [] }), environment_id: environmentId, state: 'ready', backend: provider.backend, summary: plan.summary, error: undefined }
    if (current?.state === 'failed') return current
    return { environment_id: environmentId, state: 'missing', backend: provider.backend, summary: plan.summary, progress: [] }
  }

  /**
   * Starts installing an environment's packages now (what its first sandbox would otherwise do)
   * and returns at once with the status (`installing`, or `ready` when cached). A failure ends up
   * in the status, not here; a bad config or no backend throws.
   */
  async preparePackages(environmentId: string): Promise<PackageStatus> {
    const { env, plan, provider } = await this.packageTarget(environmentId)
    if (!plan || !provider) return { environment_id: environmentId, state: 'none', progress: [] }
    if (!provider.packages) throw new CorralError('sandbox_error', `the ${provider.backend} backend cannot install packages ahead of a session`)
    const started = provider.packages.prepare({ environmentId, config: env.config, packageEgress: env.packageEgress, packageProgress: this.packages.reporter(environmentId, provider.backend) })
    started.catch(() => undefined) // the status carries the failure
    // Give a cached environment a moment to answer `ready` rather than a flash of `installing`.
    await Promise.race([started.catch(() => undefined), new Promise((r) => setTimeout(r, 50))])
    return this.packageStatus(environmentId)
  }

  /** The environment, its install plan, and (when it has one) the backend its sandboxes would use. */
  private async packageTarget(environmentId: string): Promise<{ env: Omit<SandboxEnvironment, 'resources' | 'egress'>; plan?: PackagePlan; provider?: SandboxProvider }> {
    if (!this.options.resolveEnvironmentById) throw new CorralError('api_error', 'this sandbox router cannot look environments up by id')
    const env = await this.options.resolveEnvironmentById(environmentId)
    if (env.config.type === 'self_hosted') return { env }
    const plan = packagePlan(env.config)
    if (!plan) return { env }
    return { env, plan, provider: await this.chooseProvider(sandboxSettings(env.config).backend, true) }
  }

  private async chooseProvider(wanted: string | undefined, checkAvailable: boolean): Promise<SandboxProvider> {
    const candidates = wanted ? this.options.providers.filter((p) => p.backend === wanted) : this.options.providers
    if (candidates.length === 0) throw new CorralError('sandbox_error', `the environment asks for the ${wanted} backend, which this Corral does not have (${this.options.providers.map((p) => p.backend).join(', ')})`)
    if (!checkAvailable) return candidates[0]
    const reasons: string[] = []
    for (const p of candidates) {
      const a = await this.isAvailable(p)
      if (a.ok) return p
      reasons.push(`${p.backend}: ${a.reason ?? 'not available'}`)
    }
    throw new CorralError('sandbox_error', `no sandbox backend is available (${reasons.join('; ')})`)
  }

  private isAvailable(p: SandboxProvider): Promise<{ ok: boolean; reason?: string }> {
    const cached = this.availability.get(p)
    if (cached && Date.now() - cached.at < this.ttl) return cached.result
    const result = p.available().catch((err: Error) => ({ ok: false, reason: err.message }))
    this.availability.set(p, { at: Date.now(), result })
    return result
  }
}
