import { EventEmitter } from 'node:events'

/**
 * An in-memory stand-in for the parts of Electron's main-process API the shell uses
 * (src/main/index.ts), recording what the shell asked for, so its hardening can be tested where
 * the Electron binary cannot run. Only for tests: it draws nothing and loads nothing.
 */
export class FakeWebContents extends EventEmitter {
  static nextId = 1
  readonly id = FakeWebContents.nextId++
  readonly mainFrame: { url: string }
  readonly sent: unknown[][] = []
  windowOpenHandler?: (details: { url: string }) => { action: 'allow' | 'deny' }
  destroyed = false

  constructor(url = '') {
    super()
    this.mainFrame = { url }
  }
  setWindowOpenHandler(h: (details: { url: string }) => { action: 'allow' | 'deny' }): void {
    this.windowOpenHandler = h
  }
  isDestroyed(): boolean {
    return this.destroyed
  }
  send(channel: string, ...args: unknown[]): void {
    this.sent.push([channel, ...args])
  }
}

export interface FakeElectron {
  module: Record<string, unknown>
  calls: { enableSandbox: number; schemes: unknown[]; openExternal: string[]; exit: number[]; quit: number; menus: number; /** dialog.showOpenDialog calls: the window it was asked on (or none) and the options. */ openDialogs: { window?: unknown; options: unknown }[] }
  /** What dialog.showOpenDialog answers next (default: cancelled). */
  dialogAnswer: { canceled: boolean; filePaths: string[] }
  windows: FakeBrowserWindow[]
  protocolHandlers: Map<string, (req: Request) => Response | Promise<Response>>
  ipcHandlers: Map<string, (event: unknown, ...args: unknown[]) => unknown>
  permissions: { request?: (wc: unknown, permission: string, cb: (ok: boolean) => void) => void; check?: (wc: unknown, permission: string) => boolean }
  app: EventEmitter
  /** Resolves app.whenReady(). */
  ready(): void
}

export interface FakeBrowserWindow extends EventEmitter {
  options: { webPreferences?: Record<string, unknown>; [k: string]: unknown }
  webContents: FakeWebContents
  loadedUrl?: string
}

export function createFakeElectron(params: { userData: string }): FakeElectron {
  const calls: FakeElectron['calls'] = { enableSandbox: 0, schemes: [], openExternal: [], exit: [], quit: 0, menus: 0, openDialogs: [] }
  const windows: FakeBrowserWindow[] = []
  const protocolHandlers: FakeElectron['protocolHandlers'] = new Map()
  const ipcHandlers: FakeElectron['ipcHandlers'] = new Map()
  const permissions: FakeElectron['permissions'] = {}
  let resolveReady!: () => void
  const ready = new Promise<void>((r) => (resolveReady = r))

  const app = Object.assign(new EventEmitter(), {
    isPackaged: false,
    enableSandbox: () => void calls.enableSandbox++,
    requestSingleInstanceLock: () => true,
    hasSingleInstanceLock: () => true,
    whenReady: () => ready,
    getPath: () => params.userData,
    getVersion: () => '0.0.0-test',
    quit: () => void calls.quit++,
    exit: (code = 0) => void calls.exit.push(code),
  })

  class BrowserWindow extends EventEmitter implements FakeBrowserWindow {
    webContents: FakeWebContents
    loadedUrl?: string
    constructor(readonly options: FakeBrowserWindow['options']) {
      super()
      this.webContents = new FakeWebContents()
      windows.push(this)
      app.emit('web-contents-created', {}, this.webContents)
    }
    static getAllWindows() {
      return windows
    }
    static fromWebContents(wc: unknown) {
      return windows.find((w) => w.webContents === wc) ?? null
    }
    loadURL(url: string) {
      this.loadedUrl = url
      ;(this.webContents.mainFrame as { url: string }).url = url
      return Promise.resolve()
    }
    show() {}
    isMinimized() {
      return false
    }
    restore() {}
    focus() {}
  }

  const module = {
    app,
    BrowserWindow,
    ipcMain: { handle: (channel: string, fn: (event: unknown, ...args: unknown[]) => unknown) => void ipcHandlers.set(channel, fn) },
    Menu: { setApplicationMenu: () => void calls.menus++, buildFromTemplate: (t: unknown) => t },
    protocol: {
      registerSchemesAsPrivileged: (schemes: unknown[]) => void calls.schemes.push(...schemes),
      handle: (scheme: string, h: (req: Request) => Response) => void protocolHandlers.set(scheme, h),
    },
    safeStorage: { isEncryptionAvailable: () => false, encryptString: () => Buffer.alloc(0), decryptString: () => '', getSelectedStorageBackend: () => 'basic_text' },
    session: {
      defaultSession: {
        setPermissionRequestHandler: (h: FakeElectron['permissions']['request']) => void (permissions.request = h),
        setPermissionCheckHandler: (h: FakeElectron['permissions']['check']) => void (permissions.check = h),
      },
    },
    shell: { openExternal: async (url: string) => void calls.openExternal.push(url) },
    /** The OS's power events; a test emits 'resume' as the OS does after sleep. */
    powerMonitor: new EventEmitter(),
    dialog: {
      showOpenDialog: async (...args: unknown[]) => {
        calls.openDialogs.push(args.length > 1 ? { window: args[0], options: args[1] } : { options: args[0] })
        return fake.dialogAnswer
      },
    },
  }
  const fake: FakeElectron = { module, calls, windows, protocolHandlers, ipcHandlers, permissions, app, ready: () => resolveReady(), dialogAnswer: { canceled: true, filePaths: [] } }
  return fake
}
