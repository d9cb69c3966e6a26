import { describe, expect, it } from 'vitest'
import type { Environment } from '../../../src/renderer/src/api/types'
import { draftOf, hasPackages, paramsOf } from '../../../src/renderer/src/features/environments/draft'

const env = (config: Record<string, unknown>): Environment => ({ id: 'env_1', name: 'e', description: '', config, created_at: '', updated_at: '', archived_at: null, metadata: {}, type: 'environment' }) as unknown as Environment

describe('environment editor: draft ↔ API body', () => {
  const saved = env({
    type: 'cloud',
    networking: { type: 'limited', allowed_hosts: ['api.example.com'], allow_package_managers: true, allow_mcp_servers: false },
    packages: { type: 'packages', apt: ['jq'], npm: [], pip: ['requests'], gem: ['rake'], cargo: [], go: [] },
    corral: { backend: 'docker', image: 'my:img', pool_size: 2, package_sources: { pip: 'https://pypi.corp.example/simple/' } },
  })

  it('keeps what the form does not show when saving (other package managers, mirrors, pool size)', () => {
    const d = draftOf(saved)
    const body = paramsOf({ ...d, npm: 'left-pad', memoryMb: '1024' }, saved) as { config: Record<string, Record<string, unknown>> }
    expect(body.config.packages).toMatchObject({ apt: ['jq'], npm: ['left-pad'], pip: ['requests'], gem: ['rake'] })
    expect(body.config.corral).toEqual({ backend: 'docker', image: 'my:img', pool_size: 2, memory_mb: 1024, package_sources: { pip: 'https://pypi.corp.example/simple/' } })
    expect(body.config.networking).toEqual({ type: 'limited', allowed_hosts: ['api.example.com'], allow_package_managers: true, allow_mcp_servers: false })
  })

  it('removes a field the user cleared', () => {
    const body = paramsOf({ ...draftOf(saved), image: '  ' }, saved) as { config: { corral: Record<string, unknown> } }
    expect(body.config.corral).not.toHaveProperty('image')
  })

  it('knows whether a saved environment lists packages', () => {
    expect(hasPackages(saved)).toBe(true)
    expect(hasPackages(env({ type: 'cloud', packages: { type: 'packages', apt: [], npm: [] } }))).toBe(false)
    expect(hasPackages(env({ type: 'self_hosted' }))).toBe(false)
  })
})
