import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createIpcAdapter, type IpcAdapter } from '../../../src/main/api/ipc'
import type { StreamMessage } from '../../../src/shared/api/operations'
import { startApiServer, type TestApiServer } from '../../support/api-server'

describe('the IPC adapter (the desktop renderer\'s transport)', () => {
  let api: TestApiServer
  let ipc: IpcAdapter

  beforeAll(async () => {
    api = await startApiServer({ harness: { enabled: false } })
    ipc = createIpcAdapter({ app: api.engine.app, token: api.token, services: api.engine.services })
  })
  afterAll(async () => api?.close())

  it('reaches the same service operations as the HTTP API', async () => {
    const created = await ipc.call('agents.create', {}, { name: 'ipc agent', model: 'claude-sonnet-4-5' })
    expect(created.ok).toBe(true)
    const id = (created as { data: { id: string } }).data.id
    const viaHttp = await (await api.fetch(`/v1/agents/${id}`)).json()
    expect(viaHttp).toMatchObject({ id, name: 'ipc agent', version: 1 })
    const listed = await ipc.call('agents.list', {}, { limit: 10 })
    expect(listed).toMatchObject({ ok: true, data: { data: [{ id }] } })
  })

  it('uploads a file to the files API as the desktop sends it, and adds it to a session as a file resource', async () => {
    const bytes = new TextEncoder().encode('dropped on the desktop\n')
    const up = await ipc.uploadFile({ name: 'notes.txt', type: 'text/plain', bytes })
    expect(up).toMatchObject({ ok: true, data: { type: 'file', filename: 'notes.txt', mime_type: 'text/plain', size_bytes: bytes.length } })
    const id = (up as { data: { id: string } }).data.id
    expect(await (await api.fetch(`/v1/files/${id}/content`)).text()).toBe('dropped on the desktop\n')
    const agent = (await ipc.call('agents.create', {}, { name: 'reader', model: 'claude-sonnet-4-5' })) as { data: { id: string } }
    const env = (await ipc.call('environments.create', {}, { name: 'e' })) as { data: { id: string } }
    const session = (await ipc.call('sessions.create', {}, { agent: agent.data.id, environment_id: env.data.id })) as { data: { id: string } }
    const added = await ipc.call('sessionResources.add', { id: session.data.id }, { type: 'file', file_id: id, mount_path: 'notes.txt' })
    expect(added).toMatchObject({ ok: true, data: { type: 'file', file_id: id, mount_path: '/mnt/session/uploads/notes.txt' } })
  })

  it("carries the Vaults page's operations: a vault and a credential made, listed without a secret, a bad body's 400 naming the field, validate, archive, delete", async () => {
    const vault = (await ipc.call('vaults.create', {}, { display_name: 'Via IPC' })) as { ok: true; data: { id: string } }
    expect(vault).toMatchObject({ ok: true, data: { type: 'vault', display_name: 'Via IPC' } })
    const id = vault.data.id
    const bad = await ipc.call('credentials.create', { id }, { auth: { type: 'static_bearer', mcp_server_url: 'not a url', token: 't' } })
    expect(bad).toMatchObject({ ok: false, status: 400, error: { type: 'invalid_request_error', message: expect.stringMatching(/mcp_server_url/) } })
    const made = (await ipc.call('credentials.create', { id }, { display_name: 'Docs', auth: { type: 'mcp_oauth', mcp_server_url: 'https://mcp.example.com/mcp', access_token: 'canary-ipc-access-88' } })) as { ok: true; data: { id: string } }
    expect(made).toMatchObject({ ok: true, data: { type: 'vault_credential', vault_id: id, display_name: 'Docs', auth: { type: 'mcp_oauth', mcp_server_url: 'https://mcp.example.com/mcp' } } })
    const credentialId = made.data.id
    const listed = await ipc.call('credentials.list', { id }, { limit: 100, include_archived: true })
    expect(listed).toMatchObject({ ok: true, data: { data: [{ id: credentialId }] } })
    expect(JSON.stringify(listed)).not.toContain('canary')
    // this engine has no keychain: the probe has no secret to use, and says so
    expect(await ipc.call('credentials.mcpOAuthValidate', { id, credentialId }, undefined)).toMatchObject({ ok: false, status: 503, error: { message: expect.stringMatching(/without a keychain/) } })
    expect(await ipc.call('credentials.update', { id, credentialId }, { display_name: 'Docs (renamed)' })).toMatchObject({ ok: true, data: { display_name: 'Docs (renamed)' } })
    expect(await ipc.call('credentials.archive', { id, credentialId }, undefined)).toMatchObject({ ok: true, data: { archived_at: expect.any(String) } })
    expect(await ipc.call('credentials.delete', { id, credentialId }, undefined)).toMatchObject({ ok: true, data: { type: 'vault_credential_deleted', id: credentialId } })
    expect(await ipc.call('vaults.delete', { id }, undefined)).toMatchObject({ ok: true, data: { type: 'vault_deleted', id } })
  })

  it("carries the Settings page's webhook operations, and this engine without a keychain says it sends no webhooks", async () => {
    const bad = await ipc.call('webhooks.create', {}, { url: 'ftp://example.com', enabled_events: ['session.created'] })
    expect(bad).toMatchObject({ ok: false, status: 400, error: { message: expect.stringMatching(/^invalid body: url: must be http or https/) } })
    for (const [op, path, body] of [
      ['webhooks.list', {}, undefined],
      ['webhooks.create', {}, { url: 'http://127.0.0.1:9/hooks', enabled_events: ['session.created'] }],
      ['webhooks.deliveries', { id: 'whep_1' }, undefined],
    ] as const) {
      expect(await ipc.call(op, path, body)).toMatchObject({ ok: false, status: 503, error: { message: expect.stringMatching(/sends no webhooks: it runs without a keychain/) } })
    }
  })

  it('answers an upload without bytes or name with a 400 naming the field, and keeps nothing', async () => {
    const before = ((await (await api.fetch('/v1/files')).json()) as { data: unknown[] }).data.length
    const res = await ipc.uploadFile({ name: 'x.txt', bytes: 'not bytes' })
    expect(res).toMatchObject({ ok: false, status: 400, error: { type: 'invalid_request_error' } })
    expect((res as { error: { message: string } }).error.message).toMatch(/bytes/)
    expect(((await ipc.uploadFile({ name: '', bytes: new Uint8Array(1) })) as { error: { message: string } }).error.message).toMatch(/name/)
    expect(((await (await api.fetch('/v1/files')).json()) as { data: unknown[] }).data.length).toBe(before)
  })

  it("carries the Skills page's operations: a folder uploaded as JSON, listed with its version, a bad upload's 400, a version deleted", async () => {
    const b64 = (t: string) => Buffer.from(t).toString('base64')
    const bad = await ipc.call('skills.upload', {}, { files: [{ path: 'notes/README.md', content_base64: b64('no manifest') }] })
    expect(bad).toMatchObject({ ok: false, status: 400, error: { type: 'invalid_request_error', message: expect.stringMatching(/files: no notes\/SKILL\.md/) } })
    expect(await ipc.call('skills.upload', {}, { files: [{ path: 'x/SKILL.md', content_base64: 'not base64!' }] })).toMatchObject({ ok: false, status: 400, error: { message: expect.stringMatching(/content_base64/) } })
    const up = (await ipc.call('skills.upload', {}, { display_name: 'Via IPC', files: [{ path: 'ipc-skill/SKILL.md', content_base64: b64('---\nname: ipc-skill\ndescription: Uploaded over IPC.\n---\n') }] })) as { ok: true; data: { id: string; latest_version_id: string } }
    expect(up).toMatchObject({ ok: true, data: { type: 'skill', display_name: 'Via IPC' } })
    const { id, latest_version_id: version } = up.data
    expect(await ipc.call('skills.list', {}, { limit: 100 })).toMatchObject({ ok: true, data: { data: [{ id, latest_version_id: version }] } })
    expect(await ipc.call('skills.versions.list', { id }, { limit: 100 })).toMatchObject({ ok: true, data: { data: [{ id: version, name: 'ipc-skill', description: 'Uploaded over IPC.' }] } })
    expect(await ipc.call('skills.versions.delete', { id, versionId: version }, undefined)).toMatchObject({ ok: true, data: { type: 'skill_version_deleted', id: version } })
    expect(await ipc.call('skills.delete', { id }, undefined)).toMatchObject({ ok: true, data: { type: 'skill_deleted', id } })
  })

  it("carries the run card's workflow-run operations with a runId path parameter: an empty list, a 404 naming the run", async () => {
    const agent = (await ipc.call('agents.create', {}, { name: 'lead', model: 'claude-sonnet-4-5' })) as { data: { id: string } }
    const env = (await ipc.call('environments.create', {}, { name: 'runs' })) as { data: { id: string } }
    const session = (await ipc.call('sessions.create', {}, { agent: agent.data.id, environment_id: env.data.id })) as { data: { id: string } }
    const id = session.data.id
    expect(await ipc.call('workflowRuns.list', { id }, { limit: 10 })).toEqual({ ok: true, data: { data: [], next_page: null } })
    expect(await ipc.call('workflowRuns.retrieve', { id, runId: 'wrun_none' }, undefined)).toMatchObject({ ok: false, status: 404, error: { type: 'not_found_error', message: expect.stringContaining('"wrun_none"') } })
    expect(await ipc.call('workflowRuns.logs', { id, runId: 'wrun_none' }, { after_line: 3 })).toMatchObject({ ok: false, status: 404, error: { message: expect.stringContaining('"wrun_none"') } })
    expect(await ipc.call('workflowRuns.logs', { id, runId: '../x' }, undefined)).toMatchObject({ ok: false, status: 400, error: { message: expect.stringMatching(/runId: an id/) } })
  })

  it('answers a bad body with the API error type and a message naming the field', async () => {
    const res = await ipc.call('agents.create', {}, { name: '', model: 'x' })
    expect(res).toMatchObject({ ok: false, status: 400, error: { type: 'invalid_request_error' } })
    expect((res as { error: { message: string } }).error.message).toMatch(/name/)
  })

  it('refuses an unknown operation and a path parameter that is not an id', async () => {
    expect(await ipc.call('agents.delete_everything', {}, {})).toMatchObject({ ok: false, status: 400, error: { message: expect.stringMatching(/not an operation of the contract/) } })
    const traversal = await ipc.call('sessions.retrieve', { id: '../agents' }, undefined)
    expect(traversal).toMatchObject({ ok: false, status: 400, error: { message: expect.stringMatching(/id: an id/) } })
    expect(await ipc.call('sessions.retrieve', { id: 'sesn_missing' }, undefined)).toMatchObject({ ok: false, status: 404, error: { type: 'not_found_error' } })
  })

  it('refuses a query that is not flat and a body on an operation that takes none', async () => {
    expect(await ipc.call('agents.list', {}, { limit: { $gt: 1 } })).toMatchObject({ ok: false, status: 400, error: { message: expect.stringMatching(/invalid query: limit/) } })
    const a = (await ipc.call('agents.create', {}, { name: 'to archive', model: 'claude-sonnet-4-5' })) as { data: { id: string } }
    expect(await ipc.call('agents.archive', { id: a.data.id }, { force: true })).toMatchObject({ ok: false, status: 400, error: { message: expect.stringMatching(/takes no body/) } })
  })

  it('streams a session\'s stored events with their seq, and previews only when asked', async () => {
    const agent = (await ipc.call('agents.create', {}, { name: 'streamer', model: 'claude-sonnet-4-5' })) as { data: { id: string } }
    const env = (await ipc.call('environments.create', {}, { name: 'stream env' })) as { data: { id: string } }
    const session = (await ipc.call('sessions.create', {}, { agent: agent.data.id, environment_id: env.data.id })) as { data: { id: string } }
    const sessionId = session.data.id
    const plain: StreamMessage[] = []
    const withPreviews: StreamMessage[] = []
    const a = ipc.subscribe({ sessionId }, (m) => plain.push(m))
    const b = ipc.subscribe({ sessionId, previews: true }, (m) => withPreviews.push(m))
    expect(a.ok && b.ok).toBe(true)
    await ipc.call('events.send', { id: sessionId }, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'hi' }] }] })
    api.engine.services.previews.publish(sessionId, { type: 'event_start', event: { id: 'sevt_preview', type: 'agent.message' } })
    api.engine.services.previews.publish(sessionId, { type: 'event_delta', event_id: 'sevt_preview', delta: { type: 'content_delta', content: { type: 'text', text: 'Hel' } } })
    await expect.poll(() => plain.length).toBe(1)
    expect(plain[0]).toMatchObject({ kind: 'event', seq: 1, event: { type: 'user.message' } })
    expect(withPreviews.map((m) => (m.kind === 'event' ? m.event.type : m.preview.type))).toEqual(['user.message', 'event_start', 'event_delta'])
    if (a.ok) a.dispose()
    if (b.ok) b.dispose()
    await ipc.call('events.send', { id: sessionId }, { events: [{ type: 'user.message', content: [{ type: 'text', text: 'again' }] }] })
    await new Promise((r) => setTimeout(r, 50))
    expect(plain).toHaveLength(1)
    // Resuming after a seq replays what came later, once.
    const resumed: StreamMessage[] = []
    const c = ipc.subscribe({ sessionId, after: 1 }, (m) => resumed.push(m))
    await expect.poll(() => resumed.length).toBe(1)
    expect(resumed[0]).toMatchObject({ kind: 'event', seq: 2 })
    if (c.ok) c.dispose()
  })

  it("shows on a session subscription what the session stream shows, and on a thread's subscription that thread's events", async () => {
    const agent = await ipc.call('agents.create', {}, { name: 'lead', model: 'claude-sonnet-4-5' })
    const env = await ipc.call('environments.create', {}, { name: 'ipc threads env' })
    if (!agent.ok || !env.ok) throw new Error('set-up failed')
    const session = await ipc.call('sessions.create', {}, { agent: (agent.data as { id: string }).id, environment_id: (env.data as { id: string }).id })
    if (!session.ok) throw new Error('set-up failed')
    const sessionId = (session.data as { id: string }).id
    const child = 'sthr_IPCCHILD000000000000000001'
    const log = api.engine.services.log
    await log.append(sessionId, [{ type: 'session.thread_created', session_thread_id: child, agent_name: 'helper', workflow_run_id: null }])
    const onSession: string[] = []
    const onChild: string[] = []
    const a = ipc.subscribe({ sessionId }, (m) => m.kind === 'event' && onSession.push(m.event.type))
    const b = ipc.subscribe({ sessionId, thread: child }, (m) => m.kind === 'event' && onChild.push(m.event.type))
    expect(ipc.subscribe({ sessionId, thread: 'sthr_NOPE' }, () => {})).toMatchObject({ ok: false, status: 404 })
    await log.append(sessionId, [
      { type: 'agent.message', session_thread_id: child, content: [{ type: 'text', text: 'child only' }] },
      { type: 'agent.custom_tool_use', session_thread_id: child, name: 'lookup', input: {} },
      { type: 'agent.thinking' },
    ])
    await expect.poll(() => onSession.length + onChild.length).toBe(4)
    expect(onSession).toEqual(['agent.custom_tool_use', 'agent.thinking'])
    expect(onChild).toEqual(['agent.message', 'agent.custom_tool_use'])
    if (a.ok) a.dispose()
    if (b.ok) b.dispose()
  })

  it('refuses a stream of an unknown session or with a malformed subscription', () => {
    expect(ipc.subscribe({ sessionId: 'sesn_nope' }, () => {})).toMatchObject({ ok: false, status: 404 })
    expect(ipc.subscribe({ sessionId: 'sesn_x', after: -1 }, () => {})).toMatchObject({ ok: false, status: 400, error: { message: expect.stringMatching(/after/) } })
  })
})
