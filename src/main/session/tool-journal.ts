import type { Statement } from 'better-sqlite3'
import type { Db } from './database'

/**
 * A durable record that a tool call was handed to the hands, written before the call runs, so
 * a restarted brain knows whether a call without a result may have run. Implementations:
 * SqliteToolJournal.
 */
export interface ToolJournal {
  /**
   * Resolves once the record is durable; the call may be handed to the hands only then.
   * `precheck` runs inside the record's transaction first: throwing writes nothing and rejects
   * (a brain's lease fence: orchestrator/lease-fence.ts).
   */
  markStarted(sessionId: string, toolUseId: string, options?: { precheck?: () => void }): Promise<void>
  wasStarted(toolUseId: string): boolean
}

/**
 * The harness's tool-call journal in SQLite (table harness_tool_calls). `markStarted` commits
 * and is on disk before the call is handed to the hands: inside the event log's next group commit
 * when the log is given (one fsync shared with the threads appending at the same time, run off the
 * event loop: log/wal-sync.ts), else in a transaction of its own (synchronous=FULL). A synchronous fsync per call here was ~3 ms of blocked event loop per tool call, which 25
 * threads stepping together paid one after the other.
 */
export class SqliteToolJournal implements ToolJournal {
  private readonly insert: Statement
  private readonly select: Statement

  constructor(
    private readonly db: Db,
    private readonly log?: { commitWith(write: () => void): Promise<void> },
  ) {
    this.insert = db.prepare('INSERT OR IGNORE INTO harness_tool_calls (tool_use_id, session_id, started_at) VALUES (?, ?, ?)')
    this.select = db.prepare('SELECT 1 FROM harness_tool_calls WHERE tool_use_id = ?')
  }

  async markStarted(sessionId: string, toolUseId: string, options?: { precheck?: () => void }): Promise<void> {
    const precheck = options?.precheck
    const write = () => {
      precheck?.()
      this.insert.run(toolUseId, sessionId, new Date().toISOString())
    }
    if (this.log) await this.log.commitWith(write)
    else this.db.transaction(write)()
  }

  wasStarted(toolUseId: string): boolean {
    return this.select.get(toolUseId) !== undefined
  }
}
