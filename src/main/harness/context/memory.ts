/** A session's `memory_store` resource as the session answers it (spec resources.md §6.4). */
export interface AttachedMemoryStore {
  type: 'memory_store'
  memory_store_id: string
  access?: 'read_write' | 'read_only' | null
  name?: string | null
  description?: string
  instructions?: string | null
  mount_path?: string | null
}

/**
 * What the model is told about the memory stores its session attached: for each, its name,
 * description, access, where it is mounted and the instructions given at attach time. Undefined
 * when the session has none. Pure: the caller passes the session's resources.
 */
export function memorySystemContext(resources: readonly unknown[] | undefined): string | undefined {
  const stores = (resources ?? []).filter((r): r is AttachedMemoryStore => (r as { type?: unknown } | null)?.type === 'memory_store')
  if (stores.length === 0) return undefined
  const entries = stores.map((s) => {
    const access = s.access === 'read_only' ? 'read_only' : 'read_write'
    const lines = [
      `<memory_store name=${JSON.stringify(s.name ?? s.memory_store_id)} access="${access}" path=${JSON.stringify(s.mount_path ?? '')}>`,
      s.description ? `Description: ${s.description}` : undefined,
      access === 'read_only' ? 'You can read these files but not change them.' : 'You can read, create, edit and delete files here; changes are saved to the store.',
      s.instructions ? `Instructions: ${s.instructions}` : undefined,
      '</memory_store>',
    ]
    return lines.filter((l) => l !== undefined).join('\n')
  })
  return [
    'Memory stores are attached to this session: folders of text files that persist across sessions. Check them for what earlier sessions learned before you start, and keep them up to date with what a later session should know.',
    ...entries,
  ].join('\n\n')
}
