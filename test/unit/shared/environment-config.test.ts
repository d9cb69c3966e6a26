import { describe, expect, it } from 'vitest'
import { environmentCreateSchema, describeZodError } from '../../../src/shared/api/schemas'
import { sandboxSettings } from '../../../src/main/hands/settings'

describe('environment config.corral (Corral additions)', () => {
  it('accepts every option the hands document, through the API schema', () => {
    const r = environmentCreateSchema.safeParse({
      name: 'e',
      config: {
        type: 'cloud',
        corral: { backend: 'docker', runtime: 'runsc', memory_mb: 512, cpus: 1, pids: 256, pool_size: 2, output_cap_bytes: 65536, bash_timeout_ms: 5000, extra_roots: ['/tmp'] },
      },
    })
    expect(r.success).toBe(true)
  })

  it('refuses a bad option with the field and the rule', () => {
    const r = environmentCreateSchema.safeParse({ name: 'e', config: { type: 'cloud', corral: { extra_roots: ['relative/path'] } } })
    expect(r.success).toBe(false)
    expect(describeZodError(r.error!)).toContain('config.corral.extra_roots[0]: an absolute path')
    const typo = environmentCreateSchema.safeParse({ name: 'e', config: { type: 'cloud', corral: { poolsize: 2 } } })
    expect(typo.success).toBe(false)
  })

  it('gives the hands the same options the API accepted', () => {
    const s = sandboxSettings({ type: 'cloud', corral: { pool_size: 0, bash_timeout_ms: 5000, extra_roots: ['/tmp'] } } as Record<string, unknown>)
    expect(s).toMatchObject({ poolSize: 0, bashTimeoutMs: 5000 })
    expect(s.extraRoots).toContain('/tmp')
  })
})
