import { afterEach, describe, expect, it } from 'vitest'
import { memoryStores, type Stores } from '../session/fixtures'
import { DeploymentScheduler } from '../../../src/main/orchestrator/deployment-scheduler'
import { deploymentJitterMs } from '../../../src/shared/api/cron'
import type { DeploymentRunView } from '../../../src/main/session/deployment-store'
import { ManualClock } from '../../support/manual-clock'

const HOUR = 3_600_000
const task = [{ type: 'user.message' as const, content: [{ type: 'text' as const, text: 'Compile the report.' }] }]

interface World {
  clock: ManualClock
  stores: Stores
  agentId: string
  envId: string
  schedulers: DeploymentScheduler[]
  /** A scheduler on the world's stores and clock, started. */
  start(opts?: { maxTickMs?: number }): DeploymentScheduler
  /** Waits for every scheduler's tick in progress. */
  settle(): Promise<void>
  deploy(expression: string, timezone?: string): string
  runs(deploymentId: string): DeploymentRunView[]
}

const worlds: World[] = []
afterEach(async () => {
  for (const w of worlds.splice(0)) {
    for (const s of w.schedulers) await s.dispose()
    await w.stores.log.drain()
    w.stores.close()
  }
})

function world(start: string): World {
  const clock = new ManualClock(start)
  const stores = memoryStores(clock.date)
  const agent = stores.agents.create({ name: 'reporter', model: 'claude-sonnet-4-6' })
  const env = stores.environments.create({ name: 'local' })
  const w: World = {
    clock,
    stores,
    agentId: agent.id,
    envId: env.id,
    schedulers: [],
    start(opts = {}) {
      const s = new DeploymentScheduler({ deployments: stores.deployments, clock, maxTickMs: opts.maxTickMs, onError: (err) => { throw err } })
      w.schedulers.push(s)
      s.start()
      return s
    },
    async settle() {
      for (const s of w.schedulers) await s.settled()
      await stores.log.drain()
    },
    deploy(expression, timezone = 'UTC') {
      return stores.deployments.create({ name: 'report', agent: agent.id, environment_id: env.id, initial_events: task, schedule: { type: 'cron', expression, timezone } }).id
    },
    runs(deploymentId) {
      return stores.deployments.listRuns({ deployment_id: deploymentId, limit: 1000 }).data.reverse()
    },
  }
  worlds.push(w)
  return w
}

const scheduledAt = (r: DeploymentRunView) => (r.trigger_context.type === 'schedule' ? r.trigger_context.scheduled_at : null)

describe('DeploymentScheduler with an injected clock', () => {
  it('fires a */5 * * * * schedule 12 times over a simulated hour, each its fixed jitter after its instant', async () => {
    const w = world('2026-06-01T10:00:00.000Z')
    const id = w.deploy('*/5 * * * *')
    const jitter = deploymentJitterMs(id)
    expect(jitter).toBeGreaterThanOrEqual(0)
    expect(jitter).toBeLessThan(30_000)
    w.start()
    await w.settle()
    await w.clock.advanceTo(Date.parse('2026-06-01T11:00:00.000Z') + jitter, () => w.settle())
    const runs = w.runs(id)
    const expected = Array.from({ length: 12 }, (_, i) => new Date(Date.parse('2026-06-01T10:05:00.000Z') + i * 300_000).toISOString())
    expect(runs.map(scheduledAt)).toEqual(expected)
    for (const r of runs) {
      expect(Date.parse(r.created_at) - Date.parse(scheduledAt(r)!)).toBe(jitter)
      expect(r.error).toBeNull()
      expect(r.session_id).toMatch(/^sesn_/)
      expect(r.corral.catch_up).toBeNull()
    }
    const sessions = w.stores.sessions.list({ deployment_id: id, limit: 100 }).data
    expect(sessions.map((s) => s.id).sort()).toEqual(runs.map((r) => r.session_id).sort())
    expect(sessions.every((s) => s.deployment_id === id)).toBe(true)
    const d = w.stores.deployments.retrieve(id)
    expect(d.schedule?.last_run_at).toBe(runs[11].created_at)
    expect(d.schedule?.upcoming_runs_at?.[0]).toBe('2026-06-01T11:05:00.000Z')
  })

  it('fires a scheduled instant once even when two schedulers (two processes) watch the same deployments', async () => {
    const w = world('2026-06-01T10:00:00.000Z')
    const id = w.deploy('*/5 * * * *')
    w.start()
    w.start()
    await w.settle()
    await w.clock.advanceTo('2026-06-01T11:00:30.000Z', () => w.settle())
    expect(w.runs(id)).toHaveLength(12)
    expect(w.stores.sessions.list({ deployment_id: id, limit: 100 }).data).toHaveLength(12)
  })

  it('neither skips nor doubles a daily 02:30 fire when Europe/Berlin springs forward (02:30 does not exist that night: it runs at 03:00)', async () => {
    const w = world('2026-03-27T12:00:00.000Z')
    const id = w.deploy('30 2 * * *', 'Europe/Berlin')
    w.start({ maxTickMs: 6 * HOUR })
    await w.clock.advanceTo('2026-03-31T12:00:00.000Z', () => w.settle())
    expect(w.runs(id).map(scheduledAt)).toEqual([
      '2026-03-28T01:30:00.000Z', // 02:30 CET
      '2026-03-29T01:00:00.000Z', // 03:00 CEST, the first minute after the gap
      '2026-03-30T00:30:00.000Z', // 02:30 CEST
      '2026-03-31T00:30:00.000Z',
    ])
  })

  it('neither skips nor doubles a daily 02:30 fire when Europe/Berlin falls back (02:30 happens twice that night: it runs once)', async () => {
    const w = world('2026-10-23T12:00:00.000Z')
    const id = w.deploy('30 2 * * *', 'Europe/Berlin')
    w.start({ maxTickMs: 6 * HOUR })
    await w.clock.advanceTo('2026-10-27T12:00:00.000Z', () => w.settle())
    expect(w.runs(id).map(scheduledAt)).toEqual([
      '2026-10-24T00:30:00.000Z', // 02:30 CEST
      '2026-10-25T00:30:00.000Z', // 02:30 CEST, the first of the two
      '2026-10-26T01:30:00.000Z', // 02:30 CET
      '2026-10-27T01:30:00.000Z',
    ])
  })

  it('keeps a */30 schedule on real half hours through both Europe/Berlin transitions: no gap, no repeat', async () => {
    const w = world('2026-03-28T23:00:00.000Z')
    const id = w.deploy('*/30 * * * *', 'Europe/Berlin')
    w.start({ maxTickMs: HOUR })
    await w.clock.advanceTo('2026-03-29T03:00:30.000Z', () => w.settle())
    const spring = w.runs(id).map((r) => Date.parse(scheduledAt(r)!))
    expect(spring).toHaveLength(8) // 23:30Z … 03:00Z
    expect(spring.slice(1).map((t, i) => t - spring[i])).toEqual(Array(7).fill(1_800_000))

    const w2 = world('2026-10-24T23:00:00.000Z')
    const id2 = w2.deploy('*/30 * * * *', 'Europe/Berlin')
    w2.start({ maxTickMs: HOUR })
    await w2.clock.advanceTo('2026-10-25T03:00:30.000Z', () => w2.settle())
    const fall = w2.runs(id2).map((r) => Date.parse(scheduledAt(r)!))
    expect(fall).toHaveLength(8) // 23:30Z … 03:00Z, both passes of 02:00–03:00 local time
    expect(fall.slice(1).map((t, i) => t - fall[i])).toEqual(Array(7).fill(1_800_000))
    expect(new Set(fall).size).toBe(fall.length)
  })

  it('after the computer slept through fires, runs only the most recent one, once, marked as missed while asleep', async () => {
    const w = world('2026-06-01T10:00:00.000Z')
    const id = w.deploy('*/5 * * * *')
    w.start()
    await w.clock.advanceTo('2026-06-01T10:07:00.000Z', () => w.settle())
    expect(w.runs(id)).toHaveLength(1)
    // the clock jumps past 17 instants (10:10 … 11:30); the pending timer fires late, at wake
    await w.clock.sleepUntil('2026-06-01T11:32:00.000Z', () => w.settle())
    const runs = w.runs(id)
    expect(runs.map(scheduledAt)).toEqual(['2026-06-01T10:05:00.000Z', '2026-06-01T11:30:00.000Z'])
    expect(runs[1].corral.catch_up).toEqual({ reason: 'asleep', missed_since: '2026-06-01T10:10:00.000Z' })
    expect(runs[1].session_id).toMatch(/^sesn_/)
    await w.clock.advanceTo('2026-06-01T11:36:00.000Z', () => w.settle())
    expect(w.runs(id).map(scheduledAt).slice(2)).toEqual(['2026-06-01T11:35:00.000Z'])
    expect(w.runs(id)[2].corral.catch_up).toBeNull()
  })

  it('at start, catches up once what passed while Corral was not running, marked as such', async () => {
    const w = world('2026-06-01T10:00:00.000Z')
    const id = w.deploy('0 * * * *')
    const first = w.start()
    await w.clock.advanceTo('2026-06-01T11:01:00.000Z', () => w.settle())
    await first.dispose()
    w.schedulers.splice(0)
    await w.clock.advanceTo('2026-06-01T15:10:00.000Z', async () => {}) // closed: nobody watches
    w.start()
    await w.settle()
    const runs = w.runs(id)
    expect(runs.map(scheduledAt)).toEqual(['2026-06-01T11:00:00.000Z', '2026-06-01T15:00:00.000Z'])
    expect(runs[1].corral.catch_up).toEqual({ reason: 'not_running', missed_since: '2026-06-01T12:00:00.000Z' })
  })

  it('fires nothing while paused, and nothing of the paused time after unpausing', async () => {
    const w = world('2026-06-01T10:00:00.000Z')
    const id = w.deploy('*/5 * * * *')
    w.start()
    w.stores.deployments.pause(id)
    await w.clock.advanceTo('2026-06-01T11:00:00.000Z', () => w.settle())
    expect(w.runs(id)).toHaveLength(0)
    w.stores.deployments.unpause(id)
    await w.clock.advanceTo('2026-06-01T11:06:00.000Z', () => w.settle())
    expect(w.runs(id).map(scheduledAt)).toEqual(['2026-06-01T11:05:00.000Z'])
    expect(w.runs(id)[0].corral.catch_up).toBeNull()
  })

  it('pauses a deployment whose agent was archived, recording agent_archived_error on the run, and fires it no more', async () => {
    const w = world('2026-06-01T10:00:00.000Z')
    const id = w.deploy('*/5 * * * *')
    w.start()
    await w.clock.advanceTo('2026-06-01T10:06:00.000Z', () => w.settle())
    w.stores.agents.archive(w.agentId)
    await w.clock.advanceTo('2026-06-01T10:30:00.000Z', () => w.settle())
    const runs = w.runs(id)
    expect(runs).toHaveLength(2)
    expect(runs[1].session_id).toBeNull()
    expect(runs[1].error).toMatchObject({ type: 'agent_archived_error' })
    expect(runs[1].error!.message).toContain(w.agentId)
    const d = w.stores.deployments.retrieve(id)
    expect(d.status).toBe('paused')
    expect(d.paused_reason).toEqual({ type: 'error', error: { type: 'agent_archived_error' } })
    expect(w.stores.sessions.list({ deployment_id: id, limit: 10 }).data).toHaveLength(1)
  })
})

describe('a deployment\'s upcoming_runs_at', () => {
  it('lists the next five instants after now, moving on as each passes, and none once archived', async () => {
    const w = world('2026-06-01T10:00:00.000Z')
    const id = w.deploy('*/5 * * * *')
    const other = w.deploy('*/5 * * * *')
    const upcoming = (dId: string) => {
      const s = w.stores.deployments.retrieve(dId).schedule
      return s?.type === 'cron' ? s.upcoming_runs_at : undefined
    }
    const at = (...mins: number[]) => mins.map((m) => new Date(Date.parse('2026-06-01T10:00:00.000Z') + m * 60_000).toISOString())
    expect(upcoming(id)).toEqual(at(5, 10, 15, 20, 25))
    await w.clock.advanceTo('2026-06-01T10:04:59.999Z', async () => {})
    expect(upcoming(id)).toEqual(at(5, 10, 15, 20, 25))
    await w.clock.advanceTo('2026-06-01T10:07:00.000Z', async () => {})
    expect(upcoming(id)).toEqual(at(10, 15, 20, 25, 30))
    expect(upcoming(other)).toEqual(at(10, 15, 20, 25, 30))
    w.stores.deployments.archive(id)
    expect(upcoming(id)).toEqual([])
    expect(upcoming(other)).toEqual(at(10, 15, 20, 25, 30))
  })
})
