import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'

/**
 * Integration tests use the real thing. When a component is missing they fail in CI
 * (CI=true) and skip locally with a printed reason. Use as:
 *   const docker = requirement('docker', dockerAvailable)
 *   describe.skipIf(!docker.ok)('DockerSandbox', ...)
 */
export interface Requirement {
  ok: boolean
  reason?: string
}

export function requirement(name: string, probe: () => string | undefined): Requirement {
  let reason: string | undefined
  try {
    reason = probe()
  } catch (err) {
    reason = (err as Error).message
  }
  if (reason === undefined) return { ok: true }
  if (process.env.CI === 'true' || process.env.CI === '1') {
    throw new Error(`[CI] required component "${name}" is missing: ${reason}`)
  }
  console.warn(`[skip] ${name} tests skipped: ${reason}`)
  return { ok: false, reason }
}

export const dockerProbe = (): string | undefined => {
  const sock = process.env.DOCKER_HOST?.replace(/^unix:\/\//, '') ?? '/var/run/docker.sock'
  if (!existsSync(sock)) return `no Docker socket at ${sock} (start dockerd: scripts/start-dockerd.sh)`
  try {
    execFileSync('docker', ['version', '--format', '{{.Server.Version}}'], { stdio: 'ignore', timeout: 10_000 })
  } catch {
    return `the Docker engine at ${sock} does not answer (start dockerd: scripts/start-dockerd.sh)`
  }
  return undefined
}

export const bubblewrapProbe = (): string | undefined => {
  try {
    execFileSync('bwrap', ['--ro-bind', '/', '/', '--unshare-net', 'true'], { stdio: 'ignore', timeout: 5000 })
    return undefined
  } catch (err) {
    return `bubblewrap does not run here: ${(err as Error).message}`
  }
}

export const keychainProbe = (): string | undefined =>
  process.env.DBUS_SESSION_BUS_ADDRESS ? undefined : 'no D-Bus session bus (run inside dbus-run-session with gnome-keyring unlocked)'

export const chromiumProbe = (): string | undefined =>
  existsSync('/usr/bin/chromium') ? undefined : 'no /usr/bin/chromium (apt-get install chromium)'
