import { spawn, type ChildProcess } from 'node:child_process'
import { join } from 'node:path'

const ROOT = join(__dirname, '..', '..', '..')

export interface ServeProcess {
  url: string
  /** Everything the process printed, for failure messages. */
  output(): string
  /** SIGTERM, then waits for the process to exit (the engine closes cleanly). */
  stop(): Promise<void>
  /** One API request with the token (JSON in, JSON out); an answer that is not 2xx throws with its status and body. */
  api<T = Record<string, any>>(method: string, path: string, body?: unknown): Promise<T>
}

export interface ServeParams {
  dataDir: string
  token: string
  /** The scripted model server's URL (ANTHROPIC_BASE_URL). */
  modelUrl?: string
  /** A port to listen on (default: any free one). */
  port?: number
  /** No model key in the environment (a first run); default: a fake key is set. */
  noApiKey?: boolean
  /** Extra environment (DOCKER_HOST, CORRAL_SANDBOX_IMAGE_REPO, ...). */
  env?: NodeJS.ProcessEnv
}

/**
 * Starts the real `corral serve` (out/cli/corral.js, built by the global setup, as `npm run serve`
 * runs it) on a free port on 127.0.0.1, and resolves once it prints its URL.
 */
export async function startServe(p: ServeParams): Promise<ServeProcess> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    CORRAL_TOKEN: p.token,
    CORRAL_DATA_DIR: p.dataDir,
    ANTHROPIC_API_KEY: 'test-key-not-real',
    // No session bus: the keychain answers at once that it is unavailable; the env wins anyway.
    DBUS_SESSION_BUS_ADDRESS: 'unix:path=/nonexistent',
  }
  if (p.modelUrl) env.ANTHROPIC_BASE_URL = p.modelUrl
  else delete env.ANTHROPIC_BASE_URL
  if (p.noApiKey) delete env.ANTHROPIC_API_KEY
  Object.assign(env, p.env)
  const child: ChildProcess = spawn(process.execPath, [join(ROOT, 'out/cli/corral.js'), 'serve', '--port', String(p.port ?? 0), '--data-dir', p.dataDir], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`corral serve did not start in 30 s:\n${out}`)), 30_000)
    const onData = (b: Buffer) => {
      out += b.toString()
      const m = /serving on (http:\/\/127\.0\.0\.1:\d+)/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve(m[1])
      }
    }
    child.stdout!.on('data', onData)
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()))
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`corral serve exited with ${code}:\n${out}`))
    })
  })
  return {
    url,
    output: () => out,
    api: async <T,>(method: string, path: string, body?: unknown): Promise<T> => {
      const r = await fetch(`${url}${path}`, { method, headers: { authorization: `Bearer ${p.token}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) })
      if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`)
      return (await r.json()) as T
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve()
        const kill = setTimeout(() => child.kill('SIGKILL'), 10_000)
        child.once('exit', () => {
          clearTimeout(kill)
          resolve()
        })
        child.kill('SIGTERM')
      }),
  }
}
