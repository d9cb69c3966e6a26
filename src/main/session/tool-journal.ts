import type { Db } from './database'

/**
 * A durable record that a tool call was handed to the hands, written before the call runs, so
 * a restarted brain knows whether a call without a result may have run. Implementations:
 * SqliteToolJournal.
 */
export interface ToolJournal {
  markStarted(sessionId: string, toolUseId: string): void
  wasStarted(toolUseId: string): boolean
}

/**
 * The harness's tool-call journal in SQLite (table harness_tool_calls). `markStarted` commits
 * (with the database's synchronous=FULL) before the call is handed to the hands.
 */
export class SqliteToolJournal implements ToolJournal {
  constructor(private readonly db: Db) {}

  markStarted(sessionId: string, toolUseId: string): void {
    this.db.prepare('INSERT OR IGNORE INTO harness_tool_calls (tool_use_id, session_id, started_at) VALUES (?, ?, ?)').run(toolUseId, sessionId, new Date().toISOString())
  }

  wasStarted(toolUseId: string): boolean {
    return this.db.prepare('SELECT 1 FROM harness_tool_calls WHERE tool_use_id = ?').get(toolUseId) !== undefined
  }
}
