import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { rmSync } from 'node:fs'
import { IPC_CHANNELS } from '../../../src/shared/api/operations'
import { FakeWebContents } from '../../support/fake-electron'

// The shell (src/main/index.ts) with a real engine (SQLite in a temp dir) and an in-memory stand-in
// for Electron's main-process API: the Electron binary cannot run on these machines, but what the
// shell asks of Electron — its hardening — can be checked.
const fake = await vi.hoisted(async () => {
  const { createFakeElectron } = await import('../../support/fake-electron')
  const { mkdtempSync: mk } = await import('node:fs')
  const { tmpdir: tmp } = await import('node:os')
  const { join: j } = await import('node:path')
  const dir = mk(j(tmp(), 'corral-shell-'))
  process.env.CORRAL_DATA_DIR = dir
  process.env.CORRAL_TOKEN = 'shell-test-token'
  return { dir, electron: createFakeElectron({ userData: dir }) }
})
vi.mock('electron', () => fake.electron.module)

const e = fake.electron

describe('the Electron shell', () => {
  beforeAll(async () => {
    await import('../../../src/main/index')
    e.ready()
    await vi.waitFor(() => expect(e.windows).toHaveLength(1), { timeout: 15_000 })
  })

  afterAll(async () => {
    let prevented = false
    e.app.emit('before-quit', { preventDefault: () => (prevented = true) })
    expect(prevented).toBe(true)
    await vi.waitFor(() => expect(e.calls.exit).toEqual([0]), { timeout: 15_000 })
    rmSync(fake.dir, { recursive: true, force: true })
  })

  it('opens one hardened window on the corral:// app origin', () => {
    const w = e.windows[0]
    expect(w.options.webPreferences).toMatchObject({ contextIsolation: true, sandbox: true, nodeIntegration: false, webviewTag: false, webSecurity: true, allowRunningInsecureContent: false })
    expect(String(w.options.webPreferences?.preload)).toMatch(/preload[/\\]index\.js$/)
    expect(w.loadedUrl).toBe('corral://app/index.html')
    expect(e.calls.enableSandbox).toBe(1)
    expect(e.calls.schemes).toMatchObject([{ scheme: 'corral', privileges: { standard: true, secure: true } }])
  })

  it('serves the renderer over corral:// with the CSP, and nothing outside it', async () => {
    const handle = e.protocolHandlers.get('corral')!
    const page = await handle(new Request('corral://app/index.html'))
    expect(page.status).toBe(200)
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'")
    expect(page.headers.get('content-security-policy')).not.toContain('unsafe-inline')
    expect((await handle(new Request('corral://app/..%2f..%2fpackage.json'))).status).toBe(404)
    expect((await handle(new Request('corral://elsewhere/index.html'))).status).toBe(404)
  })

  it('refuses navigation and new windows, and sends only https links to the system browser', () => {
    const wc = e.windows[0].webContents
    expect(wc.windowOpenHandler!({ url: 'https://docs.example.com/x' })).toEqual({ action: 'deny' })
    expect(wc.windowOpenHandler!({ url: 'http://insecure.example.com/' })).toEqual({ action: 'deny' })
    expect(wc.windowOpenHandler!({ url: 'file:///etc/passwd' })).toEqual({ action: 'deny' })
    let prevented = 0
    const ev = { preventDefault: () => prevented++ }
    wc.emit('will-navigate', ev, 'https://evil.example.com/')
    wc.emit('will-navigate', ev, 'javascript:alert(1)')
    wc.emit('will-redirect', ev, 'https://evil.example.com/')
    wc.emit('will-attach-webview', ev)
    expect(prevented).toBe(4)
    expect(e.calls.openExternal).toEqual(['https://docs.example.com/x', 'https://evil.example.com/'])
  })

  it('grants notifications and no other permission', () => {
    const answers: boolean[] = []
    for (const p of ['notifications', 'media', 'geolocation', 'clipboard-read']) e.permissions.request!({}, p, (ok) => answers.push(ok))
    expect(answers).toEqual([true, false, false, false])
    expect(e.permissions.check!({}, 'openExternal')).toBe(false)
  })

  it('answers IPC only from its own window\'s top frame on the app origin', async () => {
    const call = e.ipcHandlers.get(IPC_CHANNELS.call)!
    const wc = e.windows[0].webContents
    const trusted = { sender: wc, senderFrame: wc.mainFrame }
    const ok = (await call(trusted, 'agents.create', {}, { name: 'from ipc', model: 'claude-sonnet-4-5' })) as { ok: boolean; data: { id: string } }
    expect(ok.ok).toBe(true)
    expect(ok.data.id).toMatch(/^agent_/)
    const other = new FakeWebContents('corral://app/index.html')
    expect(await call({ sender: other, senderFrame: other.mainFrame }, 'agents.list', {}, {})).toMatchObject({ ok: false, status: 403 })
    expect(await call({ sender: wc, senderFrame: { url: 'corral://app/index.html' } }, 'agents.list', {}, {})).toMatchObject({ ok: false, status: 403 })
    ;(wc.mainFrame as { url: string }).url = 'https://evil.example.com/'
    expect(await call({ sender: wc, senderFrame: wc.mainFrame }, 'agents.list', {}, {})).toMatchObject({ ok: false, status: 403 })
    ;(wc.mainFrame as { url: string }).url = 'corral://app/index.html'
  })

  it('opens the system folder dialog on its own window for the folder picker, answers the chosen folder or null, and shows none to an untrusted frame', async () => {
    const pick = e.ipcHandlers.get(IPC_CHANNELS.pickFolder)!
    const win = e.windows[0]
    const trusted = { sender: win.webContents, senderFrame: win.webContents.mainFrame }
    e.dialogAnswer = { canceled: false, filePaths: ['/home/me/project'] }
    expect(await pick(trusted)).toEqual({ ok: true, data: '/home/me/project' })
    expect(e.calls.openDialogs).toEqual([{ window: win, options: { title: 'Choose a folder for the agent', properties: ['openDirectory', 'createDirectory'] } }])
    e.dialogAnswer = { canceled: true, filePaths: [] }
    expect(await pick(trusted)).toEqual({ ok: true, data: null })
    const other = new FakeWebContents('corral://app/index.html')
    expect(await pick({ sender: other, senderFrame: other.mainFrame })).toMatchObject({ ok: false, status: 403, error: { type: 'permission_error' } })
    expect(e.calls.openDialogs).toHaveLength(2)
  })

  it('uploads a dropped file for its own window only', async () => {
    const upload = e.ipcHandlers.get(IPC_CHANNELS.uploadFile)!
    const wc = e.windows[0].webContents
    const file = { name: 'drop.txt', type: 'text/plain', bytes: new TextEncoder().encode('dropped\n') }
    expect(await upload({ sender: wc, senderFrame: wc.mainFrame }, file)).toMatchObject({ ok: true, data: { filename: 'drop.txt', size_bytes: 8 } })
    const other = new FakeWebContents('corral://app/index.html')
    expect(await upload({ sender: other, senderFrame: other.mainFrame }, file)).toMatchObject({ ok: false, status: 403, error: { type: 'permission_error' } })
  })

  it('validates IPC input with the API schemas and streams a session to its subscriber', async () => {
    const wc = e.windows[0].webContents
    const trusted = { sender: wc, senderFrame: wc.mainFrame }
    const call = e.ipcHandlers.get(IPC_CHANNELS.call)!
    expect(await call(trusted, 'sessions.create', {}, { agent: 42 })).toMatchObject({ ok: false, status: 400, error: { type: 'invalid_request_error' } })
    const agent = (await call(trusted, 'agents.create', {}, { name: 'a', model: 'claude-sonnet-4-5' })) as { data: { id: string } }
    const env = (await call(trusted, 'environments.create', {}, { name: 'e' })) as { data: { id: string } }
    const session = (await call(trusted, 'sessions.create', {}, { agent: agent.data.id, environment_id: env.data.id })) as { data: { id: string } }
    const sub = (await e.ipcHandlers.get(IPC_CHANNELS.subscribe)!(trusted, { sessionId: session.data.id })) as { ok: boolean; data: { subscription: string } }
    expect(sub.ok).toBe(true)
    await call(trusted, 'events.send', { id: session.data.id }, { events: [{ type: 'system.message', content: [{ type: 'text', text: 'hello' }] }] })
    await vi.waitFor(() => expect(wc.sent.length).toBeGreaterThan(0))
    expect(wc.sent[0]).toMatchObject([IPC_CHANNELS.streamMessage, sub.data.subscription, { kind: 'event', seq: 1, event: { type: 'system.message' } }])
    const info = (await e.ipcHandlers.get(IPC_CHANNELS.info)!(trusted)) as { apiUrl: string }
    expect(info.apiUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
  })
})
