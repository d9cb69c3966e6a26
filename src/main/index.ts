/**
 * Electron entry: window, menus, safeStorage, IPC adapter. No engine logic here: the engine is
 * built by ./engine (the same composition root `corral serve` uses).
 */
import { app, BrowserWindow, shell } from 'electron'
import { join } from 'node:path'
import { resolveDataDir } from './config'
import { Engine } from './engine'

let engine: Engine | undefined

function createWindow(): void {
  const win = new BrowserWindow({
    width: 1280,
    height: 820,
    show: false,
    title: 'Corral',
    webPreferences: {
      preload: join(__dirname, '../preload/index.js'),
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
    },
  })
  win.once('ready-to-show', () => win.show())
  win.webContents.setWindowOpenHandler(({ url }) => {
    if (url.startsWith('https://')) void shell.openExternal(url)
    return { action: 'deny' }
  })
  win.webContents.on('will-navigate', (e) => e.preventDefault())
  if (process.env.ELECTRON_RENDERER_URL) void win.loadURL(process.env.ELECTRON_RENDERER_URL)
  else void win.loadFile(join(__dirname, '../renderer/index.html'))
}

if (!app.requestSingleInstanceLock()) app.quit()
else {
  void app.whenReady().then(async () => {
    engine = Engine.open({ dataDir: resolveDataDir(process.env, app.getPath('userData')) })
    await engine.listen(0)
    createWindow()
  })
  app.on('window-all-closed', () => app.quit())
  app.on('before-quit', () => void engine?.close())
}
