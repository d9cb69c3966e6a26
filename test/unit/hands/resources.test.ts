import { describe, expect, it } from 'vitest'
import { placeResources } from '../../../src/main/hands/runner/resources'

describe('placing session resources', () => {
  it('never reads a host path named by a file resource\'s source_path', async () => {
    const placed: { path: string; contentBase64?: string }[] = []
    const runner = { exists: async () => false, place: async (p: { path: string; contentBase64?: string }) => (placed.push(p), { existed: false }) }
    await expect(placeResources(runner, { resources: [{ type: 'file', file_id: 'file_1', source_path: '/proc/self/environ' }] })).rejects.toThrow(/source_path is not accepted/)
    expect(placed).toEqual([])
  })
})
