import { createHash } from 'node:crypto'
import { join, resolve } from 'node:path'
import type { ApiServices } from './api/services'
import { DEFAULT_MAX_FILE_BYTES, type Settings } from './config'
import { BubblewrapSandboxProvider, DockerSandboxProvider, VmSandboxProvider, FileMounts, MemoryMounts, SkillMounts, SandboxToolRouter, SessionOutputs, type SandboxEgressSource, type SandboxEnvironment, type SandboxProvider } from './hands'
import type { Vault } from './vault/vault'
import type { FolderRules, SessionChanges } from './hands'
import { sandboxResourcesDir } from './hands/paths'
import type { SkillSource } from './hands/resources/skill-mounts'
import { HandsRouter, type HandsBackend } from './hands/router'
import { NoHandsToolRouter, type ToolRouter } from './hands/tool-router'
import type { McpToolRouter } from './hands/mcp/router'
import { isCorralError } from '../shared/errors'

type HandsServices = Pick<ApiServices, 'sessions' | 'environments' | 'vaults' | 'memory' | 'files' | 'skills'>

/**
 * The engine's default hands: a SandboxToolRouter over Docker and bubblewrap, with each
 * session's environment and resources read from the stores. Used by `Engine` when no
 * `toolRouter` is given (Electron, `corral serve`, `corral run`).
 */
export interface DefaultHandsParams {
  dataDir: string
  settings: Settings
  /** The engine's services (sessions, environments, vaults); read on a session's first toolset call. */
  services: () => HandsServices
  /** The engine's vault (keychain + egress proxy); without one, no sandbox gets egress. */
  vault?: Vault
  log?: (message: string) => void
  /** Docker label scope (`corral.managed`); default: one per data directory (dockerScopeFor). */
  dockerScope?: string
  /** Records what tool calls change in host folders (the engine's SessionChanges). */
  changes?: SessionChanges
}

/**
 * The Docker scope of a data directory: a sweep removes only containers of its own scope, so two
 * Corrals (two data directories, or parallel test runs) on one Docker engine leave each other's
 * sandboxes alone.
 */
export function dockerScopeFor(dataDir: string): string {
  return 'd' + createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 16)
}

/**
 * The backends in order of preference (the router takes the first that is available for an
 * environment that names none): Docker, then a VM (QEMU), then bubblewrap; the settings'
 * `sandboxBackend` moves its backend to the front. (An environment's `config.corral.backend`
 * still picks its own backend: the router honours it.) The bubblewrap workspaces live in
 * `<dataDir>/sandboxes`, the VM backend's workspaces, templates and run directories in `<dataDir>/vm`.
 */
export function defaultSandboxProviders(p: { dataDir: string; settings: Settings; log?: (m: string) => void; dockerScope?: string; vault?: Vault }): SandboxProvider[] {
  const vault = p.vault
  const docker = new DockerSandboxProvider({
    log: p.log,
    scope: p.dockerScope ?? dockerScopeFor(p.dataDir),
    // warm containers mount an egress directory that the claiming session's egress opens
    reserveEgressDir: vault ? () => vault.reserveEgressDir() : undefined,
  })
  const bubblewrap = new BubblewrapSandboxProvider({ dataDir: join(p.dataDir, 'sandboxes'), log: p.log })
  const vm = new VmSandboxProvider({ dataDir: join(p.dataDir, 'vm'), log: p.log })
  const order: SandboxProvider[] = [docker, vm, bubblewrap]
  const preferred = order.find((b) => b.backend === p.settings.sandboxBackend)
  return preferred ? [preferred, ...order.filter((b) => b !== preferred)] : order
}

/**
 * A session's environment config, resources and egress, as the hands need them at provision.
 * The egress is the vault's `sessionEgress`, opened when the sandbox starts: a proxy when the
 * environment's networking reaches something (unrestricted; limited with hosts, package
 * managers or MCP servers) or the session has a repository whose token is in the keychain
 * (then that repository alone); nothing otherwise. The sandbox's own network stays off in
 * every case: egress is the proxy's unix socket, bridged to the sandbox's loopback.
 */
export function sessionSandboxEnvironment(services: HandsServices, sessionId: string, vault?: Vault, log?: (m: string) => void): SandboxEnvironment {
  const session = services.sessions.retrieve(sessionId)
  const egress: SandboxEgressSource | undefined = vault && {
    // A keychain that cannot be read (no CA key, no repository token) leaves the sandbox without
    // egress rather than without hands: offline work still runs, and the log says why.
    open: (dir) =>
      vault.sessionEgress(services, sessionId, { dir }).catch((err: unknown) => {
        if (!isCorralError(err) || err.code !== 'keychain_error') throw err
        ;(log ?? console.warn)(`[corral] session ${sessionId} gets no network: ${err.message}`)
        return undefined
      }),
    release: () => vault.releaseSessionEgress(sessionId),
  }
  return { ...environmentById(services, session.environment_id, vault), resources: session.resources as unknown as Record<string, unknown>[], egress }
}

/** An environment's config as the hands read it, and the egress its packages install through (the vault's). */
export function environmentById(services: Pick<HandsServices, 'environments'>, environmentId: string, vault?: Vault): Omit<SandboxEnvironment, 'resources' | 'egress'> {
  const env = services.environments.retrieve(environmentId)
  return {
    environmentId: env.id,
    config: (env.config ?? { type: 'cloud' }) as unknown as Record<string, unknown>,
    packageEgress: vault && ((hosts) => vault.packageEgress(hosts)),
  }
}

/**
 * What a session's host folders are checked against: the data directory, the keychain's and
 * credential folders (in folders.ts), and Corral's own files (the sandbox runner and recipe).
 */
export function defaultFolderRules(dataDir: string): FolderRules {
  let own: string[] = []
  try {
    own = [sandboxResourcesDir()]
  } catch {
    // no runner found: nothing of Corral's own to protect beyond the data directory
  }
  return { dataDir, protectedPaths: own }
}

/** The default router; the caller owns it (dispose() stops sandboxes and warm pools). */
export function defaultSandboxRouter(p: DefaultHandsParams): SandboxToolRouter {
  return new SandboxToolRouter({
    folderRules: defaultFolderRules(p.dataDir),
    changes: p.changes,
    memory: new MemoryMounts({ store: () => p.services().memory, root: join(p.dataDir, 'memory-mounts'), log: p.log }),
    files: new FileMounts({ files: () => p.services().files?.store, root: join(p.dataDir, 'uploads'), log: p.log }),
    outputs: new SessionOutputs({ sink: () => p.services().files?.store, maxFileBytes: () => p.services().files?.maxBytes() ?? DEFAULT_MAX_FILE_BYTES, log: p.log }),
    skills: new SkillMounts({ skills: () => skillSource(p.services()), root: join(p.dataDir, 'skill-mounts'), log: p.log }),
    providers: defaultSandboxProviders(p),
    resolveEnvironment: (sessionId) => sessionSandboxEnvironment(p.services(), sessionId, p.vault, p.log),
    resolveEnvironmentById: (environmentId) => environmentById(p.services(), environmentId, p.vault),
  })
}

/** A session's pinned skills (the session store) and their files (the skill store), for SkillMounts. */
function skillSource(services: HandsServices): SkillSource | undefined {
  const skills = services.skills
  if (!skills) return undefined
  return { skillsOf: (sessionId) => services.sessions.skillsOf(sessionId), files: (skillId, version) => skills.files(skillId, version) }
}

/**
 * The engine's one tool router: MCP calls to `mcp` (present with a keychain), toolset calls to
 * `toolset` (a router the engine was given, or its default hands), or, with neither, to
 * NoHandsToolRouter, whose answer tells the model that no sandbox is configured. The engine
 * releases sessions through it; it owns none of its backends (the engine disposes its own).
 */
export function engineToolRouter(p: { toolset?: ToolRouter; mcp?: McpToolRouter }): HandsRouter {
  const backends: HandsBackend[] = []
  if (p.mcp) backends.push({ route: 'mcp', hands: p.mcp })
  backends.push({ route: 'toolset', hands: p.toolset ?? new NoHandsToolRouter() })
  return new HandsRouter({ backends })
}
