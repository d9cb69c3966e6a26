import { CorralError } from '../../shared/errors'
import type { WorkCredential } from '../session/work-store'
import type { ApiServices } from './services'

/**
 * Who is calling, and what they may reach: the authorization matrix of spec resources.md §3.2
 * in one table. Three kinds of credential reach /v1:
 * - the local API token (the user: the desktop, the CLI, an SDK client on this machine);
 * - an environment key (a worker host): polls its environment's queue and serves that queue's
 *   sessions, nothing else;
 * - a sessions token (minted per work delivery, in the item's `secret`): its work item, its session,
 *   that session's skills and memory stores.
 * Every route not in the table is the API token's alone; a key or token there is a 403
 * `permission_error` naming what the credential is for.
 */
export type Principal = { kind: 'api' } | WorkCredential

const principals = new WeakMap<Request, Principal>()

export function setPrincipal(req: Request, p: Principal): void {
  principals.set(req, p)
}

/** The request's principal (set by the API's auth middleware before any route runs). */
export function principalOf(req: Request): Principal {
  return principals.get(req) ?? { kind: 'api' }
}

type Check = (p: Exclude<Principal, { kind: 'api' }>, params: string[], services: ApiServices) => string | undefined
type Allow = true | false | string | Check

interface Rule {
  method: string
  path: RegExp
  /** true: allowed; a string or false: refused (with that reason); a function: refused when it returns a reason. */
  api: true | string
  environment?: Allow
  session?: Allow
}

const ENV = '(env_[A-Za-z0-9_]+)'
const ID = '([A-Za-z0-9_]+)'
const WORK = `^/v1/environments/${ENV}/work`

const ownEnvironment: Check = (p, [env]) => (p.environmentId === env ? undefined : `this credential is for environment ${p.environmentId}, not ${env}`)
const ownWork: Check = (p, [env, work]) => {
  if (p.environmentId !== env) return `this sessions token is for environment ${p.environmentId}, not ${env}`
  if (p.kind === 'session' && p.workId !== work) return `this sessions token is for work ${p.workId}, not ${work}`
  return undefined
}
const envOrOwnWork: Check = (p, params, s) => (p.kind === 'environment' ? ownEnvironment(p, params, s) : ownWork(p, params, s))
const servedSession: Check = (p, [session], s) => {
  if (p.kind === 'session') return p.sessionId === session ? undefined : `this sessions token is for session ${p.sessionId}, not ${session}`
  return s.work?.servesSession(p.environmentId, session) ? undefined : `session ${session} is not served by environment ${p.environmentId}'s queue`
}
const skillOfServedSession: Check = (p, [skill], s) => {
  const usesSkill = (sessionId: string) => {
    const skills = (s.sessions.retrieve(sessionId).agent as unknown as { skills?: { skill_id?: string }[] }).skills ?? []
    return skills.some((k) => k.skill_id === skill)
  }
  if (p.kind === 'session') return usesSkill(p.sessionId) ? undefined : `skill ${skill} is not one of session ${p.sessionId}'s skills`
  const served = s.work?.sessionsOf(p.environmentId) ?? []
  return served.some((id) => s.sessions.exists(id) && usesSkill(id)) ? undefined : `skill ${skill} is not used by any session environment ${p.environmentId}'s queue serves`
}
/** A memory store attached to the token's session; writes only to a read_write attachment. */
const attachedStore =
  (write: boolean): Check =>
  (p, [store], s) => {
    if (p.kind !== 'session') return 'memory stores refuse an environment key: use the work item\'s sessions token'
    const attached = (s.sessions.retrieve(p.sessionId).resources as unknown as { type: string; memory_store_id?: string; access?: string }[]).find(
      (r) => r.type === 'memory_store' && r.memory_store_id === store,
    )
    if (!attached) return `memory store ${store} is not attached to session ${p.sessionId}`
    if (write && attached.access === 'read_only') return `memory store ${store} is attached to session ${p.sessionId} read_only: writes are refused`
    return undefined
  }

const RULES: Rule[] = [
  { method: 'GET', path: new RegExp(`${WORK}/poll$`), api: 'polling takes the environment key (the API token never sits on a worker host)', environment: ownEnvironment },
  { method: 'GET', path: new RegExp(`${WORK}/stats$`), api: true, environment: ownEnvironment },
  { method: 'POST', path: new RegExp(`${WORK}/${ID}/ack$`), api: true, environment: envOrOwnWork, session: envOrOwnWork },
  { method: 'POST', path: new RegExp(`${WORK}/${ID}/heartbeat$`), api: 'heartbeats take the environment key or the item\'s sessions token', environment: envOrOwnWork, session: envOrOwnWork },
  { method: 'POST', path: new RegExp(`${WORK}/${ID}/stop$`), api: true, environment: envOrOwnWork, session: envOrOwnWork },
  { method: 'GET', path: new RegExp(`${WORK}$`), api: 'listing work takes the environment key', environment: ownEnvironment },
  { method: 'GET', path: new RegExp(`${WORK}/${ID}$`), api: true, environment: 'retrieving a work item takes the API token', session: 'retrieving a work item takes the API token' },
  { method: 'POST', path: new RegExp(`${WORK}/${ID}$`), api: true, environment: 'updating a work item takes the API token', session: 'updating a work item takes the API token' },
  { method: 'GET', path: /^\/v1\/sessions\/(sesn_[A-Za-z0-9_]+)$/, api: true, environment: servedSession, session: servedSession },
  { method: 'GET', path: /^\/v1\/sessions\/(sesn_[A-Za-z0-9_]+)\/events$/, api: true, environment: servedSession, session: servedSession },
  { method: 'POST', path: /^\/v1\/sessions\/(sesn_[A-Za-z0-9_]+)\/events$/, api: true, environment: servedSession, session: servedSession },
  { method: 'GET', path: /^\/v1\/sessions\/(sesn_[A-Za-z0-9_]+)\/events\/stream$/, api: true, environment: servedSession, session: servedSession },
  { method: 'GET', path: /^\/v1\/skills\/([A-Za-z0-9_]+)(?:\/versions(?:\/[A-Za-z0-9_.-]+(?:\/content)?)?)?$/, api: true, environment: skillOfServedSession, session: skillOfServedSession },
  { method: 'GET', path: /^\/v1\/memory_stores\/(memstore_[A-Za-z0-9_]+)(?:\/.*)?$/, api: true, environment: attachedStore(false), session: attachedStore(false) },
  { method: 'POST', path: /^\/v1\/memory_stores\/(memstore_[A-Za-z0-9_]+)\/(?:memories|memory_versions)(?:\/.*)?$/, api: true, environment: attachedStore(true), session: attachedStore(true) },
  { method: 'DELETE', path: /^\/v1\/memory_stores\/(memstore_[A-Za-z0-9_]+)\/memories\/.+$/, api: true, environment: attachedStore(true), session: attachedStore(true) },
]

const CREDENTIAL_NAME = { environment: 'an environment key', session: 'a sessions token' } as const

/**
 * Throws 403 `permission_error` when `p` may not call `method path`; returns otherwise. The API
 * token reaches everything but the few worker-only routes the spec names.
 */
export function authorize(p: Principal, method: string, path: string, services: ApiServices): void {
  for (const rule of RULES) {
    if (rule.method !== method) continue
    const m = rule.path.exec(path)
    if (!m) continue
    const allow: Allow | undefined = p.kind === 'api' ? rule.api : rule[p.kind]
    const reason = allow === true ? undefined : typeof allow === 'function' ? allow(p as Exclude<Principal, { kind: 'api' }>, m.slice(1), services) : typeof allow === 'string' ? allow : `${CREDENTIAL_NAME[p.kind as 'environment']} cannot call ${method} ${path}`
    if (reason) throw new CorralError('permission_error', `${method} ${path}: ${reason}`)
    return
  }
  if (p.kind !== 'api') {
    throw new CorralError(
      'permission_error',
      `${method} ${path}: ${CREDENTIAL_NAME[p.kind]} only reaches its environment's work queue and the sessions it serves; this route takes the API token`,
    )
  }
}
