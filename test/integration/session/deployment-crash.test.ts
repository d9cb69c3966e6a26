import { afterAll, describe, expect, it } from 'vitest'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { Engine } from '../../../src/main/engine'
import { openStoresAt } from '../../../src/main/session/stores'

const CHILD = resolve(__dirname, '../../support/deployment-crash-child.ts')
const dirs: string[] = []
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true })
})

/** Runs the child to its SIGKILL between the run's record and its session; returns the deployment id. */
async function crashBetweenRecordAndSession(dbPath: string, mode: 'schedule' | 'manual'): Promise<string> {
  const child = spawn(process.execPath, ['--import', 'tsx', CHILD, dbPath, mode], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  child.stdout.on('data', (b: Buffer) => (out += b))
  child.stderr.on('data', (b: Buffer) => (err += b))
  const signal = await new Promise<NodeJS.Signals | null>((res) => child.on('exit', (_code, sig) => res(sig)))
  expect(signal, err).toBe('SIGKILL')
  return out.trim()
}

const open = (dir: string) => Engine.open({ dataDir: dir, token: 'test_token', env: {}, defaultHands: false, log: () => {} })

describe('a crash between a deployment run and its session (real SQLite file, the process killed)', () => {
  for (const mode of ['schedule', 'manual'] as const) {
    it(`neither loses nor doubles a ${mode} run: the next start creates its one session`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'corral-deploy-crash-'))
      dirs.push(dir)
      const dbPath = join(dir, 'corral.db')
      const deploymentId = await crashBetweenRecordAndSession(dbPath, mode)
      expect(deploymentId).toMatch(/^depl_/)

      // What the kill left: the run's record, with neither a session nor an error, and no session.
      const left = openStoresAt(dbPath)
      const rows = left.db.prepare('SELECT session_id, error, trigger_type FROM deployment_runs WHERE deployment_id = ?').all(deploymentId)
      expect(rows).toEqual([{ session_id: null, error: null, trigger_type: mode }])
      expect(left.sessions.list({ deployment_id: deploymentId }).data).toEqual([])
      left.close()

      // The next start finishes it.
      const engine = open(dir)
      await engine.deploymentScheduler.settled()
      await engine.stores.log.drain()
      const runs = engine.stores.deployments.listRuns({ deployment_id: deploymentId }).data
      expect(runs).toHaveLength(1)
      expect(runs[0].error).toBeNull()
      expect(runs[0].trigger_context.type).toBe(mode)
      const sessions = engine.stores.sessions.list({ deployment_id: deploymentId }).data
      expect(sessions.map((s) => s.id)).toEqual([runs[0].session_id])
      expect(engine.stores.log.read(sessions[0].id, {}).map((e) => e.event.type)).toEqual(['user.message'])
      if (runs[0].trigger_context.type === 'schedule') {
        // the same instant fired again (a second process, a late timer) finds its run and does nothing
        const again = await engine.stores.deployments.fireScheduled({ deploymentId, scheduledAt: new Date(runs[0].trigger_context.scheduled_at) })
        expect(again).toBeNull()
      }
      await engine.close()

      // And a later start changes nothing.
      const later = open(dir)
      await later.deploymentScheduler.settled()
      expect(later.stores.deployments.listRuns({ deployment_id: deploymentId }).data).toEqual(runs)
      expect(later.stores.sessions.list({ deployment_id: deploymentId }).data.map((s) => s.id)).toEqual([runs[0].session_id])
      await later.close()
    }, 60_000)
  }
})
