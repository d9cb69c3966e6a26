/** How the session header names a resource, and its icon (one chip per entry of session.resources). */
export function resourceChip(r: Record<string, unknown>): { label: string; icon: 'branch' | 'file' | 'folder' | 'history' } {
  if (r.type === 'github_repository') return { label: String(r.url ?? '').replace(/^https?:\/\/(www\.)?github\.com\//, ''), icon: 'branch' }
  if (r.type === 'file') return { label: String(r.mount_path ?? r.file_id ?? 'file'), icon: 'file' }
  if (r.type === 'host_folder') return { label: `${String(r.host_path ?? 'folder')} → ${String(r.mount_path ?? '/workspace')}${r.read_only ? ' (read-only)' : ''}`, icon: 'folder' }
  return { label: String(r.memory_store_id ?? 'memory store'), icon: 'history' }
}
