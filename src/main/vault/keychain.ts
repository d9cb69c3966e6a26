import { CorralError } from '../../shared/errors'

/**
 * Where Corral keeps secrets: the OS keychain (or Electron's safeStorage in the app). A secret
 * is written, read back only by the engine's own consumers (the egress proxy, the model client,
 * the MCP client), and deleted; it is never logged, never put in an event, an error message or
 * anything sent to the renderer. Accounts are plain names chosen by the caller
 * (see `keychainAccount`); values are UTF-8 strings.
 *
 * Every backend passes the same contract suite (test/unit/vault/keychain.contract.ts).
 */
export interface Keychain {
  /** Technology behind it: `keyring`, `safe-storage`, `memory`. */
  readonly backend: string
  /** Stores (or replaces) a secret. Throws CorralError keychain_error when the store refuses. */
  set(account: string, secret: string): Promise<void>
  /** The secret, or undefined when none is stored. Throws keychain_error when the store is unreachable. */
  get(account: string): Promise<string | undefined>
  /** Removes a secret; true when one was there. */
  delete(account: string): Promise<boolean>
}

/** Account names Corral uses. A credential's secret fields each get their own account. */
export const keychainAccount = {
  anthropicApiKey: 'anthropic-api-key',
  apiToken: 'local-api-token',
  egressCaKey: 'egress-ca-private-key',
  credential: (credentialId: string, field: string) => `credential/${credentialId}/${field}`,
  sessionResource: (sessionId: string, resourceId: string, field: string) => `session/${sessionId}/resource/${resourceId}/${field}`,
  /** A webhook endpoint's signing secret (orchestrator/webhooks.ts). */
  webhookSecret: (endpointId: string) => `webhook/${endpointId}/signing_secret`,
} as const

const ACCOUNT_RE = /^[A-Za-z0-9][A-Za-z0-9_./:-]{0,199}$/

/** Rejects account names a backend could mangle. The message names the rule, never the secret. */
export function checkAccount(account: string): void {
  if (typeof account !== 'string' || !ACCOUNT_RE.test(account)) {
    throw new CorralError('invalid_request_error', `keychain account ${JSON.stringify(String(account).slice(0, 80))} must be 1-200 characters of A-Z a-z 0-9 _ . / : - starting with a letter or digit`)
  }
}

/** Rejects values that are not a non-empty string of at most 64 KiB. */
export function checkSecret(secret: string): void {
  if (typeof secret !== 'string' || secret.length === 0) throw new CorralError('invalid_request_error', 'a secret must be a non-empty string')
  if (Buffer.byteLength(secret, 'utf8') > 65536) throw new CorralError('invalid_request_error', 'a secret must be at most 65536 bytes')
}

/**
 * How to get an OS keychain on this platform, for messages that say one is missing. On Linux the
 * headless recipe (a private D-Bus session with gnome-keyring) is the README's "Headless Linux".
 */
export function keychainFix(platform: NodeJS.Platform = process.platform): string {
  if (platform === 'darwin') return 'unlock the login keychain (Keychain Access) and try again'
  if (platform === 'win32') return 'make sure the Windows Credential Manager service is running'
  return (
    'run a Secret Service (gnome-keyring or KWallet) in your D-Bus session; on a headless machine start Corral inside one: ' +
    "dbus-run-session -- sh -c 'echo -n <a password> | gnome-keyring-daemon --unlock --components=secrets >/dev/null; npm run serve' " +
    '(apt-get install gnome-keyring dbus)'
  )
}

/** Whether a backend failure means there is no keychain to talk to at all (no D-Bus, no Secret Service). */
export function isKeychainUnreachable(reason: string): boolean {
  return /d-?bus|secret ?service|org\.freedesktop|autolaunch|no such file|failed to connect|ServiceUnknown|platform failure/i.test(reason)
}

/**
 * Wraps a backend failure (a 503 at the API); the backend's message is kept only when it cannot
 * carry the secret. When no keychain answers at all, the message says so and how to get one.
 */
export function keychainError(action: string, account: string, cause: unknown): CorralError {
  const reason = cause instanceof Error ? cause.message : String(cause)
  if (isKeychainUnreachable(reason)) {
    // the model key alone has a way around the keychain: the environment
    const orEnv = account === keychainAccount.anthropicApiKey ? ', or set ANTHROPIC_API_KEY in the environment instead' : ''
    return new CorralError('keychain_error', `no OS keychain is available, so Corral could not ${action} ${account} (${reason}); to fix: ${keychainFix()}${orEnv}`, { cause })
  }
  return new CorralError('keychain_error', `the keychain could not ${action} ${account}: ${reason}`, { cause })
}
