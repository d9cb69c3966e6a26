import type { Db } from '../session/database'
import type { ToolJournal } from '../harness/harness'

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
