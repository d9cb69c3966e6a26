import https from 'node:https'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { summary } from './stats'
import { EgressCertificateAuthority } from '../src/main/vault/egress-ca'
import { EgressProxy, placeholderFor } from '../src/main/vault/egress-proxy'
import { KeyringKeychain } from '../src/main/vault/keyring-keychain'
import { echoServer, fakeDialer, fakeResolver, upstreamPki, viaProxy } from '../test/integration/vault/egress-helpers'

/**
 * The egress proxy's cost per request, each on a fresh connection (as a tool call's curl or git
 * makes them): direct HTTPS to the upstream vs a blind CONNECT tunnel vs an intercepted tunnel
 * that injects a credential; leaf-certificate issuance for a host seen first; keyring latency
 * when a session bus is there.
 */
export async function run(log: (m: string) => void): Promise<Record<string, unknown>> {
  const N = Number(process.env.VAULT_BENCH_N ?? 200)
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-vault-'))
  const pki = upstreamPki(['api.example.test', 'other.example.test'])
  const upstream = await echoServer({ cert: pki.cert, key: pki.key })
  const ca = EgressCertificateAuthority.generate()
  const proxy = new EgressProxy({
    runtimeDir: join(dir, 'egress'),
    ca,
    resolver: fakeResolver({ 'api.example.test': ['203.0.113.10'], 'other.example.test': ['203.0.113.11'] }),
    dialer: fakeDialer({ '203.0.113.10:443': upstream.port, '203.0.113.11:443': upstream.port }),
    upstreamCa: [pki.caPem],
  })
  const handle = await proxy.open({
    sessionId: 'sesn_bench',
    policy: {
      networking: { type: 'limited', allowedHosts: ['api.example.test', 'other.example.test'] },
      credentials: [{ credentialId: 'vcrd_b', secretName: 'K', hosts: ['api.example.test'], header: true, body: false, secret: async () => 'bench-secret' }],
      repositories: [],
    },
  })
  const time = async (label: string, once: () => Promise<unknown>) => {
    for (let i = 0; i < 10; i++) await once()
    const sample: number[] = []
    for (let i = 0; i < N; i++) {
      const t = performance.now()
      await once()
      sample.push(performance.now() - t)
    }
    log(`${label}: p50 ${summary(sample).p50_ms.toFixed(2)} ms`)
    return summary(sample)
  }
  const direct = () =>
    new Promise<void>((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port: upstream.port, servername: 'api.example.test', ca: pki.caPem, path: '/x', agent: false }, (res) => {
        res.resume()
        res.on('end', resolve)
      })
      req.on('error', reject)
      req.end()
    })
  try {
    const directHttps = await time('direct https', direct)
    const tunnel = await time('blind tunnel', () => viaProxy(handle.socketPath, 'https://other.example.test/x', { ca: [pki.caPem] }))
    const injected = await time('intercepted + injected', () => viaProxy(handle.socketPath, 'https://api.example.test/x', { headers: { authorization: `Bearer ${placeholderFor('vcrd_b')}` }, ca: [ca.certPem] }))
    const leaf = await time('leaf certificate for a new host', async () => ca.contextFor(`h${Math.random().toString(36).slice(2)}.example.test`))
    let keyring: Record<string, unknown> = { skipped: 'no D-Bus session bus' }
    if (process.env.DBUS_SESSION_BUS_ADDRESS) {
      const k = new KeyringKeychain({ service: `corral-bench-${process.pid}` })
      await k.set('bench', 'v')
      keyring = { get: await time('keyring get', () => k.get('bench')), set: await time('keyring set', () => k.set('bench', 'v2')) }
      await k.delete('bench')
    }
    return {
      n: N,
      direct_https: directHttps,
      via_proxy_blind_tunnel: tunnel,
      via_proxy_injected: injected,
      tunnel_overhead_p50_ratio: +(tunnel.p50_ms / directHttps.p50_ms).toFixed(2),
      injected_overhead_p50_ratio: +(injected.p50_ms / directHttps.p50_ms).toFixed(2),
      leaf_certificate_issue: leaf,
      keyring,
    }
  } finally {
    await proxy.dispose()
    await upstream.close()
    rmSync(dir, { recursive: true, force: true })
  }
}
