import { z } from 'zod'

/*
 * Corral additions (not in the Managed Agents API): what the agent changed in a session's
 * read-write host folders, reverting it, and browsing the folders. Routes under
 * /v1/corral/sessions/{id}/… (src/main/api/routes/workspace.ts).
 */

export interface FolderFileState {
  /** sha256 of the bytes in Corral's change store; null when Corral never saw them. */
  hash: string | null
  mode: number
  size: number
  link?: string
}

export interface FolderChange {
  seq: number
  tool_use_id: string | null
  /** 1 for the changes after the session's first user message, 2 after the second, …; null: outside a tool call. */
  turn: number | null
  path: string
  kind: 'created' | 'modified' | 'deleted'
  before: FolderFileState | null
  after: FolderFileState | null
  /** A unified diff for text files (null for binary, too large, or unknown content). */
  diff: string | null
  /** Whether this change can be put back; when not, why. */
  revertable: boolean
  reason: string | null
  /** Undone by a later revert. */
  reverted: boolean
  /** Set on a revert's own records: the seqs it undid. */
  reverts?: number[]
}

export interface FolderChanges {
  resource_index: number
  host_path: string
  mount_path: string
  /** Bytes Corral's change store holds for this folder (only changed content, content-addressed). */
  store_bytes: number
  changes: FolderChange[]
}

export interface SessionChangesResponse {
  folders: FolderChanges[]
}

export const changesRevertSchema = z.strictObject({
  /** Which folder (the index of its resource); default: the session's first read-write folder. */
  resource_index: z.number().int().min(0).max(31).optional(),
  scope: z.enum(['file', 'turn', 'all']),
  /** scope file: the path inside the folder. */
  path: z.string().min(1).max(4096).optional(),
  /** scope turn: the turn number. */
  turn: z.number().int().min(1).optional(),
})
export type ChangesRevertParams = z.infer<typeof changesRevertSchema>

export interface ChangesRevertResponse {
  reverted: FolderChange[]
}

export interface WorkspaceEntry {
  name: string
  /** The path as the sandbox sees it. */
  path: string
  kind: 'file' | 'directory' | 'symlink' | 'other'
  size: number
  modified_at: string
}

export interface WorkspaceListing {
  path: string
  /** The roots the browser may show: the session's mounted folders. */
  roots: { path: string; host_path: string; read_only: boolean }[]
  entries: WorkspaceEntry[]
}

export const workspacePathQuerySchema = z.strictObject({ path: z.string().min(1).max(4096).optional() })
