import { execFile, spawn } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import http from 'node:http'
import https from 'node:https'
import type { AddressInfo } from 'node:net'

/**
 * A real git smart-HTTP server for tests: `git http-backend` behind a small CGI bridge, over
 * HTTPS on 127.0.0.1, demanding `Authorization: Basic x-access-token:<token>` like GitHub.
 * Records the Authorization header of every request.
 */
export async function gitHttpServer(p: { projectRoot: string; token: string; tls: { cert: string; key: string } }) {
  const authSeen: string[] = []
  const expected = `Basic ${Buffer.from(`x-access-token:${p.token}`).toString('base64')}`
  const server = https.createServer(p.tls, (req: http.IncomingMessage, res: http.ServerResponse) => {
    authSeen.push(String(req.headers.authorization ?? ''))
    if (req.headers.authorization !== expected) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="test git"', 'content-type': 'text/plain' })
      res.end('authentication required\n')
      return
    }
    const url = new URL(req.url ?? '/', 'https://git.test')
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      GIT_PROJECT_ROOT: p.projectRoot,
      GIT_HTTP_EXPORT_ALL: '1',
      REQUEST_METHOD: req.method,
      PATH_INFO: decodeURIComponent(url.pathname),
      QUERY_STRING: url.search.slice(1),
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      REMOTE_USER: 'x-access-token',
      REMOTE_ADDR: '127.0.0.1',
      GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
      HTTP_CONTENT_ENCODING: String(req.headers['content-encoding'] ?? ''),
    }
    if (req.headers['content-length']) env.CONTENT_LENGTH = String(req.headers['content-length'])
    const cgi = spawn('git', ['http-backend'], { env, stdio: ['pipe', 'pipe', 'inherit'] })
    req.pipe(cgi.stdin)
    let head = Buffer.alloc(0)
    let headersDone = false
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headersDone) return void res.write(chunk)
      head = Buffer.concat([head, chunk])
      let end = head.indexOf('\r\n\r\n')
      let sep = 4
      if (end < 0) {
        end = head.indexOf('\n\n')
        sep = 2
      }
      if (end < 0) return
      headersDone = true
      let status = 200
      const headers: Record<string, string> = {}
      for (const line of head.subarray(0, end).toString('latin1').split(/\r?\n/)) {
        const i = line.indexOf(':')
        const k = line.slice(0, i).trim()
        const v = line.slice(i + 1).trim()
        if (k.toLowerCase() === 'status') status = parseInt(v, 10)
        else headers[k] = v
      }
      res.writeHead(status, headers)
      res.write(head.subarray(end + sep))
    })
    cgi.on('close', () => res.end())
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  return {
    port: (server.address() as AddressInfo).port,
    authSeen,
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()) }),
  }
}

const run = promisify(execFile)

/**
 * A bare repository `<root>/srv/acme/widgets.git` with one commit (README.md = `readme`), pushes
 * allowed over HTTP. Returns the project root to hand to gitHttpServer.
 */
export async function seedBareRepository(root: string, readme = 'widgets\n'): Promise<{ projectRoot: string }> {
  const projectRoot = join(root, 'srv')
  const bare = join(projectRoot, 'acme', 'widgets.git')
  mkdirSync(bare, { recursive: true })
  const env = { ...process.env, HOME: root, GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@x', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@x' }
  await run('git', ['init', '-q', '--bare', '-b', 'main', bare], { env })
  await run('git', ['config', 'http.receivepack', 'true'], { cwd: bare, env })
  const seed = join(root, 'seed')
  await run('git', ['init', '-q', '-b', 'main', seed], { env })
  writeFileSync(join(seed, 'README.md'), readme)
  await run('git', ['add', '.'], { cwd: seed, env })
  await run('git', ['commit', '-q', '-m', 'seed'], { cwd: seed, env })
  await run('git', ['push', '-q', bare, 'main'], { cwd: seed, env })
  return { projectRoot }
}
