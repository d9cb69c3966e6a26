import { Hono } from 'hono'
import { getRequestListener, RequestError } from '@hono/node-server'
import { createServer } from 'node:http'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { CorralError, isCorralError } from '../../shared/errors'
import { browserRequestRefusal, isAllowedOrigin, isLoopbackHost, ownOrigin, requestCredential, tokenMatches } from './auth'
import type { ApiServices } from './services'
import { authorize, setPrincipal, type Principal } from './principal'
import { workRoutes } from './routes/work'
import { agentRoutes } from './routes/agents'
import { environmentRoutes } from './routes/environments'
import { sessionRoutes } from './routes/sessions'
import { corralRoutes } from './routes/corral'
import { workspaceRoutes } from './routes/workspace'
import { searchRoutes } from './routes/search'
import { webhookRoutes } from './routes/webhooks'
import { workflowRunRoutes } from './routes/workflow-runs'
import { threadRoutes } from './routes/threads'
import { vaultRoutes } from './routes/vaults'
import { memoryStoreRoutes } from './routes/memory-stores'
import { fileRoutes } from './routes/files'
import { skillRoutes } from './routes/skills'
import { sessionResourceRoutes } from './routes/session-resources'
import { deploymentRoutes } from './routes/deployments'
import { dreamRoutes } from './routes/dreams'

export const SESSION_COOKIE = 'corral_token'

export interface ApiAppParams {
  services: ApiServices
  token: string
  /** Extra routes (renderer files, browser sign-in) mounted before the API's 404. */
  extend?: (app: Hono) => void
  /** Called with each unexpected (500) error; never with a token or a body. */
  onInternalError?: (err: unknown) => void
}

/**
 * The local Managed Agents API as a Hono app: loopback Host guard and own-Origin guard (403),
 * the token (401) from `Authorization: Bearer`, `x-api-key` or the browser cookie, the browser
 * rules for cookie-authenticated requests (403, see `browserRequestRefusal` and README.md), the
 * API's error envelope for every failure, the resource routes.
 */
/** The routes that take a multipart upload (files, skills), which the browser's renderer may POST as multipart/form-data. */
const UPLOAD_ROUTES = /^\/v1\/(?:files|skills|skills\/[^/]+\/versions)$/

export function createApiApp(params: ApiAppParams): Hono {
  const { services, token } = params
  const app = new Hono()

  app.use('*', async (c, next) => {
    const host = c.req.header('host')
    if (!isLoopbackHost(host)) throw new CorralError('permission_error', 'Host header is not a loopback name; Corral only answers on 127.0.0.1/localhost')
    const origin = c.req.header('origin')
    if (!isAllowedOrigin(origin, host)) throw new CorralError('permission_error', `cross-origin requests are not allowed: Origin ${JSON.stringify(origin)} is not this server's origin ${ownOrigin(host)}`)
    await next()
  })
  params.extend?.(app)
  app.use('/v1/*', async (c, next) => {
    const given = requestCredential(c.req.raw.headers, SESSION_COOKIE)
    if (!given) throw new CorralError('authentication_error', 'missing API token: send Authorization: Bearer <token>')
    if (given.via === 'cookie') {
      const refusal = browserRequestRefusal(c.req.raw, { upload: c.req.method === 'POST' && UPLOAD_ROUTES.test(c.req.path) })
      if (refusal) throw new CorralError('permission_error', refusal)
    }
    let principal: Principal = { kind: 'api' }
    if (!tokenMatches(given.token, token)) {
      // a worker's credential: an environment key or a sessions token, never through the browser's cookie
      const worker = given.via === 'cookie' ? undefined : services.work?.authenticate(given.token)
      if (!worker) throw new CorralError('authentication_error', 'invalid API token: not this Corral\'s token, nor a live environment key or sessions token')
      principal = worker
    }
    authorize(principal, c.req.method, new URL(c.req.url).pathname, services)
    setPrincipal(c.req.raw, principal)
    await next()
  })

  agentRoutes(app, services)
  environmentRoutes(app, services)
  workRoutes(app, services)
  sessionRoutes(app, services)
  threadRoutes(app, services)
  vaultRoutes(app, services)
  memoryStoreRoutes(app, services)
  fileRoutes(app, services)
  skillRoutes(app, services)
  sessionResourceRoutes(app, services)
  deploymentRoutes(app, services)
  dreamRoutes(app, services)
  corralRoutes(app, services)
  workspaceRoutes(app, services)
  searchRoutes(app, services)
  workflowRunRoutes(app, services)
  webhookRoutes(app, services)

  app.notFound((c) => c.json(new CorralError('not_found_error', `no route for ${c.req.method} ${new URL(c.req.url).pathname}`).toEnvelope(), 404))
  app.onError((err, c) => {
    if (isCorralError(err)) {
      if (err.shouldRetry !== undefined) c.header('x-should-retry', String(err.shouldRetry))
      return c.json(err.toEnvelope(), err.status as 400)
    }
    if (err instanceof SyntaxError) return c.json(new CorralError('invalid_request_error', 'body: not valid JSON').toEnvelope(), 400)
    params.onInternalError?.(err)
    return c.json(new CorralError('api_error', 'internal error; see the Corral log').toEnvelope(), 500)
  })
  return app
}

export interface ListeningServer {
  url: string
  port: number
  server: Server
  close(): Promise<void>
}

/** Listens on 127.0.0.1 only. Port 0 picks a free one. */
export async function listen(app: Hono, port: number): Promise<ListeningServer> {
  // A request the adapter cannot turn into a Request (a backslash in the path, a bad Host)
  // gets the API's error envelope, not an empty 400.
  const server = createServer(
    getRequestListener(app.fetch, {
      errorHandler: (err) => {
        const requestError = err instanceof RequestError
        const e = new CorralError(requestError ? 'invalid_request_error' : 'api_error', requestError ? `malformed request: ${(err as Error).message}` : 'internal error; see the Corral log')
        return new Response(JSON.stringify(e.toEnvelope()), { status: e.status, headers: { 'content-type': 'application/json' } })
      },
    }),
  ) as Server
  server.keepAliveTimeout = 65_000
  // A request Node's parser refuses (bad characters in the path, broken headers) still gets
  // the API's error envelope rather than a bare 400.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) return void socket.destroy()
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? '431 Request Header Fields Too Large' : '400 Bad Request'
    const body = JSON.stringify(new CorralError('invalid_request_error', `malformed HTTP request (${err.code ?? 'parse error'})`).toEnvelope())
    socket.end(`HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(err.code === 'EADDRINUSE' ? new CorralError('api_error', `port ${port} on 127.0.0.1 is in use; pass --port N or stop the other process`, { cause: err }) : err),
    )
    server.listen(port, '127.0.0.1', () => resolve())
  })
  const actual = (server.address() as AddressInfo).port
  return {
    url: `http://127.0.0.1:${actual}`,
    port: actual,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
