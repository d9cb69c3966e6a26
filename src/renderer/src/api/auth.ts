import { CSRF_HEADERS } from './http-client'

/**
 * Browser mode sign-in: `corral serve` keeps the token in an HttpOnly cookie (this code never
 * reads it). Signing in posts the token once; the server answers with the cookie.
 */
export async function signIn(token: string): Promise<void> {
  const res = await fetch('/auth/session', { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json', ...CSRF_HEADERS }, body: JSON.stringify({ token }) })
  if (!res.ok) {
    const body = (await res.json().catch(() => null)) as { error?: { message?: string } } | null
    throw new Error(body?.error?.message ?? `sign-in failed (HTTP ${res.status})`)
  }
}

export async function signOut(): Promise<void> {
  await fetch('/auth/sign-out', { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json', ...CSRF_HEADERS } })
}
