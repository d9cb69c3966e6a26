
/*
 * The hands' ground floor: what a tool call is, what comes back, what a restarted brain learns
 * about a call an earlier process started (the one call family every router and sandbox speaks:
 * hands/tool-router.ts re-exports it for the harness), and the Sandbox a backend makes for one
 * session. Hands are cattle: provisioned lazily on the first tool call that needs one, replaced
 * when they die, and never holding anything secret. This file imports nothing of hands/.
 */

/** Which hands a call goes to, as the brain routed it (routeTool's kind: `agent.tool_use` → toolset, `agent.mcp_tool_use` → mcp). */
export type ToolRouteKind = 'toolset' | 'mcp'

/** One tool call, as the harness hands it to a ToolRouter. */
export interface ToolCall {
  sessionId: string
  /** The `agent.tool_use` (or `agent.mcp_tool_use`) event id: the runner keeps results by it so a restarted brain can collect them. */
  toolUseId: string
  /** The name the model called (`<server>__<tool>` for an MCP tool). */
  name: string
  input: Record<string, unknown>
  /** Which hands take it (the composite router dispatches on it); absent: the first backend that serves the name. */
  route?: ToolRouteKind
  /** Aborts the call (user.interrupt): a sandbox kills the call's process group. */
  signal?: AbortSignal
  /**
   * Streams output as it is produced (for the renderer's live terminal), with the stream it came
   * from (bash; other tools: stdout), and Corral's own status lines about the call (`status`: its
   * sandbox starting).
   */
  onOutput?: (chunk: string, stream?: PreviewStream) => void
}

/** Which of a command's streams a chunk of its output came from. */
export type OutputStream = 'stdout' | 'stderr'

/** What a call's live output carries: its command's streams, and `status`, Corral's own lines about the call (never the command's: a runner cannot send one). */
export type PreviewStream = OutputStream | 'status'

/** What a tool call produced: the text the model sees, and whether it is an error. */
export interface ToolOutcome {
  content: string
  isError: boolean
  /** Exit code of a bash call, when there is one. */
  exitCode?: number | null
  durationMs?: number
  /**
   * The parts of `content` a bash command wrote to stderr, as [from, to) ranges of UTF-16 code
   * units, ascending. The content itself is both streams in the order the runner read them.
   */
  stderr?: ReadonlyArray<readonly [number, number]>
}

/**
 * What a hand knows about a call an earlier process started: `finished` with its outcome,
 * `running`, `unknown`, or `not_started` (the hand knows it never began, so it may run now).
 */
export type ToolRecovery = { state: 'finished'; outcome: ToolOutcome } | { state: 'running' } | { state: 'unknown' } | { state: 'not_started' }

/**
 * One tool call as a sandbox runs it: the session is the sandbox's own, and the router has
 * already validated `input` against the toolset table (src/shared/tools/toolset.ts), so it holds
 * only the fields the tool declares.
 */
export type SandboxToolCall = Omit<ToolCall, 'sessionId' | 'route'>

/** Where a session's host folder appears in its sandbox (a `host_folder` resource, resolved and checked: folders.ts). */
export interface FolderMount {
  /** The resource's index in the session's `resources` (for error messages and change records). */
  index: number
  /** The folder on the host, resolved with realpath. */
  source: string
  /** Where the sandbox sees it: /workspace or a path inside it. */
  target: string
  readOnly: boolean
}

/** What an install of an environment's packages tells about itself, as it goes. */
export type PackageProgressEvent = { kind: 'start'; summary: string } | { kind: 'line'; line: string } | { kind: 'ready' } | { kind: 'failed'; message: string }
export type PackageProgress = (event: PackageProgressEvent) => void

/**
 * A session's way out through Corral's egress proxy (the vault's EgressHandle has this shape).
 * The sandbox itself keeps no network: it mounts `dir` read-only at `sandboxDir` (the proxy's
 * socket, the CA bundle), gives its processes `env`, and the runner bridges 127.0.0.1:`bridge.port`
 * to the socket at `bridge.socket` (an in-sandbox path).
 */
export interface SandboxEgress {
  readonly dir: string
  /** The proxy's socket on the host (in `dir`); the host's own requests for the session (web_fetch) go there. */
  readonly socketPath?: string
  readonly sandboxDir: string
  readonly env: Readonly<Record<string, string>>
  readonly bridge: { readonly socket: string; readonly port: number }
  /** http(s) URLs of repositories the proxy serves with their token: cloned inside the sandbox, through the proxy. */
  readonly repositories?: readonly string[]
}

/** Where a sandbox gets its session's egress from; opened by the backend when it starts the sandbox. */
export interface SandboxEgressSource {
  /**
   * The session's egress, opened on the first call and the same afterwards; undefined when the
   * session may reach nothing (the sandbox then gets no proxy at all). `dir`: a directory reserved
   * earlier and already mounted into a warm sandbox, used when the egress is not open yet.
   */
  open(dir?: string): Promise<SandboxEgress | undefined>
  /** Closes the session's egress (its sandbox is released). */
  release(): Promise<void>
}

/** An egress for an install (registries only, no credentials); closed when the install ends. */
export interface PackageEgress extends SandboxEgress {
  close(): Promise<void>
}

/** Opens an egress that reaches the package registries plus `extraHosts` (the vault's `packageEgress`). */
export type PackageEgressOpener = (extraHosts: readonly string[]) => Promise<PackageEgress>

/** An environment, as its package work sees it: no session. */
export interface EnvironmentPackagesParams {
  environmentId: string
  /** Environment config as stored (the API's `config`), plus Corral's optional additions. */
  config: Record<string, unknown>
  /**
   * Opens the egress that installs the environment's `packages` (registries and mirrors only).
   * Absent: an environment that lists packages cannot provision (the error says why).
   */
  packageEgress?: PackageEgressOpener
  /** Told how an install of the environment's packages goes (start, progress lines, ready or failed). */
  packageProgress?: PackageProgress
}

/** One session's sandbox, as a backend is asked to make it: its environment, resources, folders and egress. */
export interface SandboxProvisionParams extends EnvironmentPackagesParams {
  sessionId: string
  /** Session resources (repositories, files) to place in the workspace at provision. */
  resources?: readonly Record<string, unknown>[]
  /**
   * Host folders bound into the sandbox (the session's `host_folder` resources, resolved and
   * checked by the router): read-write or read-only at /workspace or a path inside it.
   */
  folders?: readonly FolderMount[]
  /** The session's egress; absent: the sandbox reaches nothing. */
  egress?: SandboxEgressSource
}

/**
 * A backend's environment-wide package work: the cached install every sandbox of an environment
 * starts from (Docker: an image; bubblewrap: a prefix directory). Nothing here is a session's.
 */
export interface EnvironmentPackages {
  /** Whether the environment's packages are installed and cached for this backend (undefined: it lists none). */
  ready(params: EnvironmentPackagesParams): Promise<boolean | undefined>
  /** Installs the environment's packages now, if they are not cached yet (what its first sandbox would do). */
  prepare(params: EnvironmentPackagesParams): Promise<void>
}

/** The regular files under a folder of a sandbox (paths relative to it), as its runner lists them. */
export interface SandboxFileList {
  /** `sig` changes whenever the file is written, replaced or renamed over. */
  files: { path: string; size: number; sig: string }[]
  /** Entries left out (symlinks, special files, unreadable folders) and why. */
  skipped: { path: string; reason: string }[]
  /** More files than asked for: the list stops at `max`. */
  truncated: boolean
}

/** One session's sandbox on one backend. */
export interface Sandbox {
  readonly backend: string
  /** Makes the sandbox ready (idempotent). Throws CorralError sandbox_error with the reason. */
  provision(): Promise<void>
  /** Runs one tool call. Never throws for a failed command: that is an `isError` result. */
  execute(call: SandboxToolCall): Promise<ToolOutcome>
  /** What happened to a call started by an earlier process (crash recovery). */
  recover?(toolUseId: string): Promise<ToolRecovery>
  /**
   * The regular files under an in-sandbox folder (an empty list when it does not exist), read
   * by the sandbox's own user: for collecting a session's outputs. Never provisions: a sandbox
   * with no live runner lists nothing.
   */
  listFiles?(dir: string, options?: { max?: number }): Promise<SandboxFileList>
  /**
   * A regular file's bytes (never through a symlink), or undefined when it changed while being
   * read (its signature moved), is over `maxBytes`, or no runner is live.
   */
  readFile?(path: string, options: { maxBytes: number }): Promise<{ bytes: Buffer; sig: string } | undefined>
  /** Stops the sandbox; the workspace survives unless `removeWorkspace`. */
  dispose(options?: { removeWorkspace?: boolean }): Promise<void>
}

/**
 * Makes sandboxes for sessions; one per backend (docker, bubblewrap, worker). What it does is
 * per session (create, release) or about the backend itself (available, sweep, dispose); work on
 * a whole environment is its separate `packages` interface.
 */
export interface SandboxProvider {
  readonly backend: string
  /** Whether this backend works on this machine, and why not. */
  available(): Promise<{ ok: boolean; reason?: string }>
  create(params: SandboxProvisionParams): Sandbox
  /**
   * Removes what this backend keeps of a session for which this process holds no Sandbox (a
   * restarted host, a deleted session): its sandbox processes or containers, and with
   * `removeWorkspace` its workspace. Needs nothing but the id (the session row may be gone);
   * idempotent.
   */
  release(sessionId: string, options?: { removeWorkspace?: boolean }): Promise<void>
  /** The backend's environment-wide package work; absent: it cannot install packages ahead of a session. */
  readonly packages?: EnvironmentPackages
  /** Removes what earlier runs left behind (containers labelled with session ids, ...). */
  sweep?(keepSessionIds: ReadonlySet<string>): Promise<number>
  dispose(): Promise<void>
}
