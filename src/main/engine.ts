import { join } from 'node:path'
import type { Hono } from 'hono'
import type { SecretSink } from './session/vault-store'
import { openStoresAt, upgradeDatabase, type Stores, type UpgradeProgress } from './session/stores'
import { PreviewBus, type ApiServices, type CorralSettingsView, type ModelCheckView, type SandboxStatusView } from './api/services'
import { probeModel } from './harness/model-probe'
import { createApiApp, listen, type ListeningServer } from './api/server'
import { DEFAULT_MAX_FILE_BYTES, dreamTimeLimitMs, dreamTimeLimitProblem, readSettings, resolveApiToken, writeSettings, type Settings } from './config'
import { runDoctor } from './doctor'
import type { z } from 'zod'
import type { corralModelTestSchema, corralSettingsUpdateSchema } from '../shared/api/schemas'
import { CorralError } from '../shared/errors'
import { advisorTierTable } from '../shared/api/advisor-tiers'
import { keychainAccount, keychainFix } from './vault/keychain'
import { Brains, type BrainsOptions } from './orchestrator/brains'
import { DreamRunner } from './orchestrator/dream-runner'
import { WebhookService, type WebhookServiceOptions } from './orchestrator/webhooks'
import { DeploymentScheduler, type SchedulerClock } from './orchestrator/deployment-scheduler'
import type { ToolRouter } from './hands/tool-router'
import type { HandsRouter } from './hands/router'
import type { ModelClient } from './harness/model-client'
import { Vault, type VaultOptions } from './vault/vault'
import { McpToolRouter } from './hands/mcp/router'
import { validateMcpOAuthCredential } from './hands/mcp/client'
import { sessionMcpServers } from './hands/mcp/servers'
import type { Keychain } from './vault/keychain'
import type { SafeStorageLike } from './vault/safe-storage-keychain'
import { KeychainResourceSecrets, KeychainSecretSink, openKeychain, resolveEngineSecrets } from './vault/vault-services'
import { defaultFolderRules, defaultSandboxRouter, engineToolRouter } from './engine-hands'
import { folderMounts, SessionChanges, SandboxImageBuild, defaultImage } from './hands'
import type { SandboxToolRouter } from './hands'
import { credentialRefreshLock } from './hands/mcp/refresh-lock'

export interface EngineConfig {
  dataDir: string
  /** API token; resolved from CORRAL_TOKEN or the data dir when absent. */
  token?: string
  /** Environment for ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL (process.env by default). */
  env?: NodeJS.ProcessEnv
  /** Routes mounted before the API's 404 (the renderer in serve mode). */
  extendApp?: (app: Hono) => void
  log?: (msg: string) => void
  /**
   * How far an upgrade of the database is that must run before the engine opens (a migration
   * that rebuilds the event log); only `openWithKeychain` upgrades in steps and reports here.
   */
  onUpgrade?: (progress: UpgradeProgress) => void
  /**
   * Where credential secrets go. Default: a sink that keeps nothing (credentials are then marked
   * `corral.secret_stored: false`) until the keychain-backed sink is wired in.
   */
  secrets?: SecretSink
  /**
   * Where tool calls run. Default: the engine's own hands (`engine.hands`, a SandboxToolRouter
   * over Docker then bubblewrap, see engine-hands.ts), which the engine sweeps at start-up,
   * releases on session archive/delete and disposes on close. A router given here is the
   * caller's to dispose.
   */
  toolRouter?: ToolRouter
  /** false: no default hands (sandbox tools answer with an error unless `toolRouter` is given). Default true. */
  defaultHands?: boolean
  /** The model; by default the Anthropic SDK against ANTHROPIC_BASE_URL or the settings. */
  modelClient?: ModelClient
  /** Harness and scheduler options (retries, timeouts, leases; `enabled: false` runs no brains). */
  harness?: BrainsOptions
  /** The work queue of self_hosted environments: the lease TTL a worker gets (default 120 s; tests shorten it). */
  workQueue?: { leaseTtlSeconds?: number }
  /**
   * The OS keychain (see `Engine.openWithKeychain`). When given, credential secrets go to it
   * (unless `secrets` says otherwise) and `engine.vault` holds the egress proxy.
   */
  keychain?: Keychain
  /** Where the ANTHROPIC_API_KEY in `env` came from (openWithKeychain sets it). */
  apiKeySource?: 'environment' | 'keychain'
  /**
   * The egress proxy's socket directory (default: a fresh one under $XDG_RUNTIME_DIR or the temp
   * dir) and, for tests, its resolver, dialer and extra upstream CAs.
   */
  egress?: Pick<VaultOptions, 'egressRuntimeDir' | 'egressContainerUids' | 'resolver' | 'dialer' | 'upstreamCa'>
  /**
   * Scheduled deployments: `enabled: false` fires no schedule (run now still works); `clock`
   * replaces the wall clock and its timers (tests).
   */
  deployments?: { enabled?: boolean; clock?: SchedulerClock }
  /** Webhook delivery's timings (tests shorten them): WebhookServiceOptions. */
  webhooks?: Pick<WebhookServiceOptions, 'retryDelaysMs' | 'timeoutMs' | 'idlePollMs' | 'now'>
}

/** How to get Docker running on this platform, for the sandbox banner (no repository script: the user may have none). */
export function dockerFix(platform: NodeJS.Platform = process.platform): string {
  if (platform === 'darwin') return 'Start Docker Desktop (install it from docker.com, or brew install --cask docker); until then sessions cannot run tools.'
  if (platform === 'win32') return 'Start Docker Desktop (install it from docker.com); until then sessions cannot run tools.'
  return 'Install and start Docker: sudo apt-get install docker.io && sudo systemctl enable --now docker (Fedora: sudo dnf install moby-engine), then sudo usermod -aG docker $USER and log in again. Without Docker, sessions run in bubblewrap when it is installed (sudo apt-get install bubblewrap).'
}

/**
 * The composition root: builds every service from config. Used by the Electron main process,
 * `corral serve` and the CLI alike. The caller owns the engine and must `close()` it.
 */
export class Engine {
  readonly services: ApiServices
  readonly app: Hono
  readonly token: string
  readonly settings: Settings
  /** The harness, its scheduler and leases. */
  readonly brains: Brains
  /** Fires deployments on their cron (and finishes runs a crash left half-started). */
  readonly deploymentScheduler: DeploymentScheduler
  /** Starts dreams' sessions and settles them (orchestrator/dream-runner.ts). */
  readonly dreamRunner: DreamRunner
  /** Webhook endpoints and their delivery; present when the engine was given a keychain (their signing secrets are kept there). */
  readonly webhooks?: WebhookService
  /** The keychain and the egress proxy; present when the engine was given a keychain. */
  readonly vault?: Vault
  /** The engine's own hands, when it built them (no `toolRouter` given, `defaultHands` not false). */
  readonly hands?: SandboxToolRouter
  /**
   * Remote MCP servers (present with a keychain): `<server>__<tool>` calls go to the session's
   * MCP servers with its vaults' credentials.
   */
  readonly mcp?: McpToolRouter
  /**
   * The one router the brains call and archive/delete release: MCP calls to `mcp`, toolset
   * calls to `toolRouter`, else the default hands, else an answer that no sandbox is configured.
   */
  readonly router: HandsRouter
  /** Start-up sweep, hand releases and resource-secret deletions still running; close() waits for them. */
  private readonly handsWork = new Set<Promise<unknown>>()
  /** Store-change subscriptions, removed on close. */
  private readonly disposers: (() => void)[] = []
  private server?: ListeningServer
  private closed = false
  /** The environment the engine reads model settings from (a copy: the settings API edits it). */
  private readonly env: NodeJS.ProcessEnv
  /** What tool calls change in sessions' host folders (records in <dataDir>/changes). */
  private changes?: SessionChanges
  /** Where ANTHROPIC_API_KEY in `env` came from, if it is set. */
  private apiKeySource?: 'environment' | 'keychain'
  private lastModelCheck?: ModelCheckView
  /** Building the default sandbox image from the app (present with the engine's own hands). */
  private imageBuild?: SandboxImageBuild

  /** Every store of the engine's database (session/stores.ts); the engine reaches SQL only through them. */
  readonly stores: Stores

  private constructor(readonly config: EngineConfig) {
    const env = (this.env = { ...(config.env ?? process.env) })
    this.apiKeySource = config.apiKeySource ?? (env.ANTHROPIC_API_KEY ? 'environment' : undefined)
    // The advisor pairing table: the built-in one with settings.json's advisorTiers over it. A bad
    // entry stops the start here, naming it (and fails a save as api_error if the file changes later).
    const tiers = () => {
      try {
        return advisorTierTable(this.settings.advisorTiers)
      } catch (err) {
        throw new CorralError('api_error', `settings file ${join(config.dataDir, 'settings.json')}: ${(err as Error).message}`)
      }
    }
    // The settings file is read, and its advisor tiers checked, before the database opens, so a
    // bad file stops the start without leaving corral.db open in this process.
    this.settings = readSettings(config.dataDir)
    tiers()
    const dreamLimitProblem = dreamTimeLimitProblem(this.settings)
    if (dreamLimitProblem) throw new CorralError('api_error', `settings file ${join(config.dataDir, 'settings.json')}: ${dreamLimitProblem}`)
    // A repository's authorization_token goes to the keychain (for the egress proxy); without one it is refused.
    const resourceKeychain = config.keychain && new KeychainResourceSecrets(config.keychain)
    const stores = (this.stores = openStoresAt(join(config.dataDir, 'corral.db'), {
      secrets: config.secrets ?? (config.keychain ? new KeychainSecretSink(config.keychain) : undefined),
      leases: { ttlMs: config.harness?.leaseTtlMs },
      work: { defaultTtlSeconds: config.workQueue?.leaseTtlSeconds },
      deploymentsClock: config.deployments?.clock && (() => new Date(config.deployments!.clock!.now())),
      advisorTiers: tiers,
      // a file added to or removed from a live session reaches its sandbox's uploads folder
      onResourceChange: (change) => {
        if (change.kind !== 'updated' && this.hands) {
          this.trackHands(this.hands.fileResourceChanged(change.sessionId, { kind: change.kind, resource: change.resource as unknown as Record<string, unknown> }))
        }
      },
      sessionHooks: {
        onRemoved: (sessionId, how) => {
          this.releaseHands(sessionId)
          // a deleted session's change records (pre-images of its folders) go with it; archived ones stay
          if (how === 'deleted' && this.changes) this.trackHands(this.changes.remove(sessionId))
          // a deleted session's idle workflow runs are executed no more (an archive ends them with events the runs hear)
          if (how === 'deleted') this.brains?.workflowRuns?.dropSession(sessionId)
        },
        // host folders: refused at create (400 naming resources[i]) for system, data and keychain paths
        checkResources: (resources) => void folderMounts(resources, defaultFolderRules(config.dataDir)),
        resourceSecrets: resourceKeychain && {
          put: (sessionId, resourceId, field, value) => resourceKeychain.put(sessionId, resourceId, field, value),
          delete: (sessionId, resourceIds) => this.trackHands(resourceKeychain.delete(sessionId, resourceIds)),
        },
      },
    }))
    // (the database first, as before: opening it creates the data directory)
    this.token = config.token ?? resolveApiToken(config.dataDir, env)
    const { log, agents, environments, sessions, threads, vaults } = stores
    if (config.keychain) {
      const vault = (this.vault = new Vault({ keychain: config.keychain, dataDir: config.dataDir, env, log: config.log, ...config.egress }))
      // One mechanism for every egress-relevant change (an environment's networking, a vault or
      // credential updated, archived or deleted, a session's vault_ids or agent): each store's
      // signal re-derives the policies of the running sessions before the API call returns.
      const refresh = () => vault.refreshSessionEgress()
      for (const store of [environments, vaults, sessions]) this.disposers.push(store.changes.subscribe(refresh))
    }
    this.services = { log, agents, environments, sessions, threads, vaults, memory: stores.memory, work: stores.work, deployments: stores.deployments, dreams: stores.dreams, searchMessages: stores.searchMessages, previews: new PreviewBus(), sessionResources: stores.sessionResources, workflows: stores.workflows }
    if (stores.skills) this.services.skills = stores.skills
    if (stores.files) {
      stores.files.collectExpired()
      this.services.files = { store: stores.files, maxBytes: () => this.maxFileBytes() }
    }
    this.services.admin = {
      getSettings: () => this.settingsView(),
      updateSettings: (input) => this.updateSettings(input),
      doctor: () => runDoctor({ dataDir: config.dataDir, env: this.env, apiKey: { value: this.env.ANTHROPIC_API_KEY, source: this.apiKeySource ?? 'none' } }),
      testModel: (input) => this.testModel(input),
      packages: {
        status: (id) => this.localHands().packageStatus(id),
        prepare: (id) => this.localHands().preparePackages(id),
      },
    }
    // host folders: what tool calls change in them (<dataDir>/changes), revert, the file browser
    const folderRules = defaultFolderRules(config.dataDir)
    const changes = new SessionChanges({
      dir: join(config.dataDir, 'changes'),
      log,
      resolveFolders: (sessionId) => folderMounts(sessions.retrieve(sessionId).resources as unknown as Record<string, unknown>[], folderRules),
    })
    this.services.workspace = changes
    this.changes = changes
    if (!config.toolRouter && config.defaultHands !== false) {
      const hands = (this.hands = defaultSandboxRouter({ dataDir: config.dataDir, settings: this.settings, services: () => this.services, vault: this.vault, log: config.log, changes }))
      this.imageBuild = new SandboxImageBuild({ image: () => defaultImage(), env: this.env })
      this.services.checkImage = (image) => hands.imageProblem(image)
      this.services.admin.sandbox = {
        status: () => this.sandboxStatus(),
        buildImage: async () => {
          this.imageBuild!.start()
          return this.sandboxStatus()
        },
        sessionBackend: (sessionId) => {
          this.services.sessions.retrieve(sessionId) // 404 for an unknown session
          return hands.sessionBackend(sessionId)
        },
      }
    }
    this.app = createApiApp({
      services: this.services,
      token: this.token,
      extend: config.extendApp,
      onInternalError: (err) => (config.log ?? console.error)(`[corral] internal error: ${(err as Error).stack ?? String(err)}`),
    })
    if (config.keychain) {
      // a refreshed access token's expiry goes on its credential (auth.expires_at)
      const onRefreshed = (credentialId: string, expiresAt: string | null) => vaults.recordTokenExpiry(credentialId, expiresAt)
      // a refused refresh: the credential's owner must sign in again (webhook vault_credential.refresh_failed)
      const onRefreshFailed = (credentialId: string) => vaults.recordRefreshFailed(credentialId)
      // one refresh per credential across the engines on this data directory (the desktop and a corral serve)
      const refreshLock = credentialRefreshLock(vaults)
      this.mcp = new McpToolRouter({
        keychain: config.keychain,
        onRefreshed,
        onRefreshFailed,
        refreshLock,
        serversFor: (sessionId) => sessionMcpServers(vaults, sessions.retrieve(sessionId)),
        // an unreachable server or a refused credential is the session's error (never a token: the client scrubs)
        onServerError: (sessionId, error) => {
          if (this.closed) return
          log.append(sessionId, [{ type: 'session.error', error }]).catch((err: unknown) => (config.log ?? console.error)(`[corral] could not record an MCP error of ${sessionId}: ${(err as Error).message}`))
        },
        log: config.log,
      })
      // A credential archived, rotated or taken out of a session's vaults is not used by an open MCP connection again.
      const mcp = this.mcp
      for (const store of [vaults, sessions]) this.disposers.push(store.changes.subscribe(() => mcp.refreshCredentials()))
      const keychain = config.keychain
      this.services.webhooks = this.webhooks = new WebhookService({ store: stores.webhooks, keychain, whenSynced: () => log.whenSynced(), log: config.log, ...config.webhooks })
      this.services.validateMcpOAuth = (vaultId, credentialId) => {
        const credential = vaults.retrieveCredential(vaultId, credentialId)
        if (credential.archived_at) throw new CorralError('invalid_request_error', `credential ${credentialId} is archived: an archived credential is never used, so there is nothing to validate`)
        return validateMcpOAuthCredential(credential, { keychain, onRefreshed, onRefreshFailed, refreshLock, log: config.log })
      }
    }
    this.router = engineToolRouter({ toolset: config.toolRouter ?? this.hands, mcp: this.mcp })
    this.brains = new Brains({
      log,
      sessions,
      leases: stores.leases,
      journal: stores.toolJournal,
      workflows: stores.workflows,
      previews: this.services.previews,
      settings: this.settings,
      env,
      router: this.router,
      mcp: this.mcp,
      model: config.modelClient,
      advisorTiers: tiers,
      options: config.harness,
      onError: config.log,
    })
    this.dreamRunner = new DreamRunner({
      dreams: stores.dreams,
      // read at each look: a change in the settings applies to running dreams (limitChanged)
      timeLimitMs: () => dreamTimeLimitMs(this.settings),
      // a dream's session ends for good: interrupted if it runs, archived (its hands released,
      // their last memory sync into the store included), then the dream takes its final status
      stopSession: async (sessionId) => {
        const session = sessions.retrieve(sessionId)
        if (!session.archived_at) {
          if (session.status === 'running') await sessions.sendEvents(sessionId, [{ type: 'user.interrupt' }])
          await sessions.archive(sessionId)
        }
        // archived by an earlier process that was stopped before its hands were released: release
        // them here (a memory folder it left is synced a last time); otherwise joins the release
        // the archive began
        await this.releaseSessionHands(sessionId)
      },
      onError: (err) => (config.log ?? console.error)(`[corral] dreams: ${(err as Error).stack ?? String(err)}`),
    })
    this.deploymentScheduler = new DeploymentScheduler({
      deployments: stores.deployments,
      clock: config.deployments?.clock,
      onRun: (run) => {
        if (run.error) (config.log ?? console.warn)(`[corral] deployment ${run.deployment_id} could not start a session: ${run.error.type}: ${run.error.message}`)
      },
      onError: (err) => (config.log ?? console.error)(`[corral] deployment scheduler: ${(err as Error).stack ?? String(err)}`),
    })
  }

  static open(config: EngineConfig): Engine {
    const engine = new Engine(config)
    // wakes every session that was running when the last process stopped
    engine.brains.start()
    // finishes half-started deployment runs, then catches up what was missed while closed
    if (config.deployments?.enabled !== false) engine.deploymentScheduler.start()
    // starts the dreams still pending and settles those whose sessions ended while closed
    engine.dreamRunner.start()
    // delivers the webhooks still due (a stopped engine's too), then as events come
    engine.webhooks?.start()
    engine.sweepHands()
    return engine
  }

  /**
   * Start-up, in the background (a slow Docker engine must not hold up the API): removes the
   * sandboxes an earlier run left for sessions that are gone or archived.
   */
  private sweepHands(): void {
    if (!this.hands) return
    const keep = new Set(this.stores.sessions.liveIds())
    this.trackHands(
      this.hands.sweep(keep).then((n) => {
        if (n > 0) this.config.log?.(`[corral] removed ${n} sandbox(es) of archived or deleted sessions`)
      }),
    )
  }

  /** An archived or deleted session's hands: no container, workspace or egress is left behind. */
  private releaseHands(sessionId: string): void {
    if (this.closed) return
    this.trackHands(this.releaseSessionHands(sessionId))
  }

  /** Sessions whose hands are being released: a second ask joins the first. */
  private readonly releasing = new Map<string, Promise<void>>()

  /**
   * Releases a session's hands (its sandbox, folders and egress; memory mounts synced a last time,
   * including folders an earlier process left) and resolves when that is done. Safe to repeat.
   */
  private releaseSessionHands(sessionId: string): Promise<void> {
    const running = this.releasing.get(sessionId)
    if (running) return running
    const work = (async () => {
      await this.router.release(sessionId, { removeWorkspace: true })
      await this.vault?.releaseSessionEgress(sessionId)
    })().finally(() => this.releasing.delete(sessionId))
    this.releasing.set(sessionId, work)
    return work
  }

  private trackHands(work: Promise<unknown>): void {
    const p = work.catch((err) => (this.config.log ?? console.error)(`[corral] sandbox cleanup failed: ${(err as Error).message}`)).finally(() => this.handsWork.delete(p))
    this.handsWork.add(p)
  }

  /** Resolves once the start-up sweep and every release (hands, resource secrets) begun so far have finished. */
  async handsSettled(): Promise<void> {
    while (this.handsWork.size) await Promise.all([...this.handsWork])
  }

  /** The backends, the default image and its build, for the app's sandbox banner. */
  private async sandboxStatus(): Promise<SandboxStatusView> {
    const hands = this.hands!
    const image = defaultImage()
    const [reports, imageProblem] = await Promise.all([hands.backends(), hands.imageProblem(image)])
    const docker = reports.find((r) => r.backend === 'docker')
    const dockerOk = docker?.ok === true
    return {
      backends: reports.map((r) => ({ backend: r.backend, ok: r.ok, reason: r.reason ?? null })),
      usable: reports.some((r) => r.ok),
      docker: { ok: dockerOk, reason: docker?.reason ?? null, image, image_present: dockerOk ? true : imageProblem ? false : null },
      fix: dockerOk ? null : imageProblem ? 'Build the sandbox image (once, offline from Debian packages): use "Build the image" here, or run npm run sandbox:image' : dockerFix(),
      image_build: this.imageBuild!.current(),
    }
  }

  /** The default hands, or a 404 naming why there are none (an engine given its own toolRouter). */
  private localHands(): SandboxToolRouter {
    if (!this.hands) throw new CorralError('not_found_error', 'this engine has no local sandboxes to install packages in')
    return this.hands
  }

  /**
   * Opens the engine with the OS keychain (or Electron's safeStorage when the shell passes it):
   * the Anthropic API key and the local API token come from the keychain unless
   * ANTHROPIC_API_KEY / CORRAL_TOKEN (or `config.token`) are set; credential secrets go to it.
   * A keychain that cannot be read is reported through `config.log` and the engine still starts
   * (token from its file, no model key).
   */
  static async openWithKeychain(config: EngineConfig & { safeStorage?: SafeStorageLike }): Promise<Engine> {
    const env = config.env ?? process.env
    const keychain = config.keychain ?? openKeychain({ dataDir: config.dataDir, env, safeStorage: config.safeStorage })
    const found = await resolveEngineSecrets(keychain, env)
    if (found.keychainProblem) (config.log ?? console.warn)(`[corral] the keychain could not be read (${found.keychainProblem}); using environment variables and the token file`)
    // a migration that copies the whole log runs here, with the event loop free to show its progress
    await upgradeDatabase(join(config.dataDir, 'corral.db'), { onProgress: config.onUpgrade })
    return Engine.open({
      ...config,
      keychain,
      token: config.token ?? found.apiToken,
      env: found.anthropicApiKey ? { ...env, ANTHROPIC_API_KEY: found.anthropicApiKey } : env,
      apiKeySource: env.ANTHROPIC_API_KEY ? 'environment' : found.anthropicApiKey ? 'keychain' : undefined,
    })
  }

  /** Settings as the API shows them: never a secret, only whether the API key is set and where from. */
  /** The files API's upload cap: settings.json's maxFileBytes, else the default. */
  private maxFileBytes(): number {
    const n = this.settings.maxFileBytes
    return typeof n === 'number' && Number.isInteger(n) && n > 0 ? n : DEFAULT_MAX_FILE_BYTES
  }

  async settingsView(): Promise<CorralSettingsView> {
    const m = this.settings.model ?? {}
    const source = this.apiKeySource ?? null
    return {
      model: { base_url: m.baseUrl ?? null, compatibility_mode: m.compatibilityMode === true, default_model: m.defaultModel ?? null },
      sandbox_backend: this.settings.sandboxBackend ?? 'auto',
      advisor_tiers: { ...(this.settings.advisorTiers ?? {}) },
      max_file_bytes: this.maxFileBytes(),
      default_budget: typeof this.settings.defaultBudgetCents === 'string' ? { type: 'limit', max_list_cost: { amount: this.settings.defaultBudgetCents, currency: 'USD' } } : null,
      dream_time_limit_minutes: dreamTimeLimitMs(this.settings) / 60_000,
      api_key: { set: source !== null, source },
      endpoint: {
        base_url: this.env.ANTHROPIC_BASE_URL || m.baseUrl || null,
        source: this.env.ANTHROPIC_BASE_URL ? 'environment' : m.baseUrl ? 'settings' : 'default',
        environment_base_url: this.env.ANTHROPIC_BASE_URL || null,
        configured: Boolean(this.env.ANTHROPIC_API_KEY || this.env.ANTHROPIC_BASE_URL || m.baseUrl),
      },
      model_check: this.lastModelCheck ?? null,
      keychain: await this.keychainStatus(),
    }
  }

  /**
   * Applies a settings change: non-secret fields go to settings.json, the API key to the OS
   * keychain (never to a file); later model requests use the new endpoint at once.
   * ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL in the environment still win over both.
   */
  async updateSettings(input: z.infer<typeof corralSettingsUpdateSchema>): Promise<CorralSettingsView> {
    // Everything but the key first: a missing keychain must not lose the endpoint the user typed.
    const next: Settings = { ...readSettings(this.config.dataDir) }
    if (input.model) {
      const model = { ...(next.model ?? {}) }
      if (input.model.base_url !== undefined) {
        if (input.model.base_url === null) delete model.baseUrl
        else model.baseUrl = input.model.base_url
      }
      if (input.model.compatibility_mode !== undefined) model.compatibilityMode = input.model.compatibility_mode
      if (input.model.default_model !== undefined) {
        if (input.model.default_model === null) delete model.defaultModel
        else model.defaultModel = input.model.default_model
      }
      next.model = model
    }
    if (input.sandbox_backend !== undefined) next.sandboxBackend = input.sandbox_backend
    if (input.advisor_tiers !== undefined) {
      if (input.advisor_tiers === null || Object.keys(input.advisor_tiers).length === 0) delete next.advisorTiers
      else next.advisorTiers = input.advisor_tiers
    }
    if (input.max_file_bytes !== undefined) {
      if (input.max_file_bytes === null) delete next.maxFileBytes
      else next.maxFileBytes = input.max_file_bytes
    }
    if (input.default_budget !== undefined) {
      if (input.default_budget === null) delete next.defaultBudgetCents
      else next.defaultBudgetCents = input.default_budget.max_list_cost.amount
    }
    if (input.dream_time_limit_minutes !== undefined) {
      if (input.dream_time_limit_minutes === null) delete next.dreamTimeLimitMinutes
      else next.dreamTimeLimitMinutes = input.dream_time_limit_minutes
    }
    const fileFields =
      input.model || input.sandbox_backend !== undefined || input.advisor_tiers !== undefined || input.max_file_bytes !== undefined || input.default_budget !== undefined || input.dream_time_limit_minutes !== undefined
    if (fileFields) {
      writeSettings(this.config.dataDir, next)
      // the same object the hands and brains hold: they see the change
      for (const k of Object.keys(this.settings)) delete this.settings[k]
      Object.assign(this.settings, next)
      // running dreams are held to a new limit at once
      if (input.dream_time_limit_minutes !== undefined) this.dreamRunner.limitChanged()
    }
    if (input.api_key !== undefined) {
      const keychain = this.config.keychain
      const saved = fileFields ? 'the other settings were saved; ' : ''
      if (!keychain) {
        this.brains.reconfigure(this.env, this.settings)
        throw new CorralError('keychain_error', `api_key: not saved, because this engine has no OS keychain (${saved}set ANTHROPIC_API_KEY in its environment instead)`)
      }
      try {
        if (input.api_key === null) await keychain.delete(keychainAccount.anthropicApiKey)
        else await keychain.set(keychainAccount.anthropicApiKey, input.api_key)
      } catch (err) {
        this.brains.reconfigure(this.env, this.settings)
        throw new CorralError('keychain_error', `api_key: not saved (${saved}nothing else was lost): ${(err as Error).message}`, { cause: err })
      }
      if (this.apiKeySource !== 'environment') {
        if (input.api_key === null) delete this.env.ANTHROPIC_API_KEY
        else this.env.ANTHROPIC_API_KEY = input.api_key
        this.apiKeySource = input.api_key === null ? undefined : 'keychain'
      }
    }
    this.brains.reconfigure(this.env, this.settings)
    return this.settingsView()
  }

  /**
   * Test connection: one real minimal request (probeModel, the harness's own client). Fields of
   * `input` override the endpoint in effect for this test only; the key given is not stored.
   */
  async testModel(input: z.infer<typeof corralModelTestSchema>): Promise<ModelCheckView> {
    const m = this.settings.model ?? {}
    // base_url null is the form's empty field: no URL in the settings, so what sessions would use
    // then (ANTHROPIC_BASE_URL when the environment sets it, else Anthropic's API).
    const baseURL = input.base_url !== undefined ? input.base_url || this.env.ANTHROPIC_BASE_URL || undefined : this.env.ANTHROPIC_BASE_URL || m.baseUrl || undefined
    const apiKey = input.api_key ?? this.env.ANTHROPIC_API_KEY
    const key_source = input.api_key ? 'request' : this.env.ANTHROPIC_API_KEY ? (this.apiKeySource ?? 'environment') : 'none'
    const probe = await probeModel({
      baseURL,
      apiKey,
      compatibilityMode: input.compatibility_mode ?? (this.env.CORRAL_MODEL_COMPAT === '1' || m.compatibilityMode === true),
      model: (input.model ?? undefined) || m.defaultModel,
    })
    this.lastModelCheck = { ...probe, key_source, checked_at: new Date().toISOString() }
    return this.lastModelCheck
  }

  /** Whether the keychain answers (read probe); the problem and its fix when it does not. */
  private async keychainStatus(): Promise<CorralSettingsView['keychain']> {
    const keychain = this.config.keychain
    if (!keychain) return { available: false, backend: null, problem: `this engine was started without an OS keychain; ${keychainFix()}` }
    try {
      await keychain.get(keychainAccount.anthropicApiKey)
      return { available: true, backend: keychain.backend, problem: null }
    } catch (err) {
      return { available: false, backend: keychain.backend, problem: (err as Error).message }
    }
  }

  /** Starts the HTTP API on 127.0.0.1:port (0 = any free port). */
  async listen(port: number): Promise<ListeningServer> {
    this.server = await listen(this.app, port)
    return this.server
  }

  /** Stops accepting requests, lets queued appends commit, closes the database. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await this.server?.close()
    await this.deploymentScheduler.dispose()
    this.dreamRunner.dispose()
    await this.dreamRunner.settled()
    await this.brains.stop()
    // after the brains: their last events' webhooks are enqueued, and delivered by the next start
    await this.webhooks?.dispose()
    await this.handsSettled()
    await this.mcp?.dispose()
    await this.imageBuild?.dispose()
    await this.hands?.dispose()
    for (const d of this.disposers.splice(0)) d()
    await this.vault?.dispose()
    await this.stores.log.drain()
    this.stores.close()
  }
}
