/**
 * A second Corral process refreshing an MCP credential (test/integration/hands/mcp/refresh-lock.test.ts):
 * opens the same database and keychain service as the test, prints `ready`, waits for `go` on
 * stdin, then connects to the MCP server with the credential (its access token expired, so the
 * connection refreshes it under the engine's cross-process lock), calls `echo` and prints one JSON
 * line: `{ "ok": true, "text": … }` or `{ "ok": false, "error": … }`.
 * Usage: node --import tsx mcp-refresh-child.ts <keychain service> <database path> <mcp url> <credential JSON>
 */
import { createInterface } from 'node:readline'
import { McpConnection } from '../../src/main/hands/mcp/client'
import { credentialRefreshLock } from '../../src/main/hands/mcp/refresh-lock'
import { openStoresAt } from '../../src/main/session/stores'
import type { StoredCredential } from '../../src/main/session/vault-store'
import { KeyringKeychain } from '../../src/main/vault/keyring-keychain'

const [service, dbPath, url, credJson] = process.argv.slice(2)
const stores = openStoresAt(dbPath)
const keychain = new KeyringKeychain({ service })
const credential = JSON.parse(credJson) as StoredCredential

const lines = createInterface({ input: process.stdin })
lines.once('line', () => {
  void (async () => {
    try {
      const conn = await McpConnection.connect({ name: 'docs', url }, [credential], { keychain, refreshLock: credentialRefreshLock(stores.vaults) })
      const r = await conn.callTool('docs__echo', { text: 'from the child' })
      await conn.close()
      process.stdout.write(`${JSON.stringify({ ok: true, text: r.content })}\n`)
    } catch (err) {
      process.stdout.write(`${JSON.stringify({ ok: false, error: (err as Error).message })}\n`)
    } finally {
      stores.close()
      lines.close()
    }
  })()
})
process.stdout.write('ready\n')
