import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import Anthropic from '@anthropic-ai/sdk'
import { startApiServer, type TestApiServer } from '../support/api-server'
import { ManualClock } from '../support/manual-clock'

let t: TestApiServer
let client: Anthropic
let agentId: string
let envId: string

const task = [{ type: 'user.message' as const, content: [{ type: 'text' as const, text: "Compile yesterday's orders into report.md." }] }]

beforeAll(async () => {
  t = await startApiServer()
  client = t.client
  agentId = (await client.beta.agents.create({ name: 'reporter', model: 'claude-sonnet-4-6' })).id
  envId = (await client.beta.environments.create({ name: 'local', config: { type: 'cloud' } })).id
})
afterAll(() => t.close())

async function all<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const x of pages) out.push(x)
  return out
}

/** The rejection of `p`, which must reject. */
async function rejection(p: Promise<unknown>): Promise<InstanceType<typeof Anthropic.APIError>> {
  try {
    await p
  } catch (err) {
    if (err instanceof Anthropic.APIError) return err
    throw err
  }
  throw new Error('expected the call to fail')
}

const messageOf = (err: InstanceType<typeof Anthropic.APIError>) => (err.error as { error: { message: string } }).error.message

const base = () => ({ name: 'Daily order report', agent: agentId, environment_id: envId, initial_events: task })

describe('deployments through the official SDK', () => {
  it('has a test here for every method the SDK has on deployments and deployment runs', () => {
    const methods = (o: object) => Object.getOwnPropertyNames(Object.getPrototypeOf(o)).filter((n) => n !== 'constructor').sort()
    expect(methods(client.beta.deployments)).toEqual(['archive', 'create', 'list', 'pause', 'retrieve', 'run', 'unpause', 'update'])
    expect(methods(client.beta.deploymentRuns)).toEqual(['list', 'retrieve'])
  })

  it('creates a deployment with every optional field and retrieves it, its agent pinned and its next five runs listed', async () => {
    const vault = await client.beta.vaults.create({ display_name: 'ci' })
    const store = await client.beta.memoryStores.create({ name: 'notes' })
    const made = await client.beta.deployments.create({
      ...base(),
      description: 'every weekday morning',
      metadata: { team: 'sales' },
      resources: [{ type: 'memory_store', memory_store_id: store.id, access: 'read_only' }],
      schedule: { type: 'cron', expression: '0 9 * * 1-5', timezone: 'Europe/Berlin' },
      vault_ids: [vault.id],
      budget: { type: 'limit', max_list_cost: { amount: '250', currency: 'USD' } },
    })
    expect(made.id).toMatch(/^depl_/)
    expect(made).toMatchObject({
      type: 'deployment',
      agent: { type: 'agent', id: agentId, version: 1 },
      environment_id: envId,
      name: 'Daily order report',
      description: 'every weekday morning',
      initial_events: task,
      metadata: { team: 'sales' },
      resources: [{ type: 'memory_store', memory_store_id: store.id, access: 'read_only' }],
      vault_ids: [vault.id],
      budget: { type: 'limit', max_list_cost: { amount: '250', currency: 'USD' } },
      status: 'active',
      paused_reason: null,
      archived_at: null,
      schedule: { type: 'cron', expression: '0 9 * * 1-5', timezone: 'Europe/Berlin', last_run_at: null },
    })
    const upcoming = made.schedule!.type === 'cron' ? made.schedule!.upcoming_runs_at! : []
    expect(upcoming).toHaveLength(5)
    expect([...upcoming].sort()).toEqual(upcoming)
    for (const at of upcoming) {
      const local = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hour: '2-digit', minute: '2-digit', weekday: 'short', hour12: false }).format(new Date(at))
      expect(local).toMatch(/^(Mon|Tue|Wed|Thu|Fri) 09:00$/)
    }
    expect(await client.beta.deployments.retrieve(made.id)).toEqual(made)

    const pinned = await client.beta.deployments.create({ ...base(), agent: { type: 'agent', id: agentId, version: 1 } })
    expect(pinned.agent).toEqual({ type: 'agent', id: agentId, version: 1 })
    expect(pinned).toMatchObject({ schedule: null, description: null, metadata: {}, resources: [], vault_ids: [] })
  })

  it('refuses bad input with a 400 naming the field and the rule, and keeps nothing', async () => {
    const before = (await all(client.beta.deployments.list({ include_archived: true }))).length
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ ...base(), initial_events: [] }, /^invalid body: initial_events: at least 1 event/],
      [{ ...base(), initial_events: Array(51).fill(task[0]) }, /^invalid body: initial_events: at most 50 events/],
      [{ ...base(), initial_events: [{ type: 'user.interrupt' }] }, /^invalid body: initial_events\[0\]/],
      [{ ...base(), name: '' }, /^invalid body: name: must not be empty/],
      [{ ...base(), schedule: { type: 'cron', expression: '0 0 9 * * *', timezone: 'UTC' } }, /^invalid body: schedule\.expression: must have exactly 5 fields/],
      [{ ...base(), schedule: { type: 'cron', expression: '0 9 L * *', timezone: 'UTC' } }, /^invalid body: schedule\.expression: day-of-month field "L"/],
      [{ ...base(), schedule: { type: 'cron', expression: '@daily', timezone: 'UTC' } }, /^invalid body: schedule\.expression: predefined shortcuts/],
      [{ ...base(), schedule: { type: 'cron', expression: '0 9 * * *', timezone: 'Mars/Olympus' } }, /^invalid body: schedule\.timezone: "Mars\/Olympus" is not an IANA time zone/],
      [{ ...base(), schedule: { type: 'cron', expression: '0 9 * * *' } }, /^invalid body: schedule\.timezone/],
      [{ ...base(), agent: 'agent_missing' }, /^agent: agent "agent_missing" was not found/],
      [{ ...base(), agent: { type: 'agent', id: agentId, version: 99 } }, /^agent\.version: agent .* has no version 99/],
      [{ ...base(), environment_id: 'env_missing' }, /^environment_id: environment "env_missing" was not found/],
      [{ ...base(), vault_ids: ['vlt_missing'] }, /^vault_ids\[0\]: vault "vlt_missing" was not found/],
      [{ ...base(), resources: [{ type: 'memory_store', memory_store_id: 'memstore_missing' }] }, /^resources\[0\]\.memory_store_id: memory store "memstore_missing" was not found/],
      [{ ...base(), resources: [{ type: 'file', file_id: 'file_missing' }] }, /^resources\[0\]\.file_id: file "file_missing" was not found/],
      [{ ...base(), resources: [{ type: 'github_repository', url: 'https://github.com/a/b', authorization_token: 'not-a-real-token' }] }, /^invalid body: resources\[0\]\.authorization_token: Corral cannot keep a repository token/],
      [{ ...base(), metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, /^invalid body: metadata: at most 16/],
      [{ ...base(), colour: 'blue' }, /colour/],
    ]
    for (const [body, message] of cases) {
      const err = await rejection(client.beta.deployments.create(body as never))
      expect(err.status, JSON.stringify(body).slice(0, 80)).toBe(400)
      expect(messageOf(err)).toMatch(message)
    }
    const archivedAgent = await client.beta.agents.create({ name: 'old', model: 'claude-sonnet-4-6' })
    await client.beta.agents.archive(archivedAgent.id)
    const err = await rejection(client.beta.deployments.create({ ...base(), agent: archivedAgent.id }))
    expect(err.status).toBe(400)
    expect(messageOf(err)).toMatch(/^agent: agent .* is archived/)
    expect((await all(client.beta.deployments.list({ include_archived: true }))).length).toBe(before)
  })

  it('answers 404 for a deployment or a run that does not exist', async () => {
    for (const call of [
      () => client.beta.deployments.retrieve('depl_missing'),
      () => client.beta.deployments.update('depl_missing', { name: 'x' }),
      () => client.beta.deployments.archive('depl_missing'),
      () => client.beta.deployments.pause('depl_missing'),
      () => client.beta.deployments.unpause('depl_missing'),
      () => client.beta.deployments.run('depl_missing'),
      () => client.beta.deploymentRuns.retrieve('drun_missing'),
    ]) {
      const err = await rejection(call())
      expect(err).toBeInstanceOf(Anthropic.NotFoundError)
    }
  })

  it('updates with the replacement rules: omitted kept, lists and the schedule replaced, metadata patched, null clears what may be cleared', async () => {
    const vault = await client.beta.vaults.create({ display_name: 'other' })
    const d = await client.beta.deployments.create({
      ...base(),
      description: 'first',
      metadata: { keep: 'a', drop: 'b' },
      vault_ids: [vault.id],
      schedule: { type: 'cron', expression: '*/15 * * * *', timezone: 'UTC' },
      budget: { type: 'limit', max_list_cost: { amount: '1', currency: 'USD' } },
    })
    const renamed = await client.beta.deployments.update(d.id, { name: 'Renamed' })
    expect(renamed).toMatchObject({ name: 'Renamed', description: 'first', vault_ids: [vault.id], metadata: { keep: 'a', drop: 'b' }, initial_events: task })
    expect(renamed.schedule).toMatchObject({ expression: '*/15 * * * *' })

    const events = [{ type: 'user.message' as const, content: [{ type: 'text' as const, text: 'Another task.' }] }, { type: 'system.message' as const, content: [{ type: 'text' as const, text: 'Be brief.' }] }]
    const replaced = await client.beta.deployments.update(d.id, {
      description: null,
      metadata: { drop: null, added: 'c' },
      initial_events: events,
      vault_ids: null,
      resources: null,
      budget: null,
      schedule: { type: 'cron', expression: '0 6 * * *', timezone: 'America/Los_Angeles' },
    })
    expect(replaced).toMatchObject({ description: null, metadata: { keep: 'a', added: 'c' }, initial_events: events, vault_ids: [], resources: [] })
    expect(replaced.budget ?? null).toBeNull()
    expect(replaced.schedule).toMatchObject({ type: 'cron', expression: '0 6 * * *', timezone: 'America/Los_Angeles' })

    const manual = await client.beta.deployments.update(d.id, { schedule: null, description: '' })
    expect(manual.schedule).toBeNull()
    expect(manual.description).toBeNull()

    // the agent id alone re-pins its latest version
    await client.beta.agents.update(agentId, { version: 1, system: 'v2' })
    const repinned = await client.beta.deployments.update(d.id, { agent: agentId })
    expect(repinned.agent).toEqual({ type: 'agent', id: agentId, version: 2 })

    for (const [body, message] of [
      [{ name: '' }, /^invalid body: name: must not be empty/],
      [{ initial_events: [] }, /^invalid body: initial_events: at least 1 event/],
      [{ environment_id: 'env_missing' }, /^environment_id: environment "env_missing" was not found/],
      [{ schedule: { type: 'cron', expression: '0 9 * * 8', timezone: 'UTC' } }, /^invalid body: schedule\.expression: day-of-week field "8"/],
      [{ name: null }, /^invalid body: name/],
    ] as [Record<string, unknown>, RegExp][]) {
      const err = await rejection(client.beta.deployments.update(d.id, body as never))
      expect(err.status).toBe(400)
      expect(messageOf(err)).toMatch(message)
    }
    expect((await client.beta.deployments.retrieve(d.id)).name).toBe('Renamed')

    await client.beta.deployments.archive(d.id)
    const err = await rejection(client.beta.deployments.update(d.id, { name: 'late' }))
    expect(err.status).toBe(409)
  })

  it('pauses (manual reason) and unpauses; a paused deployment still lists its upcoming runs', async () => {
    const d = await client.beta.deployments.create({ ...base(), schedule: { type: 'cron', expression: '0 * * * *', timezone: 'UTC' } })
    const paused = await client.beta.deployments.pause(d.id)
    expect(paused).toMatchObject({ status: 'paused', paused_reason: { type: 'manual' } })
    expect(paused.schedule?.type === 'cron' && paused.schedule.upcoming_runs_at).toHaveLength(5)
    expect(await client.beta.deployments.pause(d.id)).toMatchObject({ status: 'paused' })
    const active = await client.beta.deployments.unpause(d.id)
    expect(active).toMatchObject({ status: 'active', paused_reason: null })
  })

  it('archives: status stays active with archived_at, no upcoming runs, no more pause or run', async () => {
    const d = await client.beta.deployments.create({ ...base(), schedule: { type: 'cron', expression: '0 * * * *', timezone: 'UTC' } })
    const archived = await client.beta.deployments.archive(d.id)
    expect(archived.status).toBe('active')
    expect(archived.archived_at).not.toBeNull()
    expect(archived.schedule).toMatchObject({ upcoming_runs_at: [] })
    expect(await client.beta.deployments.archive(d.id)).toEqual(archived)
    expect((await rejection(client.beta.deployments.pause(d.id))).status).toBe(409)
    expect((await rejection(client.beta.deployments.run(d.id))).status).toBe(409)
  })

  it('lists with filters (agent, status, archived, creation time) and pages through the SDK', async () => {
    const other = await client.beta.agents.create({ name: 'lister', model: 'claude-sonnet-4-6' })
    const mk = (name: string) => client.beta.deployments.create({ ...base(), agent: other.id, name })
    const a = await mk('a')
    const b = await mk('b')
    const c = await mk('c')
    await client.beta.deployments.pause(b.id)
    await client.beta.deployments.archive(c.id)
    const names = async (q: Record<string, unknown>) => (await all(client.beta.deployments.list({ agent_id: other.id, ...q }))).map((d) => d.name)
    expect(await names({})).toEqual(['b', 'a'])
    expect(await names({ include_archived: true })).toEqual(['c', 'b', 'a'])
    expect(await names({ status: 'paused' })).toEqual(['b'])
    expect(await names({ status: 'active' })).toEqual(['a'])
    expect(await names({ 'created_at[gte]': b.created_at })).toEqual(['b'])
    expect(await names({ 'created_at[lte]': a.created_at })).toEqual(['a'])
    expect(await names({ limit: 1, include_archived: true })).toEqual(['c', 'b', 'a'])
    const page = await client.beta.deployments.list({ agent_id: other.id, limit: 1 })
    expect(page.data).toHaveLength(1)
    expect(page.next_page).toBeTruthy()

    const err = await rejection(client.beta.deployments.list({ status: 'active', include_archived: true }))
    expect(err.status).toBe(400)
    expect(messageOf(err)).toMatch(/^invalid query: status: cannot be combined with include_archived/)
    const bad = await rejection(client.beta.deployments.list({ status: 'sleeping' as never }))
    expect(bad.status).toBe(400)
    expect(messageOf(bad)).toMatch(/status/)
  })

  it('runs now (also while paused): a manual run with its session, which carries deployment_id and is found by sessions.list', async () => {
    const d = await client.beta.deployments.create({ ...base(), schedule: { type: 'cron', expression: '0 * * * *', timezone: 'UTC' } })
    const run = await client.beta.deployments.run(d.id)
    expect(run.id).toMatch(/^drun_/)
    expect(run).toMatchObject({ type: 'deployment_run', deployment_id: d.id, agent: d.agent, trigger_context: { type: 'manual' }, error: null })
    expect(run.session_id).toMatch(/^sesn_/)
    const session = await client.beta.sessions.retrieve(run.session_id!)
    expect(session.deployment_id).toBe(d.id)
    expect(session.agent).toMatchObject({ id: agentId })
    const events = await all(client.beta.sessions.events.list(session.id))
    expect(events.map((e) => e.type)).toContain('user.message')

    await client.beta.deployments.pause(d.id)
    const again = await client.beta.deployments.run(d.id)
    expect(again.session_id).toMatch(/^sesn_/)
    const listed = await all(client.beta.sessions.list({ deployment_id: d.id }))
    expect(listed.map((s) => s.id).sort()).toEqual([run.session_id, again.session_id].sort())
    expect(await all(client.beta.sessions.list({ deployment_id: 'depl_missing' }))).toEqual([])
    // a manual run does not move last_run_at
    expect((await client.beta.deployments.retrieve(d.id)).schedule).toMatchObject({ last_run_at: null })
    expect(await client.beta.deploymentRuns.retrieve(run.id)).toEqual(run)
  })

  it('records a run that could not start a session with its error, and an archived agent pauses the deployment with agent_archived_error', async () => {
    const doomed = await client.beta.agents.create({ name: 'doomed', model: 'claude-sonnet-4-6' })
    const d = await client.beta.deployments.create({ ...base(), agent: doomed.id })
    await client.beta.agents.archive(doomed.id)
    const run = await client.beta.deployments.run(d.id)
    expect(run.session_id).toBeNull()
    expect(run.error).toMatchObject({ type: 'agent_archived_error' })
    expect(run.error!.message).toContain(doomed.id)
    const after = await client.beta.deployments.retrieve(d.id)
    expect(after).toMatchObject({ status: 'paused', paused_reason: { type: 'error', error: { type: 'agent_archived_error' } } })
  })

  it("refuses a deployment whose agent's MCP server its environment cannot reach (create, and an update of the agent or the environment), and keeps what was saved", async () => {
    const limited = (networking: Record<string, unknown>) =>
      client.beta.environments.create({ name: `deploy-mcp-${Math.random()}`, config: { type: 'cloud', networking: { type: 'limited', ...networking } } as never })
    const tickets = await client.beta.agents.create({ name: 'ticket-reader', model: 'claude-sonnet-4-6', mcp_servers: [{ type: 'url', name: 'tickets', url: 'https://mcp.tickets.example/sse' }] })
    const closed = await limited({ allowed_hosts: ['api.example.com'] })
    const count = async () => (await all(client.beta.deployments.list({ limit: 100 }))).length
    const before = await count()
    const refused = await rejection(client.beta.deployments.create({ ...base(), agent: tickets.id, environment_id: closed.id }))
    expect(refused.status).toBe(400)
    expect(messageOf(refused)).toMatch(new RegExp(`^agent: mcp_servers\\[0\\]: agent ${tickets.id} \\("ticket-reader"\\) declares MCP server "tickets" at host mcp\\.tickets\\.example, which environment ${closed.id} cannot reach`))
    expect(messageOf(refused)).toContain('add the host to allowed_hosts or set allow_mcp_servers: true')
    expect(await count()).toBe(before)

    const open = await limited({ allowed_hosts: ['mcp.tickets.example'] })
    const d = await client.beta.deployments.create({ ...base(), agent: tickets.id, environment_id: open.id })
    // moving it to the closed environment, or moving the closed one's deployment to the MCP agent: refused, nothing changed
    expect(messageOf(await rejection(client.beta.deployments.update(d.id, { environment_id: closed.id, name: 'moved' })))).toMatch(/^agent: mcp_servers\[0\]: .*"tickets" at host mcp\.tickets\.example/)
    const plain = await client.beta.deployments.create({ ...base(), environment_id: closed.id })
    expect(messageOf(await rejection(client.beta.deployments.update(plain.id, { agent: tickets.id })))).toMatch(/cannot reach/)
    expect(await client.beta.deployments.retrieve(d.id)).toMatchObject({ name: 'Daily order report', environment_id: open.id })
    expect((await client.beta.deployments.retrieve(plain.id)).agent.id).toBe(agentId)
    // what does not touch the agent or the environment is saved as ever
    expect((await client.beta.deployments.update(d.id, { name: 'renamed' })).name).toBe('renamed')
  })

  it('a run whose environment no longer reaches its agent\'s MCP server records mcp_egress_blocked_error and pauses the deployment; unpaused once allowed, it runs', async () => {
    const tickets = await client.beta.agents.create({ name: 'ticket-runner', model: 'claude-sonnet-4-6', mcp_servers: [{ type: 'url', name: 'tickets', url: 'https://mcp.tickets.example/sse' }] })
    const env = await client.beta.environments.create({ name: 'deploy-mcp-later', config: { type: 'cloud', networking: { type: 'limited', allowed_hosts: ['mcp.tickets.example'] } } as never })
    const d = await client.beta.deployments.create({ ...base(), agent: tickets.id, environment_id: env.id })
    // the environment is narrowed after the deployment was saved
    await client.beta.environments.update(env.id, { config: { type: 'cloud', networking: { type: 'limited', allowed_hosts: [] } } as never })
    const run = await client.beta.deployments.run(d.id)
    expect(run.session_id).toBeNull()
    expect(run.error).toMatchObject({ type: 'mcp_egress_blocked_error' })
    expect(run.error!.message).toMatch(/"tickets" at host mcp\.tickets\.example, which environment \S+ cannot reach.*the deployment is paused until/)
    expect(await client.beta.deployments.retrieve(d.id)).toMatchObject({ status: 'paused', paused_reason: { type: 'error', error: { type: 'mcp_egress_blocked_error' } } })
    expect(await all(client.beta.sessions.list({ deployment_id: d.id }))).toEqual([])
    await client.beta.environments.update(env.id, { config: { type: 'cloud', networking: { type: 'limited', allowed_hosts: [], allow_mcp_servers: true } } as never })
    await client.beta.deployments.unpause(d.id)
    const next = await client.beta.deployments.run(d.id)
    expect(next.error).toBeNull()
    expect(next.session_id).toMatch(/^sesn_/)
  })

  it('fires on its schedule and lists runs with filters (deployment, trigger, error, creation time)', async () => {
    // an engine whose scheduler (and deployment store) read a clock that moves only when the test moves it
    const clock = new ManualClock(Date.now())
    const s = await startApiServer({ deployments: { clock } })
    const client = s.client
    const settle = () => s.engine.deploymentScheduler.settled()
    try {
    const agentId = (await client.beta.agents.create({ name: 'reporter', model: 'claude-sonnet-4-6' })).id
    const envId = (await client.beta.environments.create({ name: 'local', config: { type: 'cloud' } })).id
    const base = () => ({ name: 'Daily order report', agent: agentId, environment_id: envId, initial_events: task })
    const d = await client.beta.deployments.create({ ...base(), schedule: { type: 'cron', expression: '*/10 * * * *', timezone: 'UTC' } })
    const upcoming = (d.schedule?.type === 'cron' && d.schedule.upcoming_runs_at) || []
    await client.beta.deployments.run(d.id)
    await clock.advanceTo(Date.parse(upcoming[1]) + 30_000, settle)
    const runs = await all(client.beta.deploymentRuns.list({ deployment_id: d.id }))
    expect(runs.map((r) => r.trigger_context.type)).toEqual(['schedule', 'schedule', 'manual'])
    expect(runs.slice(0, 2).map((r) => (r.trigger_context as { scheduled_at: string }).scheduled_at)).toEqual([upcoming[1], upcoming[0]])
    expect(runs.every((r) => r.session_id && r.error === null)).toBe(true)
    expect((await client.beta.deployments.retrieve(d.id)).schedule).toMatchObject({ last_run_at: runs[0].created_at })

    const ids = async (q: Record<string, unknown>) => (await all(client.beta.deploymentRuns.list({ deployment_id: d.id, ...q }))).map((r) => r.id)
    expect(await ids({ trigger_type: 'manual' })).toEqual([runs[2].id])
    expect(await ids({ trigger_type: 'schedule' })).toEqual([runs[0].id, runs[1].id])
    expect(await ids({ has_error: true })).toEqual([])
    expect(await ids({ has_error: false })).toEqual(runs.map((r) => r.id))
    expect(await ids({ 'created_at[gt]': runs[1].created_at })).toEqual([runs[0].id])
    expect(await ids({ 'created_at[gte]': runs[1].created_at })).toEqual([runs[0].id, runs[1].id])
    expect(await ids({ 'created_at[lt]': runs[1].created_at })).toEqual([runs[2].id])
    expect(await ids({ 'created_at[lte]': runs[2].created_at })).toEqual([runs[2].id])
    expect(await ids({ limit: 1 })).toEqual(runs.map((r) => r.id))
    expect(await all(client.beta.deploymentRuns.list({ deployment_id: 'depl_missing' }))).toEqual([])
    const err = await rejection(client.beta.deploymentRuns.list({ trigger_type: 'cron' as never }))
    expect(err.status).toBe(400)
    expect(messageOf(err)).toMatch(/trigger_type/)
    const doomed = await client.beta.agents.create({ name: 'doomed', model: 'claude-sonnet-4-6' })
    const failing = await client.beta.deployments.create({ ...base(), agent: doomed.id })
    await client.beta.agents.archive(doomed.id)
    await client.beta.deployments.run(failing.id)
    const errs = await all(client.beta.deploymentRuns.list({ has_error: true }))
    expect(errs.map((r) => r.deployment_id)).toEqual([failing.id])
    expect(errs.every((r) => r.error !== null && r.session_id === null)).toBe(true)
    } finally {
      await s.close()
    }
  })
})
