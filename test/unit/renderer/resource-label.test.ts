import { describe, expect, it } from 'vitest'
import { resourceChip } from '../../../src/renderer/src/features/thread/resource-label'

describe('the session header names each resource', () => {
  it('shows a host folder as its host path and mount path with a folder icon, not as a memory store', () => {
    const chip = resourceChip({ type: 'host_folder', host_path: '/home/me/project', mount_path: '/workspace/proj', read_only: false })
    expect(chip).toEqual({ label: '/home/me/project → /workspace/proj', icon: 'folder' })
  })

  it('says when a host folder is mounted read-only', () => {
    expect(resourceChip({ type: 'host_folder', host_path: '/srv/data', mount_path: '/workspace', read_only: true }).label).toBe('/srv/data → /workspace (read-only)')
  })

  it('keeps repositories, files and memory stores as they were', () => {
    expect(resourceChip({ type: 'github_repository', url: 'https://github.com/acme/app' })).toEqual({ label: 'acme/app', icon: 'branch' })
    expect(resourceChip({ type: 'file', file_id: 'file_1', mount_path: '/workspace/a.txt' })).toEqual({ label: '/workspace/a.txt', icon: 'file' })
    expect(resourceChip({ type: 'memory_store', memory_store_id: 'memstore_1' })).toEqual({ label: 'memstore_1', icon: 'history' })
  })
})
