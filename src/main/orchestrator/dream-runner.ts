import type { DreamChange, DreamStore } from '../session/dream-store'

export interface DreamRunnerParams {
  dreams: Pick<DreamStore, 'changes' | 'start' | 'finish' | 'unsettled' | 'sessionOf' | 'endedSessionOf'>
  /**
   * Stops a dream's session for good: interrupted if it runs, archived, and resolved once its
   * hands are released (their last memory sync has reached the store).
   */
  stopSession: (sessionId: string) => Promise<void>
  onError?: (err: unknown) => void
}

/**
 * Runs dreams (docs/dreams.md): starts each new one (DreamStore.start makes its output store,
 * transcripts and session; the brains run the session like any other), and once a dream's session
 * has ended (recorded by the store in the transaction of its final status event) stops that
 * session and gives the dream its final status; a canceled dream's session is stopped. The work
 * of one dream is done one step after another; at `start()` it picks up what a stopped process
 * left: pending dreams, ended sessions not yet settled, canceled dreams' sessions still open.
 */
export class DreamRunner {
  private readonly queues = new Map<string, Promise<void>>()
  private unsubscribe?: () => void
  private disposed = false

  constructor(private readonly p: DreamRunnerParams) {}

  start(): void {
    this.unsubscribe = this.p.dreams.changes.subscribe((change) => this.heard(change))
    const left = this.p.dreams.unsettled()
    for (const id of left.pending) this.heard({ kind: 'created', id })
    for (const id of left.finishing) this.heard({ kind: 'finishing', id })
    for (const sessionId of left.canceledSessions) this.enqueue(sessionId, () => this.p.stopSession(sessionId))
  }

  /** Resolves once every step begun so far has finished (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.queues.size) await Promise.all([...this.queues.values()])
  }

  dispose(): void {
    this.disposed = true
    this.unsubscribe?.()
  }

  private heard(change: DreamChange): void {
    const { id } = change
    if (change.kind === 'created') this.enqueue(id, async () => void (await this.p.dreams.start(id)))
    else if (change.kind === 'finishing') {
      this.enqueue(id, async () => {
        // only an ending that committed (a rolled-back append may have told of one)
        const sessionId = this.p.dreams.endedSessionOf(id)
        if (!sessionId) return
        await this.p.stopSession(sessionId)
        this.p.dreams.finish(id)
      })
    } else {
      this.enqueue(id, async () => {
        const sessionId = this.p.dreams.sessionOf(id)
        if (sessionId) await this.p.stopSession(sessionId)
      })
    }
  }

  private enqueue(key: string, step: () => Promise<void>): void {
    if (this.disposed) return
    const prev = this.queues.get(key) ?? Promise.resolve()
    const next = prev
      .then(() => (this.disposed ? undefined : step()))
      .catch((err) => (this.p.onError ?? console.error)(err))
      .finally(() => {
        if (this.queues.get(key) === next) this.queues.delete(key)
      })
    this.queues.set(key, next)
  }
}
