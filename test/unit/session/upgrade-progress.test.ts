import { describe, expect, it } from 'vitest'
import { describeUpgradeProgress, upgradeProgressLines, type UpgradeProgress } from '../../../src/main/session/database'

const at = (stage: string, done: number, elapsedMs: number): UpgradeProgress => ({ version: 14, name: 'event log: a rowid table', stage, done, total: 100_000, unit: 'events', elapsedMs })

describe('upgrade progress for a person', () => {
  it('says what is being done, how far, and the share done', () => {
    expect(describeUpgradeProgress(at('copying the event log', 25_000, 10))).toBe(
      "Upgrading Corral's data (migration 14: event log: a rowid table): copying the event log, 25,000 of 100,000 events (25%)",
    )
    expect(describeUpgradeProgress({ ...at('copying the event log', 0, 0), total: 0 })).toBe("Upgrading Corral's data (migration 14: event log: a rowid table): copying the event log, 0 of 0 events")
  })

  it('writes a line when a stage begins, then one per interval at most, and the stage’s last', () => {
    const lines: string[] = []
    const write = upgradeProgressLines((l) => lines.push(l.replace(/^.*: /, '')), 1000)
    write(at('copying the event log', 0, 0))
    write(at('copying the event log', 25_000, 300))
    write(at('copying the event log', 50_000, 1100))
    write(at('copying the event log', 75_000, 1500))
    write(at('copying the event log', 100_000, 1700))
    write(at('indexing the event log', 100_000, 1710))
    expect(lines).toEqual([
      'copying the event log, 0 of 100,000 events (0%)',
      'copying the event log, 50,000 of 100,000 events (50%)',
      'copying the event log, 100,000 of 100,000 events (100%)',
      'indexing the event log, 100,000 of 100,000 events (100%)',
    ])
  })
})
