import { CorralError } from '../../../shared/errors'
import type { RunnerConnection } from '../runner/connection'
import type { PackageEgressOpener } from '../sandbox'
import type { PackagePlan } from './plan'
import type { PackageProgress } from './status'

// Running an install: through a started runner, once per cache key, its failure said with the package manager's last lines.

export type { PackageEgress, PackageEgressOpener } from '../sandbox'

/** Longest an install may take before it is abandoned. */
export const INSTALL_TIMEOUT_MS = 30 * 60_000

/**
 * Runs an install script through a started runner (whose egress is already open), passing each
 * `[packages]` progress line to `progress` as it comes. Throws CorralError sandbox_error with the
 * package manager's last lines when the script fails.
 */
export async function runInstall(connection: RunnerConnection, p: { script: string; idPrefix: string; environmentId: string; progress: (line: string) => void }): Promise<void> {
  let output = ''
  let pending = ''
  const result = await connection.call({
    toolUseId: `${p.idPrefix}-${Date.now().toString(36)}`,
    name: 'bash',
    input: { command: p.script, timeout: INSTALL_TIMEOUT_MS },
    cap: 4 * 1024 * 1024,
    onOutput: (chunk) => {
      output = (output + chunk).slice(-64 * 1024)
      pending += chunk
      const lines = pending.split(/\r?\n/)
      pending = lines.pop() ?? ''
      for (const line of lines) if (line.startsWith('[packages] ')) p.progress(line.slice(11))
    },
  })
  if (result.isError || (result.exitCode ?? 0) !== 0) throw installError(p.environmentId, installFailure(output || result.content))
}

/**
 * An environment's install, done once whatever the backend: single-flight by cache key, the cache
 * looked at again inside the flight, progress reported (start, then ready or failed), a missing
 * egress said plainly, every failure as installError. `install` builds the cache; returns `result`.
 */
export function installOnce(p: {
  flights: InstallFlights
  key: string
  result: string
  cached: () => Promise<boolean> | boolean
  plan: PackagePlan
  environmentId: string
  openEgress?: PackageEgressOpener
  progress?: PackageProgress
  install: (openEgress: PackageEgressOpener, progress: PackageProgress) => Promise<void>
}): Promise<string> {
  return p.flights.run(p.key, async () => {
    if (await p.cached()) return p.result
    const progress = p.progress ?? (() => {})
    progress({ kind: 'start', summary: p.plan.summary })
    try {
      if (!p.openEgress) throw new CorralError('sandbox_error', `this Corral has no egress proxy to install them through (${p.plan.summary}; the proxy needs the OS keychain: see corral doctor)`)
      await p.install(p.openEgress, progress)
      progress({ kind: 'ready' })
      return p.result
    } catch (err) {
      const failed = installError(p.environmentId, err)
      progress({ kind: 'failed', message: failed.message })
      throw failed
    }
  })
}

/**
 * The last lines of an install's output that explain a failure: the `FAILED` line and what the
 * package manager printed before it (no more than `max` characters).
 */
export function installFailure(output: string, max = 1500): string {
  const lines = output.replace(/\r/g, '').split('\n').filter((l) => (l.trim() !== '' && !l.startsWith('[packages] ')) || l.startsWith('[packages] FAILED'))
  const failed = lines.findIndex((l) => l.startsWith('[packages] FAILED: '))
  const head = failed >= 0 ? lines[failed]!.slice('[packages] FAILED: '.length) : 'the install script failed'
  const before = (failed >= 0 ? lines.slice(0, failed) : lines).slice(-12).join('\n')
  const detail = before.length > max ? '…' + before.slice(-max) : before
  return detail ? `${head}; its output ended with:\n${detail}` : head
}

/** An install's failure as the sandbox_error sessions and the status show: it always says what failed. */
export function installError(environmentId: string, err: unknown): CorralError {
  const prefix = `installing the packages of environment ${environmentId} failed: `
  const message = err instanceof Error ? err.message : String(err)
  const cause = err instanceof Error ? err : undefined
  if (err instanceof CorralError && err.code === 'sandbox_error' && message.startsWith(prefix)) return err
  return new CorralError('sandbox_error', message.startsWith(prefix) ? message : prefix + message, { cause })
}

/** Single-flight by key: one install per cache key at a time in this process. */
export class InstallFlights {
  private readonly flights = new Map<string, Promise<string>>()

  run(key: string, install: () => Promise<string>): Promise<string> {
    let f = this.flights.get(key)
    if (!f) {
      f = install().finally(() => this.flights.delete(key))
      this.flights.set(key, f)
    }
    return f
  }

  get size(): number {
    return this.flights.size
  }
}
