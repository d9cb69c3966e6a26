/** One row of a memory store's tree: a folder (a path prefix) or a memory, at its depth. */
export type MemoryTreeRow = { kind: 'folder'; path: string; name: string; depth: number } | { kind: 'memory'; id: string; path: string; name: string; depth: number }

/**
 * The rows of a store's tree from its memories' paths (`/projects/foo/notes.md`): each folder
 * once, before what it holds, folders and memories in path order. Pure.
 */
export function memoryTree(memories: readonly { id: string; path: string }[]): MemoryTreeRow[] {
  const rows: MemoryTreeRow[] = []
  const folders = new Set<string>()
  for (const m of [...memories].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))) {
    const parts = m.path.split('/').filter(Boolean)
    for (let i = 0; i < parts.length - 1; i++) {
      const prefix = '/' + parts.slice(0, i + 1).join('/') + '/'
      if (folders.has(prefix)) continue
      folders.add(prefix)
      rows.push({ kind: 'folder', path: prefix, name: parts[i], depth: i })
    }
    rows.push({ kind: 'memory', id: m.id, path: m.path, name: parts[parts.length - 1] ?? m.path, depth: Math.max(0, parts.length - 1) })
  }
  return rows
}

/** Who wrote a version, in words, and the session it links to (a `session_actor`). */
export function actorLabel(actor: { type: string; session_id?: string; api_key_id?: string; user_id?: string; service_account_id?: string } | null | undefined): { text: string; sessionId?: string } {
  if (!actor) return { text: 'unknown' }
  if (actor.type === 'session_actor' && actor.session_id) return { text: `session ${actor.session_id}`, sessionId: actor.session_id }
  if (actor.type === 'api_actor') return { text: actor.api_key_id === 'apikey_corral_local' ? 'you (Corral API token)' : `API key ${actor.api_key_id ?? ''}`.trim() }
  if (actor.type === 'user_actor') return { text: `user ${actor.user_id ?? ''}`.trim() }
  if (actor.type === 'service_account_actor') return { text: `service account ${actor.service_account_id ?? ''}`.trim() }
  return { text: actor.type }
}
