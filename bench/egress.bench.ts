/**
 * Egress into sandboxes: what the session's way out through Corral's proxy costs.
 *   - start → first command with egress vs without (Docker cold, Docker warm-pool hit, bubblewrap),
 *     interleaved so machine load hits both alike: the extra is the egress op (env + bridge start);
 *   - HTTP GET round trips from inside the sandbox through the bridge and the proxy (credential
 *     injected, and without one: both are scrubbed) to a local upstream, with keep-alive, measured
 *     by a Node loop in the sandbox.
 *   - the same GETs on the proxy's own socket (no sandbox, no bridge), with and without a
 *     placeholder interleaved: the proxy's share, least disturbed by a loaded machine.
 * The upstream is a local HTTP server behind the proxy's injectable resolver/dialer (no network).
 */
import { mkdtempSync, rmSync } from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Docker from 'dockerode'
import { BubblewrapSandboxProvider } from '../src/main/hands/bubblewrap/bubblewrap-sandbox'
import { DockerSandboxProvider } from '../src/main/hands/docker/provider'
import type { Sandbox, SandboxEgressSource, SandboxProvider } from '../src/main/hands/sandbox'
import { EgressCertificateAuthority } from '../src/main/vault/egress-ca'
import { EgressProxy, SANDBOX_EGRESS_DIR, type EgressHandle, type EgressPolicy } from '../src/main/vault/egress-proxy'
import { summary } from './stats'

let seq = 0
const sid = (p: string) => `sesn_begress${p}${Date.now().toString(36)}${(seq++).toString(36)}`
const ms = (t0: number) => performance.now() - t0

const POLICY: EgressPolicy = {
  networking: { type: 'limited', allowedHosts: ['api.example.test'] },
  credentials: [{ credentialId: 'vcrd_bench', secretName: 'API_TOKEN', hosts: ['api.example.test'], header: true, body: false, plainHttpHosts: ['api.example.test:80'], secret: async () => 'bench-secret' }],
  repositories: [],
}

/** In the sandbox: N sequential keep-alive GETs through the proxy variables' proxy; prints one duration per line. */
const requestLoop = (n: number, withSecret = true) =>
  `node -e '
const http = require("http"); const agent = new http.Agent({ keepAlive: true, maxSockets: 1 }); const out = [];
(async () => { for (let i = 0; i < ${n}; i++) { const t0 = process.hrtime.bigint();
  await new Promise((res, rej) => http.get({ host: "127.0.0.1", port: 3128, path: "http://api.example.test/x", agent, headers: { host: "api.example.test"${withSecret ? ', authorization: "Bearer " + process.env.API_TOKEN' : ''} } }, (r) => { r.resume(); r.on("end", res) }).on("error", rej));
  out.push(Number(process.hrtime.bigint() - t0) / 1e6) } console.log(out.join("\\n")) })().catch((e) => { console.log("ERR " + e.message); process.exit(1) })'`

async function firstCommand(sandbox: Sandbox): Promise<number> {
  const t0 = performance.now()
  const r = await sandbox.execute({ toolUseId: `toolu_first_${seq++}`, name: 'bash', input: { command: 'true' } })
  if (r.isError) throw new Error(r.content)
  return ms(t0)
}

async function requests(sandbox: Sandbox, n: number, withSecret = true): Promise<number[]> {
  const r = await sandbox.execute({ toolUseId: `toolu_loop_${seq++}`, name: 'bash', input: { command: requestLoop(n, withSecret) } })
  if (r.isError || /ERR/.test(r.content)) throw new Error(r.content)
  return r.content.trim().split('\n').map(Number)
}

export async function run(log: (message: string) => void): Promise<Record<string, unknown>> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-egress-'))
  const upstream = http.createServer((req, res) => {
    req.resume()
    req.on('end', () => res.end('ok'))
  })
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
  const upstreamPort = (upstream.address() as AddressInfo).port
  const proxy = new EgressProxy({
    runtimeDir: join(dir, 'e'),
    ca: EgressCertificateAuthority.generate(),
    resolver: async (host) => (host === 'api.example.test' ? ['203.0.113.10'] : []),
    dialer: (address, port) =>
      new Promise<Duplex>((resolve, reject) => {
        if (address !== '203.0.113.10' || port !== 80) return reject(new Error(`no route to ${address}:${port}`))
        const s = net.connect({ host: '127.0.0.1', port: upstreamPort, noDelay: true })
        s.once('connect', () => resolve(s))
        s.once('error', reject)
      }),
  })
  const handles: EgressHandle[] = []
  const egressFor = (sessionId: string): SandboxEgressSource => {
    let h: Promise<EgressHandle> | undefined
    return {
      open: (d) => (h ??= proxy.open({ sessionId, policy: POLICY, dir: d }).then((x) => (handles.push(x), x))),
      release: async () => (await h)?.close(),
    }
  }
  const out: Record<string, unknown> = {}
  try {
    log('proxy alone: 2 × 1000 keep-alive GETs on its socket, with and without a placeholder, interleaved')
    out.proxy_only = await proxyOnlyBench(proxy)
    const docker = new DockerSandboxProvider({ docker: new Docker(), scope: 'bench-egress', reserveEgressDir: async () => ({ dir: proxy.reserveDir(), sandboxDir: SANDBOX_EGRESS_DIR }) })
    if ((await docker.available()).ok) out.docker = await dockerBench(docker, egressFor, log)
    else out.docker = { skipped: (await docker.available()).reason }
    await docker.dispose()
    const bwrap = new BubblewrapSandboxProvider({ dataDir: join(dir, 'bwrap') })
    if ((await bwrap.available()).ok) out.bubblewrap = await bubblewrapBench(bwrap, egressFor, log)
    else out.bubblewrap = { skipped: (await bwrap.available()).reason }
    await bwrap.dispose()
  } finally {
    await proxy.dispose()
    await new Promise((r) => upstream.close(r))
    rmSync(dir, { recursive: true, force: true })
  }
  return out
}

async function pair(provider: SandboxProvider, n: number, config: Record<string, unknown>, egressFor: (id: string) => SandboxEgressSource, before?: () => Promise<unknown>): Promise<{ with: number[]; without: number[] }> {
  const withE: number[] = []
  const without: number[] = []
  for (let i = 0; i < n; i++) {
    for (const egress of [true, false]) {
      await before?.()
      const id = sid(egress ? 'e' : 'n')
      const s = provider.create({ sessionId: id, environmentId: 'env_bench_egress', config, egress: egress ? egressFor(id) : undefined })
      ;(egress ? withE : without).push(await firstCommand(s))
      await s.dispose({ removeWorkspace: true })
    }
  }
  return { with: withE, without }
}

function compare(p: { with: number[]; without: number[] }) {
  const a = summary(p.with)
  const b = summary(p.without)
  return { with_egress: a, without_egress: b, extra_p50_ms: Math.round((a.p50_ms - b.p50_ms) * 1000) / 1000 }
}

async function dockerBench(provider: DockerSandboxProvider, egressFor: (id: string) => SandboxEgressSource, log: (m: string) => void): Promise<Record<string, unknown>> {
  const cold = { type: 'cloud', corral: { pool_size: 0, memory_mb: 512, pids: 256, cpus: 1 } }
  log('docker: cold provision → first command, with and without egress (6 + 6, interleaved)')
  const coldPair = await pair(provider, 6, cold, egressFor)
  log('docker: warm-pool hit → first command, with and without egress (5 + 5)')
  const warm = { type: 'cloud', corral: { ...cold.corral, pool_size: 1 } }
  const warmPair = await pair(provider, 5, warm, egressFor, () => provider.warm({ environmentId: 'env_bench_egress', config: warm }))
  log('docker: 200 GETs through the bridge and the proxy')
  const id = sid('r')
  const s = provider.create({ sessionId: id, environmentId: 'env_bench_egress', config: cold, egress: egressFor(id) })
  await requests(s, 20)
  const rt = await requests(s, 200)
  const plain = await requests(s, 200, false)
  await s.dispose({ removeWorkspace: true })
  return { cold_provision_to_first_command: compare(coldPair), warm_pool_hit_to_first_command: compare(warmPair), http_get_through_proxy_keepalive: summary(rt), http_get_through_proxy_keepalive_no_secret: summary(plain) }
}

async function bubblewrapBench(provider: BubblewrapSandboxProvider, egressFor: (id: string) => SandboxEgressSource, log: (m: string) => void): Promise<Record<string, unknown>> {
  log('bubblewrap: start → first command, with and without egress (8 + 8, interleaved)')
  const p = await pair(provider, 8, { type: 'cloud' }, egressFor)
  log('bubblewrap: 200 GETs through the bridge and the proxy')
  const id = sid('r')
  const s = provider.create({ sessionId: id, environmentId: 'env_bench_egress', config: { type: 'cloud' }, egress: egressFor(id) })
  await requests(s, 20)
  const rt = await requests(s, 200)
  const plain = await requests(s, 200, false)
  await s.dispose({ removeWorkspace: true })
  return { start_to_first_command: compare(p), http_get_through_proxy_keepalive: summary(rt), http_get_through_proxy_keepalive_no_secret: summary(plain) }
}

/** Keep-alive GETs straight to the proxy's socket, with and without the placeholder, interleaved. */
async function proxyOnlyBench(proxy: EgressProxy): Promise<Record<string, unknown>> {
  const h = await proxy.open({ sessionId: sid('p'), policy: POLICY })
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  const get = (withSecret: boolean) =>
    new Promise<number>((resolve, reject) => {
      const t0 = performance.now()
      const headers = { host: 'api.example.test', ...(withSecret ? { authorization: `Bearer ${h.env.API_TOKEN}` } : {}) }
      http.get({ socketPath: h.socketPath, path: 'http://api.example.test/x', agent, headers }, (r) => {
        r.resume()
        r.on('end', () => resolve(ms(t0)))
      }).on('error', reject)
    })
  try {
    for (let i = 0; i < 50; i++) await get(i % 2 === 0)
    const withSecret: number[] = []
    const without: number[] = []
    for (let i = 0; i < 1000; i++) {
      withSecret.push(await get(true))
      without.push(await get(false))
    }
    return { keepalive_get_with_secret: summary(withSecret), keepalive_get_without_secret: summary(without) }
  } finally {
    agent.destroy()
    await h.close()
  }
}
