import type { SchedulerClock } from '../../src/main/orchestrator/deployment-scheduler'

/**
 * A clock that moves only when a test moves it, with the timers of SchedulerClock: `advanceTo`
 * walks time forward running each timer at its instant (the computer awake), `sleepUntil` jumps
 * over them and then runs the overdue ones late (the computer asleep, as a suspended process sees
 * it). `settle` is awaited after each timer (the scheduler's tick is asynchronous).
 */
export class ManualClock implements SchedulerClock {
  private t: number
  private seq = 0
  private readonly timers = new Map<number, { at: number; fn: () => void }>()

  constructor(start: Date | string | number) {
    this.t = new Date(start).getTime()
  }

  now(): number {
    return this.t
  }

  /** The stores' clock (`() => Date`). */
  readonly date = (): Date => new Date(this.t)

  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.seq
    this.timers.set(id, { at: this.t + Math.max(0, ms), fn })
    return id
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number)
  }

  /** Moves time to `to`, running every timer due on the way at its own instant. */
  async advanceTo(to: Date | string | number, settle: () => Promise<void>): Promise<void> {
    const target = new Date(to).getTime()
    await settle()
    for (;;) {
      const next = this.earliest()
      if (!next || next[1].at > target) break
      this.timers.delete(next[0])
      this.t = Math.max(this.t, next[1].at)
      next[1].fn()
      await settle()
    }
    this.t = Math.max(this.t, target)
  }

  /** Jumps to `to` without running anything on the way, then runs the overdue timers (late). */
  async sleepUntil(to: Date | string | number, settle: () => Promise<void>): Promise<void> {
    this.t = new Date(to).getTime()
    await this.advanceTo(this.t, settle)
  }

  private earliest(): [number, { at: number; fn: () => void }] | undefined {
    let best: [number, { at: number; fn: () => void }] | undefined
    for (const e of this.timers) if (!best || e[1].at < best[1].at) best = e
    return best
  }
}
