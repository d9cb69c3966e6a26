import { createContext, useContext, type ReactNode } from 'react'
import type { CorralClient } from './client'

const ClientContext = createContext<CorralClient | null>(null)

export function ClientProvider({ client, children }: { client: CorralClient; children: ReactNode }) {
  return <ClientContext.Provider value={client}>{children}</ClientContext.Provider>
}

export function useClient(): CorralClient {
  const c = useContext(ClientContext)
  if (!c) throw new Error('useClient outside ClientProvider')
  return c
}
