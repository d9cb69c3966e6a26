import { execFile } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import Docker from 'dockerode'
import { containerSpec } from '../../../src/main/hands/docker/docker-sandbox'
import { bwrapArgs } from '../../../src/main/hands/bubblewrap/bubblewrap-sandbox'
import { defaultImage, runnerPath } from '../../../src/main/hands/paths'
import { sandboxSettings } from '../../../src/main/hands/settings'
import type { Sandbox, SandboxCall, SandboxProvider, SandboxProvisionParams, SandboxResult } from '../../../src/main/hands/sandbox'
import type { EgressHandle } from '../../../src/main/vault/egress-proxy'

/*
 * Sandboxes with egress, for the vault's tests, until the hands' providers take an egress
 * option: the hands' own hardening (their exported containerSpec / bwrapArgs) plus the session's
 * egress mount, environment and bridge. Commands run with `docker exec` / one `bwrap` each, not
 * through the runner; every command is real and runs in the real sandbox.
 */

const run = promisify(execFile)

/** Runs one shell command in the sandbox; resolves with its combined output. */
export type Shell = (command: string) => Promise<string>

export interface Target {
  shell: Shell
  stop(): Promise<void>
}

export async function waitForBridge(shell: Shell): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const out = await shell(`python3 -c "import socket; socket.create_connection(('127.0.0.1', 3128), 1); print('UP')" 2>&1 || true`)
    if (out.includes('UP')) return
    await new Promise((r) => setTimeout(r, 50))
  }
  throw new Error('the egress bridge did not come up in the sandbox')
}

export async function dockerTarget(handle: EgressHandle): Promise<Target> {
  const docker = new Docker()
  const spec = containerSpec({ image: defaultImage(), settings: sandboxSettings({}), volume: `corral-test-egress-${process.pid}-${Date.now()}`, labels: { 'corral.test': 'vault-egress' }, bindRunner: false })
  spec.Cmd = ['sleep', 'infinity']
  spec.OpenStdin = false
  spec.AttachStdin = false
  spec.Env = [...(spec.Env ?? []), ...Object.entries(handle.env).map(([k, v]) => `${k}=${v}`)]
  spec.HostConfig!.Mounts = [...(spec.HostConfig!.Mounts ?? []), { Type: 'bind', Source: handle.dir, Target: handle.sandboxDir, ReadOnly: true }]
  const container = await docker.createContainer(spec)
  await container.start()
  const id = container.id
  await run('docker', ['exec', '-d', id, ...handle.bridgeCommand])
  const shell: Shell = async (command) => {
    const r = await run('docker', ['exec', id, 'bash', '-c', command], { maxBuffer: 16 * 1024 * 1024 }).catch((e: { stdout: string; stderr: string }) => e)
    return `${r.stdout}${r.stderr}`
  }
  await waitForBridge(shell)
  return {
    shell,
    stop: async () => {
      await container.remove({ force: true, v: true }).catch(() => {})
      await docker.getVolume(spec.HostConfig!.Mounts![0]!.Source!).remove().catch(() => {})
    },
  }
}

export async function bubblewrapTarget(handle: EgressHandle, dir: string): Promise<Target> {
  const sessionDir = join(dir, 'bwrap-session')
  mkdirSync(join(sessionDir, 'workspace'), { recursive: true })
  mkdirSync(join(sessionDir, 'etc'), { recursive: true })
  writeFileSync(join(sessionDir, 'etc/passwd'), 'corral:x:1000:1000::/home/corral:/bin/bash\n')
  writeFileSync(join(sessionDir, 'etc/group'), 'corral:x:1000:\n')
  const base = bwrapArgs({ sessionDir, settings: sandboxSettings({}), runner: runnerPath() })
  // Their command line ends with `<node> /opt/corral/runner.js`; keep every flag before it, add the egress mount and env.
  if (base.at(-1) !== '/opt/corral/runner.js') throw new Error(`bwrapArgs no longer ends with the runner: ${base.slice(-3).join(' ')}`)
  const flags = base.slice(0, -2)
  const egress = ['--ro-bind', handle.dir, handle.sandboxDir, ...Object.entries(handle.env).flatMap(([k, v]) => ['--setenv', k, v])]
  const shell: Shell = async (command) => {
    // One bwrap per command, as a fresh process tree; the bridge runs beside the command.
    const script = `${handle.bridgeCommand.join(' ')} >/dev/null 2>&1 & for i in $(seq 100); do python3 -c "import socket; socket.create_connection(('127.0.0.1', 3128), 1)" 2>/dev/null && break; sleep 0.05; done; ${command}`
    const r = await run('bwrap', [...flags, ...egress, 'bash', '-c', script], { env: { PATH: process.env.PATH }, maxBuffer: 16 * 1024 * 1024 }).catch((e: { stdout: string; stderr: string }) => e)
    return `${r.stdout}${r.stderr}`
  }
  return { shell, stop: async () => {} }
}


/** A python3 program (heredoc) for a sandbox shell. */
export const py = (code: string) => `python3 - <<'PY'\nimport os, urllib.request, urllib.error\n${code}\nPY`
/** python3 urllib GET/POST through the sandbox's proxy variables (or around them); prints STATUS/HTTPERROR/ERR. */
export const fetchPy = (url: string, headers = '{}', proxy = true, cafile?: string) =>
  py(`import ssl
handlers = [${proxy ? '' : 'urllib.request.ProxyHandler({})'}]
${cafile ? `handlers.append(urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=${JSON.stringify(cafile)})))` : ''}
opener = urllib.request.build_opener(*[h for h in handlers if h])
try:
    r = opener.open(urllib.request.Request(${JSON.stringify(url)}, headers=${headers}), timeout=10)
    print('STATUS', r.status)
    print(r.read().decode())
except urllib.error.HTTPError as e:
    print('HTTPERROR', e.code, e.read().decode())
except Exception as e:
    print('ERR', type(e).__name__, e)`)

/** python3 urllib request with a body; `url` and `headers`/`body` are Python expressions. */
export const requestPy = (p: { url: string; method?: string; headers?: string; body?: string }) =>
  py(`try:
    req = urllib.request.Request(${p.url}, method=${JSON.stringify(p.method ?? 'GET')}, headers=${p.headers ?? '{}'}, data=${p.body ? `(${p.body}).encode()` : 'None'})
    r = urllib.request.urlopen(req, timeout=10)
    print('STATUS', r.status)
    print(r.read().decode())
except urllib.error.HTTPError as e:
    print('HTTPERROR', e.code, e.read().decode())
except Exception as e:
    print('ERR', type(e).__name__, e)`)

/** A SandboxProvider over those targets (bash only), so the real engine and harness drive them. */
export class EgressTestSandboxProvider implements SandboxProvider {
  constructor(
    readonly backend: 'docker' | 'bubblewrap',
    private readonly p: { dir: string; egressFor(sessionId: string): Promise<EgressHandle | undefined>; release(sessionId: string): Promise<void> },
  ) {}

  async available(): Promise<{ ok: boolean; reason?: string }> {
    return { ok: true }
  }

  create(params: SandboxProvisionParams): Sandbox {
    let target: Promise<Target> | undefined
    const provision = () => {
      target ??= (async () => {
        const handle = await this.p.egressFor(params.sessionId)
        if (!handle) throw new Error(`session ${params.sessionId} has no egress`)
        const dir = join(this.p.dir, params.sessionId)
        mkdirSync(dir, { recursive: true })
        return this.backend === 'docker' ? dockerTarget(handle) : bubblewrapTarget(handle, dir)
      })()
      return target
    }
    return {
      backend: this.backend,
      provision: async () => {
        await provision()
      },
      execute: async (call: SandboxCall): Promise<SandboxResult> => {
        if (call.name !== 'bash') return { content: `${call.name} is not available in this test sandbox`, isError: true }
        const out = await (await provision()).shell(String(call.input.command ?? ''))
        return { content: out, isError: false }
      },
      dispose: async () => {
        await (await target?.catch(() => undefined))?.stop()
        await this.p.release(params.sessionId)
      },
    }
  }

  async dispose(): Promise<void> {}
}
