import { describe, expect, it } from 'vitest'
import { buildGraph, checkTree, findCircles, importsOf, KNOWN_CIRCLES, resolveSpecifier, type RoomsTable } from '../../../scripts/import-graph.mjs'
import { refusal } from '../../../eslint-rules/rooms.mjs'

// scripts/import-graph.mjs (the second half of `npm run lint`) on trees held in memory: it must
// find every circle, type-only ones included, and every import against the rooms table.
const TABLE: RoomsTable = {
  order: 'high → low',
  rooms: [
    { room: 'high', holds: ['src/main/high/**'], may: ['low'] },
    { room: 'low', holds: ['src/main/low/**'], may: [] },
  ],
  allow: [],
}
const check = (sources: Record<string, string>, extra: Partial<Parameters<typeof checkTree>[0]> = {}) => checkTree({ sources, table: TABLE, refusal, knownCircles: [], ...extra }).problems

describe('the import graph check', () => {
  it('reads static, type-only, re-exported and dynamic imports and import types', () => {
    const text = ["import a from './a'", "import type { B } from './b'", "export { c } from './c'", "export * from './d'", "const e = () => import('./e')", "type F = import('./f').F"].join('\n')
    expect(importsOf(text).sort()).toEqual(['./a', './b', './c', './d', './e', './f'])
  })

  it('resolves a specifier to the file, its .tsx or its folder index, and a package to nothing', () => {
    const files = new Set(['src/x/a.ts', 'src/x/b.tsx', 'src/x/c/index.ts'])
    expect(resolveSpecifier('src/x/m.ts', './a', files)).toBe('src/x/a.ts')
    expect(resolveSpecifier('src/x/m.ts', './b', files)).toBe('src/x/b.tsx')
    expect(resolveSpecifier('src/x/m.ts', './c', files)).toBe('src/x/c/index.ts')
    expect(resolveSpecifier('src/x/m.ts', 'zod', files)).toBeNull()
  })

  it('finds a circle made only of type imports, with the loop to cut', () => {
    const graph = buildGraph({
      'src/main/low/a.ts': "import type { B } from './b'\nexport type A = B[]\n",
      'src/main/low/b.ts': "import type { C } from './c'\nexport type B = C\n",
      'src/main/low/c.ts': "import type { A } from './a'\nexport type C = A\n",
      'src/main/low/d.ts': "import type { A } from './a'\nexport type D = A\n",
    })
    expect(findCircles(graph)).toEqual([{ files: ['src/main/low/a.ts', 'src/main/low/b.ts', 'src/main/low/c.ts'], cycle: ['src/main/low/a.ts', 'src/main/low/b.ts', 'src/main/low/c.ts'] }])
  })

  it('reports a new circle and passes a tree without one', () => {
    const circular = { 'src/main/low/a.ts': "export { b } from './b'\n", 'src/main/low/b.ts': "import { a } from './a'\nexport const b = a\n" }
    expect(check(circular)).toEqual(['circle: src/main/low/a.ts → src/main/low/b.ts → src/main/low/a.ts'])
    expect(check({ 'src/main/low/a.ts': "export const a = 1\n", 'src/main/low/b.ts': "import { a } from './a'\nexport const b = a\n" })).toEqual([])
  })

  it('passes a known circle and reports a known circle that is gone, so the list only shrinks', () => {
    const known = [{ files: ['src/main/low/b.ts', 'src/main/low/a.ts'], removedBy: 'a test' }]
    const circular = { 'src/main/low/a.ts': "import { b } from './b'\nexport const a = b\n", 'src/main/low/b.ts': "import type { A } from './a'\nexport const b = 1 as unknown as A\n" }
    expect(check(circular, { knownCircles: known })).toEqual([])
    expect(check({ 'src/main/low/a.ts': "import { b } from './b'\nexport const a = b\n", 'src/main/low/b.ts': 'export const b = 1\n' }, { knownCircles: known })).toEqual([
      expect.stringMatching(/^KNOWN_CIRCLES lists a circle that is gone/),
    ])
  })

  it('reports an import from a lower room to a higher one, type-only or not', () => {
    for (const line of ["import { h } from '../high/h'\nexport const l = h\n", "import type { H } from '../high/h'\nexport type L = H\n"]) {
      expect(check({ 'src/main/high/h.ts': 'export const h = 1\nexport type H = number\n', 'src/main/low/l.ts': line })).toEqual([
        expect.stringMatching(/^room order: src\/main\/low\/l\.ts → src\/main\/high\/h\.ts: low\/ may import only nothing of src\/main; high\/h is high\//),
      ])
    }
    expect(check({ 'src/main/low/l.ts': 'export const l = 1\n', 'src/main/high/h.ts': "import { l } from '../low/l'\nexport const h = l\n" })).toEqual([])
  })

  it('reports an allow-list entry that no import needs any more', () => {
    const table = { ...TABLE, allow: [{ from: 'src/main/low/l.ts', to: 'src/main/high/h.ts', removedBy: 'a test' }] }
    const upward = { 'src/main/high/h.ts': 'export const h = 1\n', 'src/main/low/l.ts': "import { h } from '../high/h'\nexport const l = h\n" }
    expect(check(upward, { table })).toEqual([])
    expect(check({ ...upward, 'src/main/low/l.ts': 'export const l = 1\n' }, { table })).toEqual([expect.stringMatching(/allow-list .* no import needs any more .*src\/main\/low\/l\.ts → src\/main\/high\/h\.ts/)])
  })

  it('lets no known circle through any more (issue #10 opened the last three)', () => {
    expect(KNOWN_CIRCLES).toEqual([])
  })
})
