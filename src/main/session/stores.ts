import { openDatabase, type Db } from './database'
import { SqliteEventLog } from './sqlite-event-log'
import { AgentStore, type AgentStoreOptions } from './agent-store'
import { EnvironmentStore } from './environment-store'
import { SessionStore, type SessionStoreHooks } from './session-store'
import { ThreadStore } from './thread-store'
import { VaultStore, type SecretSink } from './vault-store'
import { SqliteLeaseStore, type LeaseStoreParams } from './lease-store'
import { SqliteToolJournal } from './tool-journal'
import { WorkflowStore } from './workflow-store'
import { MemoryStore } from './memory-store'
import { WorkStore, type WorkStoreOptions } from './work-store'
import { BlobStore } from './blob-store'
import { FileStore } from './file-store'
import { SkillStore } from './skill-store'
import { DeploymentStore, type DeploymentStoreOptions } from './deployment-store'
import { DreamStore } from './dream-store'
import { WebhookStore } from './webhook-store'
import { SessionResourceStore, type SessionResourceStoreOptions } from './session-resources'
import { dirname, join } from 'node:path'
import { searchMessages, type MessageSearchHit, type MessageSearchParams } from './message-search'

export interface StoresOptions {
  /** The stores' clock (created_at, processed_at, ...); the wall clock by default. */
  clock?: () => Date
  /** What the engine plugs into the session store (resource secrets and checks, onRemoved, files). */
  sessionHooks?: SessionStoreHooks
  /** Where vault credentials' secrets go; discarded by default. */
  secrets?: SecretSink
  /** The brains' session leases (lifetime, owner). */
  leases?: LeaseStoreParams
  /** The work queue's lease TTL and poller window (WorkStoreOptions); the spec's defaults otherwise. */
  work?: Omit<WorkStoreOptions, 'clock'>
  /** The advisor pairing table agents are checked against at save (AgentStoreOptions.advisorTiers). */
  advisorTiers?: AgentStoreOptions['advisorTiers']
  /** Told when a resource is added to, removed from or updated on a live session (SessionResourceStoreOptions.onChange). */
  onResourceChange?: SessionResourceStoreOptions['onChange']
  /** Where the files API keeps its content-addressed bytes; without it there is no file store. */
  filesDir?: string
  /** Where skills keep their files' content-addressed bytes; without it there is no skill store. */
  skillsDir?: string
  /** The deployment store's clock (the scheduler's, for tests that inject one); the stores' clock by default. */
  deploymentsClock?: () => Date
  /** Tests only: called between a deployment run's record and its session (DeploymentStoreOptions.afterRunRecorded). */
  afterDeploymentRunRecorded?: DeploymentStoreOptions['afterRunRecorded']
}

/** Every store of one database, wired to each other. */
export interface Stores {
  /** The database itself: only for session/ and for tests that inspect the file. */
  readonly db: Db
  readonly log: SqliteEventLog
  readonly agents: AgentStore
  readonly environments: EnvironmentStore
  readonly sessions: SessionStore
  readonly threads: ThreadStore
  readonly vaults: VaultStore
  readonly leases: SqliteLeaseStore
  readonly toolJournal: SqliteToolJournal
  /** The journal of workflow runs (their calls and log lines). */
  readonly workflows: WorkflowStore
  /** Memory stores, memories and their versions. */
  readonly memory: MemoryStore
  /** The work queues of self_hosted environments, environment keys and sessions tokens. */
  readonly work: WorkStore
  /** Files (`/v1/files`) and session outputs; absent when opened without `filesDir`. */
  readonly files?: FileStore
  /** Skills and their versions (`/v1/skills`); absent when opened without `skillsDir`. */
  readonly skills?: SkillStore
  /** A live session's resources (`/v1/sessions/{id}/resources`). */
  readonly sessionResources: SessionResourceStore
  /** Deployments and their runs (`/v1/deployments`, `/v1/deployment_runs`). */
  readonly deployments: DeploymentStore
  /** Dreams (`/v1/dreams`): jobs that reorganize a memory store from past sessions. */
  readonly dreams: DreamStore
  /** Webhook endpoints and their outbox (delivered by orchestrator/webhooks.ts). */
  readonly webhooks: WebhookStore
  /** Messages (user and agent) whose text contains a query, across sessions, newest first. */
  searchMessages(params: MessageSearchParams): { data: MessageSearchHit[]; next_page: string | null }
  /** Closes the database (drain the log first: appends still queued would fail). */
  close(): void
}

/**
 * Wires every store on `db`: the one place that knows how they depend on each other (the engine,
 * the test fixtures and the benchmarks all open their stores here).
 */
export function openStores(db: Db, options: StoresOptions = {}): Stores {
  const clock = options.clock
  const log = new SqliteEventLog(db, { clock })
  // every store tells it of its resources' changes inside their transactions (the webhooks' outbox)
  const webhooks = new WebhookStore(db, { log, clock })
  const events = webhooks.tell
  // its own blob folder: a file's collection checks only the files table for other holders
  const skills = options.skillsDir ? new SkillStore(db, { blobs: new BlobStore(options.skillsDir), clock }) : undefined
  const agents = new AgentStore(db, { clock, advisorTiers: options.advisorTiers, skills, events })
  const environments = new EnvironmentStore(db, clock, events)
  const memory = new MemoryStore(db, { clock, events })
  const work = new WorkStore(db, { ...options.work, clock })
  const files = options.filesDir ? new FileStore(db, { blobs: new BlobStore(options.filesDir), clock }) : undefined
  // a `file` resource's file_id is checked against the file store (unless the caller brings its own check)
  // a session's creation, archive and deletion enqueue their webhooks in their own transaction
  const inTransaction = (id: string, what: 'created' | 'archived' | 'deleted') => {
    webhooks.enqueueSession(id, what)
    options.sessionHooks?.inTransaction?.(id, what)
  }
  const hooks = { ...(files ? { files } : {}), ...options.sessionHooks, inTransaction }
  const sessions = new SessionStore(db, { log, agents, environments, memory, work, skills, clock, hooks })
  const vaults = new VaultStore(db, { secrets: options.secrets, clock, events })
  return {
    db,
    log,
    agents,
    environments,
    sessions,
    threads: new ThreadStore({ log, sessions, clock }),
    vaults,
    leases: new SqliteLeaseStore(db, options.leases),
    toolJournal: new SqliteToolJournal(db, log),
    workflows: new WorkflowStore(db),
    memory,
    work,
    files,
    skills,
    sessionResources: new SessionResourceStore(db, { sessions, files: hooks?.files, secrets: hooks?.resourceSecrets, clock, onChange: options.onResourceChange }),
    deployments: new DeploymentStore(db, { agents, environments, sessions, vaults, memory, files: hooks?.files, clock: options.deploymentsClock ?? clock, afterRunRecorded: options.afterDeploymentRunRecorded, events }),
    dreams: new DreamStore(db, { agents, environments, sessions, memory, files, log, clock }),
    webhooks,
    searchMessages: (params) => searchMessages(db, params),
    close: () => {
      log.dispose()
      db.close()
    },
  }
}

/** Upgrading a database before its stores open (engine start-up, with progress): session/database.ts. */
export { upgradeDatabase, upgradeProgressLines, type UpgradeProgress } from './database'

/** Opens (creating and migrating as needed) the database file at `path` and wires its stores. */
export function openStoresAt(path: string, options: StoresOptions = {}): Stores {
  return openStores(openDatabase({ path }), { filesDir: join(dirname(path), 'files'), skillsDir: join(dirname(path), 'skills'), ...options })
}
