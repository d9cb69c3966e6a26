/** Id prefixes of the Managed Agents API. Every resource id Corral makes carries one. */
export const ID_PREFIX = {
  agent: 'agent_',
  environment: 'env_',
  session: 'sesn_',
  event: 'sevt_',
  thread: 'sthr_',
  vault: 'vlt_',
  credential: 'vcrd_',
  memoryStore: 'memstore_',
  memory: 'mem_',
  memoryVersion: 'memver_',
  work: 'work_',
  workflowRun: 'wrun_',
  workflowPhase: 'wrph_',
  resource: 'sesrsc_',
  file: 'file_',
  skill: 'skill_',
  /** Corral addition: an environment key's id (the key itself is never stored). */
  environmentKey: 'envkey_',
  /** Corral's own: a sessions token minted at a work delivery (internal id, never on the wire). */
  sessionsToken: 'stok_',
  deployment: 'depl_',
  deploymentRun: 'drun_',
  outcome: 'outc_',
  dream: 'drm_',
  /** Corral's own (the hosted API's is unpublished): a webhook endpoint. */
  webhookEndpoint: 'whep_',
  /** Corral's own: a webhook event (the payload's `id`, the `webhook-id` header). */
  webhookEvent: 'wevt_',
} as const

export type IdKind = keyof typeof ID_PREFIX

/**
 * The primary thread of a session exists implicitly (no `session.thread_created` event): its id
 * is the session id's body under the thread prefix, so anyone can compute it from the session id.
 * Its events are the ones logged without a `session_thread_id`.
 */
export function primaryThreadId(sessionId: string): string {
  return ID_PREFIX.thread + sessionId.slice(ID_PREFIX.session.length)
}

const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ' // Crockford base32: sortable, no I L O U

/**
 * A new id: prefix + 10 chars of millisecond time + 16 random chars (Crockford base32),
 * so ids sort by creation time like the API's. `random` is injectable for tests.
 */
export function newId(kind: IdKind, now = Date.now(), random: (n: number) => Uint8Array = randomBytes): string {
  let time = ''
  let t = now
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32] + time
    t = Math.floor(t / 32)
  }
  const bytes = random(16)
  let rand = ''
  for (let i = 0; i < 16; i++) rand += ALPHABET[bytes[i] % 32]
  return ID_PREFIX[kind] + time + rand
}

/** Random bytes handed out from a pool filled 4 KiB at a time (one getRandomValues call per 256 ids, not one each). */
const POOL_SIZE = 4096
let pool = new Uint8Array(0)
let poolAt = 0
function randomBytes(n: number): Uint8Array {
  if (n > POOL_SIZE) return globalThis.crypto.getRandomValues(new Uint8Array(n))
  if (poolAt + n > pool.length) {
    pool = globalThis.crypto.getRandomValues(new Uint8Array(POOL_SIZE))
    poolAt = 0
  }
  const out = pool.subarray(poolAt, poolAt + n)
  poolAt += n
  return out
}

/** True when `id` has the prefix of `kind` and nothing else suspicious (length, alphabet). */
export function hasIdShape(kind: IdKind, id: string): boolean {
  const p = ID_PREFIX[kind]
  return id.length > p.length && id.length <= 64 && id.startsWith(p) && /^[A-Za-z0-9_]+$/.test(id)
}
