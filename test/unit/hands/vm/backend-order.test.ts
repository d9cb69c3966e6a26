import { describe, expect, it } from 'vitest'
import { defaultSandboxProviders } from '../../../../src/main/engine-hands'
import { sandboxSettings } from '../../../../src/main/hands/settings'

const order = (sandboxBackend?: 'docker' | 'vm' | 'bubblewrap' | 'auto') => defaultSandboxProviders({ dataDir: '/nonexistent/corral', settings: { sandboxBackend } }).map((p) => p.backend)

describe('which backend a session gets', () => {
  it('prefers Docker, then a VM, then bubblewrap when the settings say auto or nothing', () => {
    expect(order()).toEqual(['docker', 'vm', 'bubblewrap'])
    expect(order('auto')).toEqual(['docker', 'vm', 'bubblewrap'])
  })

  it('puts the backend the settings name first and keeps the others as fallbacks in order', () => {
    expect(order('vm')).toEqual(['vm', 'docker', 'bubblewrap'])
    expect(order('bubblewrap')).toEqual(['bubblewrap', 'docker', 'vm'])
    expect(order('docker')).toEqual(['docker', 'vm', 'bubblewrap'])
  })

  it('accepts vm as an environment\'s config.corral.backend and names the field for an unknown one', () => {
    expect(sandboxSettings({ corral: { backend: 'vm' } }).backend).toBe('vm')
    expect(() => sandboxSettings({ corral: { backend: 'firecracker' } })).toThrow(/^config\.corral\.backend: .*"docker"\|"vm"\|"bubblewrap"\|"auto"/)
  })
})
