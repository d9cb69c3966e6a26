/**
 * The IPC adapter: the renderer's transport in the desktop app. It offers the same operations as
 * the HTTP API (the table in src/shared/api/operations.ts) plus live session streams. Every input
 * is validated here, at the boundary, with the same zod schemas the HTTP routes use; a call is
 * then dispatched in-process to the very same Hono routes (no socket), so both transports reach
 * the same service methods and answer with the same errors.
 *
 * No electron import: src/main/index.ts checks each message's sender and hands it to this adapter.
 */
import type { Hono } from 'hono'
import { z } from 'zod'
import {
  agentCreateSchema,
  agentUpdateSchema,
  credentialCreateSchema,
  credentialUpdateSchema,
  describeZodError,
  environmentCreateSchema,
  environmentUpdateSchema,
  eventSendSchema,
  sessionCreateSchema,
  sessionResourceAddSchema,
  sessionUpdateSchema,
  vaultCreateSchema,
  vaultUpdateSchema,
} from '../../shared/api/schemas'
import {
  OPERATIONS,
  OPERATION_NAMES,
  PATH_PARAM_PATTERN,
  operationPath,
  toQueryString,
  type IpcResult,
  type OperationName,
  type QueryValue,
  type StreamMessage,
} from '../../shared/api/operations'
import { CorralError, isCorralError } from '../../shared/errors'
import { isOnThreadStream, threadKeyOf, type ThreadKey } from '../../shared/api/events'
import { changesRevertSchema } from '../../shared/api/workspace'
import { deploymentCreateSchema, deploymentUpdateSchema } from '../../shared/api/deployment-schemas'
import { memoryCreateSchema, memoryUpdateSchema } from '../../shared/api/memory-schemas'
import { dreamCreateSchema } from '../../shared/api/dream-schemas'
import { webhookCreateSchema, webhookUpdateSchema } from '../../shared/api/webhook-schemas'
import { corralSkillUploadSchema, corralSkillVersionUploadSchema } from '../../shared/api/skill-schemas'
import type { ApiServices } from './services'

/** Bodies of the POST operations, validated before dispatch. Archive operations take none. */
const BODY_SCHEMAS: Partial<Record<OperationName, z.ZodType>> = {
  'agents.create': agentCreateSchema,
  'agents.update': agentUpdateSchema,
  'environments.create': environmentCreateSchema,
  'environments.update': environmentUpdateSchema,
  'sessions.create': sessionCreateSchema,
  'sessions.update': sessionUpdateSchema,
  'events.send': eventSendSchema,
  'changes.revert': changesRevertSchema,
  'sessionResources.add': sessionResourceAddSchema,
  'deployments.create': deploymentCreateSchema,
  'deployments.update': deploymentUpdateSchema,
  'memories.create': memoryCreateSchema,
  'memories.update': memoryUpdateSchema,
  'dreams.create': dreamCreateSchema,
  'skills.upload': corralSkillUploadSchema,
  'skills.versions.upload': corralSkillVersionUploadSchema,
  'vaults.create': vaultCreateSchema,
  'vaults.update': vaultUpdateSchema,
  'credentials.create': credentialCreateSchema,
  'credentials.update': credentialUpdateSchema,
  'webhooks.create': webhookCreateSchema,
  'webhooks.update': webhookUpdateSchema,
}

const opSchema = z.enum(OPERATION_NAMES as [OperationName, ...OperationName[]])
const idSchema = z.string().regex(PATH_PARAM_PATTERN, 'an id: letters, digits and _')
const pathParamsSchema = z.strictObject({ id: idSchema.optional(), threadId: idSchema.optional(), keyId: idSchema.optional(), memoryId: idSchema.optional(), versionId: idSchema.optional(), runId: idSchema.optional(), credentialId: idSchema.optional() })
const queryPrimitive = z.union([z.string().max(4096), z.number(), z.boolean()])
const querySchema = z.record(z.string().max(64), z.union([queryPrimitive, z.array(queryPrimitive).max(100), z.null(), z.undefined()]))
const uploadSchema = z.strictObject({
  name: z.string().min(1, 'a file name').max(255),
  type: z.string().max(255).optional(),
  bytes: z.union([z.instanceof(Uint8Array), z.instanceof(ArrayBuffer)]),
})
const subscribeSchema = z.strictObject({
  sessionId: idSchema,
  thread: idSchema.optional(),
  after: z.number().int().min(0).optional(),
  previews: z.boolean().optional(),
})

export interface IpcAdapterParams {
  /** The engine's Hono app (the HTTP API's routes). */
  app: Hono
  /** The engine's API token: in-process calls pass the same auth as any client. */
  token: string
  services: ApiServices
}

export interface IpcAdapter {
  /** One operation. Never throws: a failure is `{ ok: false }` with the API's error type and message. */
  call(op: unknown, pathParams: unknown, payload: unknown): Promise<IpcResult>
  /**
   * Opens a live stream of one session; `send` gets each stored event (with its seq) and, when
   * asked, the previews. Returns a disposer, or an error result for bad input / unknown session.
   */
  subscribe(params: unknown, send: (msg: StreamMessage) => void): { ok: true; dispose: () => void } | Extract<IpcResult, { ok: false }>
  /**
   * One file to the files API (`POST /v1/files`, as a multipart body built here): `{ name, type,
   * bytes }` with the bytes as a Uint8Array or ArrayBuffer. Answers the file's metadata, or the
   * route's error (a 413 over the cap). Never throws.
   */
  uploadFile(input: unknown): Promise<IpcResult>
}

function failure(err: unknown): Extract<IpcResult, { ok: false }> {
  const e = isCorralError(err) ? err : new CorralError('api_error', 'internal error; see the Corral log', { cause: err })
  return { ok: false, status: e.status, error: e.toEnvelope().error }
}

function invalidInput(where: string, error: z.ZodError): Extract<IpcResult, { ok: false }> {
  return failure(new CorralError('invalid_request_error', `invalid ${where}: ${describeZodError(error)}`))
}

/** Builds the adapter. It owns nothing but its subscriptions, which their disposers end. */
export function createIpcAdapter(params: IpcAdapterParams): IpcAdapter {
  const { app, token, services } = params
  /** Sends one request to the engine's routes in-process and answers it as an IpcResult. */
  const dispatch = async (url: string, init: RequestInit): Promise<IpcResult> => {
    try {
      const res = await app.request(`http://127.0.0.1${url}`, init)
      const data: unknown = await res.json()
      if (res.ok) return { ok: true, data }
      const error = (data as { error?: { type?: string; message?: string } }).error
      return { ok: false, status: res.status, error: { type: error?.type ?? 'api_error', message: error?.message ?? `HTTP ${res.status}` } }
    } catch (err) {
      return failure(err)
    }
  }
  return {
    async call(opIn, pathIn, payload) {
      const op = opSchema.safeParse(opIn)
      if (!op.success) return failure(new CorralError('invalid_request_error', `operation: ${JSON.stringify(opIn)} is not an operation of the contract`))
      const path = pathParamsSchema.safeParse(pathIn ?? {})
      if (!path.success) return invalidInput('path parameters', path.error)
      const spec = OPERATIONS[op.data]
      let url: string
      try {
        url = operationPath(op.data, path.data as Record<string, string>)
      } catch (err) {
        return failure(new CorralError('invalid_request_error', (err as Error).message))
      }
      const init: RequestInit = { method: spec.method, headers: { host: '127.0.0.1', authorization: `Bearer ${token}` } }
      if (spec.method === 'GET') {
        const q = querySchema.safeParse(payload ?? {})
        if (!q.success) return invalidInput('query', q.error)
        url += toQueryString(q.data as Record<string, QueryValue>)
      } else {
        const schema = BODY_SCHEMAS[op.data]
        if (schema) {
          const body = schema.safeParse(payload)
          if (!body.success) return invalidInput('body', body.error)
          init.body = JSON.stringify(body.data)
          ;(init.headers as Record<string, string>)['content-type'] = 'application/json'
        } else if (payload !== undefined && payload !== null) {
          return failure(new CorralError('invalid_request_error', `${op.data} takes no body`))
        }
      }
      return dispatch(url, init)
    },

    async uploadFile(input) {
      const p = uploadSchema.safeParse(input)
      if (!p.success) return invalidInput('upload', p.error)
      const form = new FormData()
      const bytes = p.data.bytes instanceof Uint8Array ? p.data.bytes : new Uint8Array(p.data.bytes)
      form.append('file', new Blob([bytes as Uint8Array<ArrayBuffer>], { type: p.data.type || 'application/octet-stream' }), p.data.name)
      return dispatch('/v1/files', { method: 'POST', headers: { host: '127.0.0.1', authorization: `Bearer ${token}` }, body: form })
    },

    subscribe(input, send) {
      const p = subscribeSchema.safeParse(input)
      if (!p.success) return invalidInput('subscription', p.error)
      try {
        services.sessions.retrieve(p.data.sessionId)
      } catch (err) {
        return failure(err)
      }
      const { sessionId } = p.data
      // The view HTTP streams have (isOnThreadStream): the session's, or one thread's.
      let view: { sessionId: string; thread: ThreadKey }
      try {
        view = { sessionId, thread: p.data.thread === undefined ? null : services.threads.logKey(sessionId, p.data.thread) }
      } catch (err) {
        return failure(err)
      }
      const after = p.data.after ?? services.log.lastSeq(sessionId)
      const otherThreads = new Set<string>()
      const disposers: (() => void)[] = []
      disposers.push(
        services.log.tail(sessionId, after, (stored) => {
          if (isOnThreadStream(stored.event, view)) send({ kind: 'event', seq: stored.seq, event: stored.event })
        }),
      )
      if (p.data.previews) {
        disposers.push(
          services.previews.subscribe(sessionId, (preview) => {
            const kind = preview.type === 'event_start' ? (preview.event as { type?: string } | undefined)?.type : undefined
            if (preview.type === 'event_start' && kind !== 'agent.message' && kind !== 'agent.thinking' && kind !== 'agent.tool_result') return
            // A preview is of its own thread's stream only: a start of another thread's event, and its deltas, are not sent.
            if (preview.type === 'event_start') {
              const ev = (preview.event ?? {}) as { id?: string; session_thread_id?: string | null }
              if (threadKeyOf(ev, sessionId) !== view.thread) {
                if (typeof ev.id === 'string') otherThreads.add(ev.id)
                return
              }
            } else if (otherThreads.has(String(preview.event_id))) return
            send({ kind: 'preview', preview })
          }),
        )
      }
      let disposed = false
      return {
        ok: true,
        dispose: () => {
          if (disposed) return
          disposed = true
          for (const d of disposers) d()
        },
      }
    },
  }
}
