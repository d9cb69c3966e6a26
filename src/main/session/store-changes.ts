/** One committed change to a resource row: which kind of resource and its id. */
export interface StoreChange {
  kind: 'environment' | 'vault' | 'credential' | 'session' | 'deployment'
  id: string
}

export type StoreChangeListener<C = StoreChange> = (change: C) => void

/**
 * A store's change signal: the store calls `notify` after a write has committed and before the
 * call that made it returns, so a listener (the vault re-deriving running sessions' egress
 * policies) has seen the change by the time the API answers. Listeners run synchronously, in
 * subscription order; they must not throw (a throw is reported through `onListenerError` and the
 * other listeners still run: the write is committed either way).
 */
export class StoreChanges<C = StoreChange> {
  private readonly listeners = new Set<StoreChangeListener<C>>()

  constructor(private readonly onListenerError: (err: unknown) => void = (err) => console.error('[corral] a store change listener failed:', err)) {}

  /** Adds a listener; the returned function removes it. */
  subscribe(listener: StoreChangeListener<C>): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  notify(change: C): void {
    for (const l of [...this.listeners]) {
      try {
        l(change)
      } catch (err) {
        this.onListenerError(err)
      }
    }
  }
}
