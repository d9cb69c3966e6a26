/**
 * Electron entry: window, menus, the custom protocol, the IPC adapter's wiring. No engine logic
 * here: the engine is built by ./engine (the same composition root `corral serve` uses) and the
 * IPC adapter (./api/ipc) validates and dispatches every call.
 *
 * Hardening: contextIsolation + sandbox + no nodeIntegration; the app is served from the
 * `corral://app/` protocol with a strict CSP; navigation, redirects, new windows and webviews
 * are refused; only https links leave the app (in the system browser); every IPC message's
 * sender frame must be our own page; permissions are refused except notifications.
 */
import { app, BrowserWindow, dialog, ipcMain, Menu, powerMonitor, protocol, safeStorage, session, shell, type IpcMainInvokeEvent, type WebContents, type WebFrameMain } from 'electron'
import { readFileSync, statSync } from 'node:fs'
import { extname, join, normalize, sep } from 'node:path'
import { randomUUID } from 'node:crypto'
import { resolveDataDir } from './config'
import { Engine } from './engine'
import { upgradeProgressLines, type UpgradeProgress } from './session/stores'
import { createIpcAdapter, type IpcAdapter } from './api/ipc'
import { answerPickFolder } from './api/folder-picker'
import { IPC_CHANNELS, type IpcResult } from '../shared/api/operations'
import { RENDERER_CSP, CONTENT_TYPES } from './api/renderer-headers'

const SCHEME = 'corral'
const APP_ORIGIN = `${SCHEME}://app`
const RENDERER_ROOT = join(__dirname, '../renderer')
const DEV_URL = !app.isPackaged ? process.env.ELECTRON_RENDERER_URL : undefined

// Every renderer is sandboxed, whatever a window's own preferences say.
app.enableSandbox()
protocol.registerSchemesAsPrivileged([{ scheme: SCHEME, privileges: { standard: true, secure: true, supportFetchAPI: false, corsEnabled: false } }])

let engine: Engine | undefined
let apiUrl = ''
let adapter: IpcAdapter | undefined
let mainWindow: BrowserWindow | undefined
const subscriptions = new Map<string, { owner: number; dispose: () => void }>()

/** Our page and nothing else: the main window's top frame, loaded from our origin. */
function isTrustedSender(event: IpcMainInvokeEvent): boolean {
  const frame: WebFrameMain | null = event.senderFrame
  if (!frame || !mainWindow || event.sender !== mainWindow.webContents || frame !== event.sender.mainFrame) return false
  try {
    const u = new URL(frame.url)
    // Compared by scheme and host: a custom scheme's URL.origin is 'null' outside Electron's registry.
    if (u.protocol === `${SCHEME}:` && u.host === 'app') return true
    return DEV_URL !== undefined && u.origin === new URL(DEV_URL).origin
  } catch {
    return false
  }
}

const refused: IpcResult = { ok: false, status: 403, error: { type: 'permission_error', message: 'IPC from an untrusted frame' } }

function registerIpc(): void {
  ipcMain.handle(IPC_CHANNELS.call, (event, op: unknown, pathParams: unknown, payload: unknown) => {
    if (!isTrustedSender(event) || !adapter) return refused
    return adapter.call(op, pathParams, payload)
  })
  ipcMain.handle(IPC_CHANNELS.subscribe, (event, params: unknown): IpcResult => {
    if (!isTrustedSender(event) || !adapter) return refused
    const sender = event.sender
    const id = randomUUID()
    const res = adapter.subscribe(params, (msg) => {
      if (!sender.isDestroyed()) sender.send(IPC_CHANNELS.streamMessage, id, msg)
    })
    if (!res.ok) return res
    subscriptions.set(id, { owner: sender.id, dispose: res.dispose })
    return { ok: true, data: { subscription: id } }
  })
  ipcMain.handle(IPC_CHANNELS.unsubscribe, (event, id: unknown) => {
    if (!isTrustedSender(event) || typeof id !== 'string') return refused
    const sub = subscriptions.get(id)
    if (sub && sub.owner === event.sender.id) {
      sub.dispose()
      subscriptions.delete(id)
    }
    return { ok: true, data: null }
  })
  ipcMain.handle(IPC_CHANNELS.pickFolder, (event): Promise<IpcResult<string | null>> =>
    answerPickFolder({
      trusted: isTrustedSender(event),
      showDialog: (options) => {
        const win = BrowserWindow.fromWebContents(event.sender)
        return win ? dialog.showOpenDialog(win, options) : dialog.showOpenDialog(options)
      },
    }),
  )
  ipcMain.handle(IPC_CHANNELS.uploadFile, (event, input: unknown) => {
    if (!isTrustedSender(event) || !adapter) return refused
    return adapter.uploadFile(input)
  })
  ipcMain.handle(IPC_CHANNELS.info, (event) => {
    if (!isTrustedSender(event)) return refused
    // The local API's address, so a person can point the SDK or the CLI at this running app.
    return { version: app.getVersion(), platform: process.platform, apiUrl }
  })
}

function disposeSubscriptionsOf(contentsId: number): void {
  for (const [id, sub] of subscriptions) {
    if (sub.owner === contentsId) {
      sub.dispose()
      subscriptions.delete(id)
    }
  }
}

/** Serves out/renderer on corral://app/ with the CSP; anything outside the folder is a 404. */
function registerAppProtocol(): void {
  protocol.handle(SCHEME, (request) => {
    const url = new URL(request.url)
    if (url.host !== 'app') return new Response('not found', { status: 404 })
    const rel = url.pathname === '/' ? 'index.html' : normalize(decodeURIComponent(url.pathname)).replace(/^([/\\])+/, '')
    const file = join(RENDERER_ROOT, rel)
    if (!file.startsWith(RENDERER_ROOT + sep) || !statSync(file, { throwIfNoEntry: false })?.isFile()) return new Response('not found', { status: 404 })
    return new Response(readFileSync(file), {
      headers: {
        'content-type': CONTENT_TYPES[extname(file)] ?? 'application/octet-stream',
        'content-security-policy': RENDERER_CSP,
        'x-content-type-options': 'nosniff',
      },
    })
  })
}

function hardenContents(contents: WebContents): void {
  contents.setWindowOpenHandler(({ url }) => {
    if (isHttpsUrl(url)) void shell.openExternal(url)
    return { action: 'deny' }
  })
  contents.on('will-navigate', (e, url) => {
    e.preventDefault()
    if (isHttpsUrl(url)) void shell.openExternal(url)
  })
  contents.on('will-redirect', (e) => e.preventDefault())
  contents.on('will-attach-webview', (e) => e.preventDefault())
  contents.on('destroyed', () => disposeSubscriptionsOf(contents.id))
  // A crashed renderer drops its streams and comes back; the log has everything it showed.
  contents.on('render-process-gone', (_e, details: { reason: string }) => {
    disposeSubscriptionsOf(contents.id)
    if (details.reason !== 'clean-exit' && !contents.isDestroyed()) contents.reload()
  })
}

function isHttpsUrl(url: string): boolean {
  try {
    return new URL(url).protocol === 'https:'
  } catch {
    return false
  }
}

function createWindow(): void {
  const win = new BrowserWindow({
    width: 1360,
    height: 860,
    minWidth: 880,
    minHeight: 560,
    show: false,
    title: 'Corral',
    backgroundColor: '#15171c',
    webPreferences: {
      preload: join(__dirname, '../preload/index.js'),
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
      navigateOnDragDrop: false,
      spellcheck: false,
      devTools: !app.isPackaged,
    },
  })
  mainWindow = win
  win.once('ready-to-show', () => win.show())
  win.on('closed', () => {
    if (mainWindow === win) mainWindow = undefined
  })
  void win.loadURL(DEV_URL ?? `${APP_ORIGIN}/index.html`)
}

/**
 * A small window while the database is upgraded before the engine opens (a migration that copies
 * the whole event log: seconds per million events), shown once it has taken more than a moment.
 * A static page (no script, no preload) redrawn with each line of progress, and the progress bar.
 */
function upgradeWindow(): { show: (p: UpgradeProgress) => void; close: () => void } {
  let win: BrowserWindow | undefined
  const print = upgradeProgressLines((line) => {
    const page = `<!doctype html><meta charset="utf-8"><title>Corral</title><body style="font:14px system-ui,sans-serif;background:#15171c;color:#e6e6e6;padding:18px;margin:0">${line.replace(/[<>&]/g, (c) => `&#${c.charCodeAt(0)};`)}</body>`
    win ??= new BrowserWindow({ width: 560, height: 140, resizable: false, minimizable: false, maximizable: false, title: 'Corral', backgroundColor: '#15171c', webPreferences: { sandbox: true, contextIsolation: true, javascript: false } })
    void win.loadURL(`data:text/html;charset=utf-8,${encodeURIComponent(page)}`)
  }, 250)
  return {
    show: (p) => {
      if (!win && p.elapsedMs < 400) return
      print(p)
      win?.setProgressBar(p.total > 0 && p.done < p.total ? p.done / p.total : 2)
    },
    close: () => win?.destroy(),
  }
}

function buildMenu(): void {
  const isMac = process.platform === 'darwin'
  Menu.setApplicationMenu(
    Menu.buildFromTemplate([
      ...(isMac ? [{ role: 'appMenu' as const }] : []),
      { role: 'fileMenu' },
      { role: 'editMenu' },
      {
        label: 'View',
        submenu: [{ role: 'reload' }, ...(app.isPackaged ? [] : [{ role: 'toggleDevTools' as const }]), { type: 'separator' }, { role: 'resetZoom' }, { role: 'zoomIn' }, { role: 'zoomOut' }, { type: 'separator' }, { role: 'togglefullscreen' }],
      },
      { role: 'windowMenu' },
    ]),
  )
}

if (!app.requestSingleInstanceLock()) app.quit()
else {
  app.on('second-instance', () => {
    if (!mainWindow) return
    if (mainWindow.isMinimized()) mainWindow.restore()
    mainWindow.focus()
  })
  app.on('web-contents-created', (_e, contents) => hardenContents(contents))

  void app.whenReady().then(async () => {
    // Only notifications (confirmation alerts) are granted; camera, geolocation, ... are refused.
    session.defaultSession.setPermissionRequestHandler((_wc, permission, callback) => callback(permission === 'notifications'))
    session.defaultSession.setPermissionCheckHandler((_wc, permission) => permission === 'notifications')
    registerAppProtocol()
    // The API key and the local token live in the keychain (safeStorage in the app); the engine
    // wakes every session that was running when the app last quit.
    const upgrade = upgradeWindow()
    try {
      engine = await Engine.openWithKeychain({ dataDir: resolveDataDir(process.env, app.getPath('userData')), safeStorage, onUpgrade: upgrade.show })
    } finally {
      upgrade.close()
    }
    apiUrl = (await engine.listen(0)).url
    adapter = createIpcAdapter({ app: engine.app, token: engine.token, services: engine.services })
    registerIpc()
    buildMenu()
    createWindow()
    // After sleep, scheduled deployments look at the clock at once (they would within a minute):
    // the most recent instant slept through runs once, marked as missed while asleep.
    powerMonitor.on('resume', () => engine?.deploymentScheduler.check())
    app.on('activate', () => {
      if (BrowserWindow.getAllWindows().length === 0) createWindow()
    })
  })

  app.on('window-all-closed', () => {
    if (process.platform !== 'darwin') app.quit()
  })

  // Quitting waits for the engine to stop cleanly (queued appends committed, brains released),
  // so every session resumes from its log on the next start.
  let quitting = false
  app.on('before-quit', (e) => {
    if (quitting || !engine) return
    e.preventDefault()
    quitting = true
    for (const [id, sub] of subscriptions) {
      sub.dispose()
      subscriptions.delete(id)
    }
    void engine
      .close()
      .catch((err: unknown) => console.error(`[corral] engine did not close cleanly: ${(err as Error).message}`))
      .finally(() => app.exit(0))
  })
}
