/**
 * Exposes the contract to the renderer through contextBridge, nothing more: `call` (the API's
 * operations), `subscribe` (a live session stream) and `info`. The preload runs sandboxed, so it
 * holds no logic: the main process validates every argument with the API's schemas and checks
 * every sender. Only the channel names come from src/shared (bundled in at build time).
 */
import { contextBridge, ipcRenderer, type IpcRendererEvent } from 'electron'
import { IPC_CHANNELS, type IpcResult, type StreamMessage, type StreamSubscribeParams } from '../shared/api/operations'

type Listener = (msg: StreamMessage) => void
const listeners = new Map<string, Listener>()

ipcRenderer.on(IPC_CHANNELS.streamMessage, (_e: IpcRendererEvent, subscription: unknown, msg: unknown) => {
  if (typeof subscription === 'string') listeners.get(subscription)?.(msg as StreamMessage)
})

const bridge = {
  call: (op: string, pathParams: Record<string, string>, payload?: unknown): Promise<IpcResult> =>
    ipcRenderer.invoke(IPC_CHANNELS.call, op, pathParams, payload),
  /** Resolves with a disposer once the stream is open, or with the error result. */
  subscribe: async (params: StreamSubscribeParams, listener: Listener): Promise<IpcResult<{ unsubscribe: () => void }>> => {
    const res = (await ipcRenderer.invoke(IPC_CHANNELS.subscribe, params)) as IpcResult<{ subscription: string }>
    if (!res.ok) return res
    const id = res.data.subscription
    listeners.set(id, listener)
    return {
      ok: true,
      data: {
        unsubscribe: () => {
          listeners.delete(id)
          void ipcRenderer.invoke(IPC_CHANNELS.unsubscribe, id)
        },
      },
    }
  },
  info: (): Promise<{ version: string; platform: string; apiUrl: string }> => ipcRenderer.invoke(IPC_CHANNELS.info),
  /** The system's folder dialog (for a session's host folder); resolves with the chosen path or null. */
  pickFolder: (): Promise<IpcResult<string | null>> => ipcRenderer.invoke(IPC_CHANNELS.pickFolder),
  /** One file to the files API (the main process builds the multipart body). */
  uploadFile: (file: { name: string; type?: string; bytes: ArrayBuffer }): Promise<IpcResult> => ipcRenderer.invoke(IPC_CHANNELS.uploadFile, file),
}

export type CorralBridge = typeof bridge

contextBridge.exposeInMainWorld('corral', bridge)
