import type { SandboxProvider } from './sandbox'

export interface BackendReport {
  backend: string
  ok: boolean
  /** Why it does not work here, when it does not. */
  reason?: string
  /** Extra facts (Docker runtimes, gVisor). */
  details?: Record<string, unknown>
}

/**
 * `corral doctor`: which sandbox backends work on this machine and why the others do not.
 * Asks each provider (`available()`), for Docker whether the gVisor runtime (runsc) is
 * registered, and for bubblewrap what hardening is in force (`details.seccomp`,
 * `user_namespaces`, `keyring`, `limits`). Never throws; a failing probe is a report with ok: false.
 */
export async function detectBackends(providers: readonly SandboxProvider[]): Promise<BackendReport[]> {
  const reports = await Promise.all(
    providers.map(async (p): Promise<BackendReport> => {
      const a = await p.available().catch((err: Error) => ({ ok: false, reason: err.message }))
      const report: BackendReport = { backend: p.backend, ok: a.ok, ...(a.reason ? { reason: a.reason } : {}) }
      const runtimes = (p as { runtimes?: () => Promise<string[]> }).runtimes
      if (a.ok && runtimes) {
        const names = await runtimes.call(p).catch(() => [] as string[])
        report.details = { runtimes: names, gvisor: names.includes('runsc') ? 'available (config.corral.runtime: "runsc")' : 'runsc is not registered with dockerd (install runsc; scripts/start-dockerd.sh registers it)' }
      }
      // bubblewrap: which of seccomp, --disable-userns, a fresh keyring and limits this host gives its sandboxes.
      const guarantees = (p as { guarantees?: () => Promise<Record<string, string>> }).guarantees
      if (a.ok && guarantees) report.details = { ...report.details, ...(await guarantees.call(p).catch((err: Error) => ({ hardening: `unknown: ${err.message}` }))) }
      return report
    }),
  )
  if (!providers.some((p) => p.backend === 'seatbelt')) {
    reports.push({ backend: 'seatbelt', ok: false, reason: process.platform === 'darwin' ? 'not implemented yet in Corral' : 'macOS only' })
  }
  return reports
}
