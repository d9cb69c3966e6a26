import type { CorralClient } from './client'
import { HttpClient } from './http-client'
import { IpcClient } from './ipc-client'

export { ApiError } from './client'
export type { CorralClient, StreamOptions, StreamMessage } from './client'

/** The desktop app's bridge when the preload put one there; the HTTP API of this origin otherwise. */
export function createClient(): CorralClient {
  return window.corral ? new IpcClient(window.corral) : new HttpClient()
}
