/**
 * Exposes the contract to the renderer through contextBridge, nothing more. The full typed
 * surface (every API operation + event subscription) lands with the desktop issue.
 */
import { contextBridge, ipcRenderer } from 'electron'

contextBridge.exposeInMainWorld('corral', {
  version: (): Promise<string> => ipcRenderer.invoke('corral:version'),
})
