import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterAll, describe, expect, it } from 'vitest'
import { McpConnection, type RefreshLock } from '../../../../src/main/hands/mcp/client'
import { credentialRefreshLock } from '../../../../src/main/hands/mcp/refresh-lock'
import { openStoresAt, type Stores } from '../../../../src/main/session/stores'
import { KeyringKeychain } from '../../../../src/main/vault/keyring-keychain'
import { KeychainSecretSink } from '../../../../src/main/vault/vault-services'
import { ACCESS_NEW, ACCESS_OLD, CLIENT_SECRET, REFRESH, mcpTestServer } from '../../../support/mcp-server'
import { keychainProbe, requirement } from '../../../support/requirements'

/*
 * Two Corral processes on one data directory (the desktop and a `corral serve`) share its database
 * and the OS keychain. When both find an MCP credential's access token expired at once, only one
 * may spend the refresh token: a token endpoint that rotates refresh tokens accepts each once, and
 * the other process would get invalid_grant and report the credential as failed. The engines'
 * refresh lock (credential_refresh_locks) makes the second wait and take the token the first stored.
 */

const keychainReq = requirement('keychain', keychainProbe)
const dirs: string[] = []
const opened: Stores[] = []
afterAll(() => {
  for (const s of opened) s.close()
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})
const database = () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-refresh-lock-'))
  dirs.push(dir)
  return join(dir, 'corral.db')
}
const open = (path: string) => {
  const s = openStoresAt(path)
  opened.push(s)
  return s
}

describe('the credential refresh lock (one database, two engines)', () => {
  it('lets one owner hold a credential at a time, waits for it to be given back, and takes over a lock whose engine stopped', async () => {
    const path = database()
    const a = open(path)
    const b = open(path)
    expect(a.vaults.tryLockRefresh('vcrd_1', 'engine-a', 60_000)).toBe(true)
    expect(b.vaults.tryLockRefresh('vcrd_1', 'engine-b', 60_000)).toBe(false)
    // another credential is free; the same owner takes its own lock again
    expect(b.vaults.tryLockRefresh('vcrd_2', 'engine-b', 60_000)).toBe(true)
    expect(a.vaults.tryLockRefresh('vcrd_1', 'engine-a', 60_000)).toBe(true)

    const lockB = credentialRefreshLock(b.vaults, { owner: 'engine-b', pollMs: 10 })
    const waiting = lockB.acquire('vcrd_1')
    await new Promise((r) => setTimeout(r, 60))
    // only its owner gives it back
    b.vaults.unlockRefresh('vcrd_1', 'engine-b')
    expect(a.vaults.tryLockRefresh('vcrd_1', 'engine-c', 60_000)).toBe(false)
    a.vaults.unlockRefresh('vcrd_1', 'engine-a')
    const held = await waiting
    expect(held.waited).toBe(true)
    held.release()
    expect(a.vaults.tryLockRefresh('vcrd_1', 'engine-a', 50)).toBe(true)

    // engine-a stops without giving it back: the lock counts until it expires, then another takes it
    const t0 = Date.now()
    const late = await credentialRefreshLock(b.vaults, { owner: 'engine-b', pollMs: 10 }).acquire('vcrd_1')
    expect(late.waited).toBe(true)
    expect(Date.now() - t0).toBeGreaterThanOrEqual(20)
    late.release()
    // a lock that is free is taken without waiting
    const free = await credentialRefreshLock(b.vaults).acquire('vcrd_3')
    expect(free.waited).toBe(false)
    free.release()
  })

  describe.skipIf(!keychainReq.ok)('with the OS keychain', () => {
    it('refreshes once when two processes find the access token expired together; the waiting one uses the token the other stored', async () => {
      const service = `corral-test-refresh-lock-${process.pid}-${Date.now()}`
      const keychain = new KeyringKeychain({ service })
      const sink = new KeychainSecretSink(keychain)
      // slow enough that the two refreshes would overlap without the lock
      const rotating = await mcpTestServer({ rotate: true, tokenDelayMs: 400 })
      const credential = rotating.oauthCredential('vcrd_shared')
      await sink.put('vcrd_shared', 'mcp_oauth', { access_token: ACCESS_OLD, refresh_token: REFRESH, client_secret: CLIENT_SECRET })
      const path = database()
      const stores = open(path)
      const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, '../../../support/mcp-refresh-child.ts'), service, path, `${rotating.url}/mcp`, JSON.stringify(credential)], {
        stdio: ['pipe', 'pipe', 'inherit'],
      })
      try {
        const out = createInterface({ input: child.stdout! })
        const lines: string[] = []
        let heard: (() => void) | undefined
        out.on('line', (l) => {
          lines.push(l)
          heard?.()
        })
        const nextLine = async (n: number) => {
          while (lines.length < n) await new Promise<void>((r) => (heard = r))
          return lines[n - 1]
        }
        expect(await nextLine(1)).toBe('ready')
        // both at once: the child's connection and this process's
        child.stdin!.write('go\n')
        const mine = McpConnection.connect({ name: 'docs', url: `${rotating.url}/mcp` }, [credential], { keychain, refreshLock: credentialRefreshLock(stores.vaults) })
        const conn = await mine
        expect((await conn.callTool('docs__echo', { text: 'from the test' })).content).toBe('echo: from the test')
        await conn.close()
        expect(JSON.parse(await nextLine(2))).toEqual({ ok: true, text: 'echo: from the child' })
        // one exchange for the two processes, and the rotated refresh token is the one kept
        expect(rotating.refreshCalls).toEqual(['refresh_token'])
        expect(await keychain.get('credential/vcrd_shared/access_token')).toBe(ACCESS_NEW)
        expect(await keychain.get('credential/vcrd_shared/refresh_token')).toBe(`${REFRESH}-rotated-1`)
      } finally {
        child.kill()
        await sink.delete('vcrd_shared')
        await rotating.close()
      }
    }, 60_000)

    it('takes the access token another engine stored while it waited, and does not refresh again on an expiry it knows to be old', async () => {
      const service = `corral-test-refresh-wait-${process.pid}-${Date.now()}`
      const keychain = new KeyringKeychain({ service })
      const sink = new KeychainSecretSink(keychain)
      const server = await mcpTestServer({ rotate: true })
      // known to have expired: the connection refreshes before its first request
      const credential = server.oauthCredential('vcrd_waited', { expires_at: new Date(Date.now() - 3_600_000).toISOString() })
      await sink.put('vcrd_waited', 'mcp_oauth', { access_token: ACCESS_OLD, refresh_token: REFRESH, client_secret: CLIENT_SECRET })
      // the other engine holds the lock and stores a new access token before it gives it back
      const otherEngine: RefreshLock = {
        acquire: async (id) => {
          await keychain.set(`credential/${id}/access_token`, ACCESS_NEW)
          return { waited: true, release: () => {} }
        },
      }
      try {
        const conn = await McpConnection.connect({ name: 'docs', url: `${server.url}/mcp` }, [credential], { keychain, refreshLock: otherEngine })
        for (const text of ['one', 'two']) expect((await conn.callTool('docs__echo', { text })).content).toBe(`echo: ${text}`)
        await conn.close()
        expect(server.refreshCalls).toEqual([])
        expect(await keychain.get('credential/vcrd_waited/refresh_token')).toBe(REFRESH)
      } finally {
        await sink.delete('vcrd_waited')
        await server.close()
      }
    })
  })
})
