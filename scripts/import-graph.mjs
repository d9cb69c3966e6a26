#!/usr/bin/env node
// The import graph of src/, checked whole (run by `npm run lint` after ESLint):
//   - no circle: a file never reaches itself through its imports (type-only imports count: a circle
//     of types is still two files that cannot be read, moved or tested apart);
//   - no import from a lower room of src/main to a higher one, by the rooms table of
//     eslint.config.mjs (the same table and the same check as the `corral/rooms` lint rule, which
//     reports each import where it stands; this walk adds the circles, which no single file shows).
// A circle let through for now sits in KNOWN_CIRCLES below with who opens it, as the table's known
// violations sit in its `allow` list; both are empty since issue #10, and both fail when an entry
// goes stale. `node scripts/import-graph.mjs --print` lists every edge too.
//
// Imports are read with TypeScript's own pre-processor (ts.preProcessFile: a scan, ~4x faster than
// a parse); src/ has no path aliases, so a relative specifier resolves to <path>.ts, <path>.tsx or
// <path>/index.ts[x].
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import ts from 'typescript'

/**
 * Circles allowed for now, each as its files in any rotation, with who removes it. Must end empty;
 * a listed circle that no longer exists is reported too, so the list cannot go stale.
 */
export const KNOWN_CIRCLES = []

const SOURCE = /\.(ts|tsx|mts)$/

/**
 * Module specifiers a TypeScript source imports or re-exports (static, `import type`, `export … from`,
 * `import()` calls and `import('…')` types), by TypeScript's own pre-processor (a scan, no parse).
 */
export function importsOf(text) {
  return ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName)
}

/**
 * The file a relative specifier names, as a repository path with '/' separators, among `files`
 * (a Set of such paths); null for a package or a specifier that names no source file.
 */
export function resolveSpecifier(fromFile, specifier, files) {
  if (!specifier.startsWith('.')) return null
  const base = join(dirname(fromFile), specifier).split(sep).join('/')
  const stem = base.replace(/\.(m?js|jsx)$/, '')
  for (const c of [base, `${stem}.ts`, `${stem}.tsx`, `${stem}.mts`, `${stem}/index.ts`, `${stem}/index.tsx`]) if (files.has(c)) return c
  return null
}

/** The graph of `sources` (repository path → text): path → [{ to }], one edge per imported file. */
export function buildGraph(sources) {
  const files = new Set(Object.keys(sources))
  const graph = new Map()
  for (const [file, text] of Object.entries(sources)) {
    const edges = []
    for (const specifier of importsOf(text)) {
      const to = resolveSpecifier(file, specifier, files)
      if (to && to !== file && !edges.some((e) => e.to === to)) edges.push({ to })
    }
    graph.set(file, edges)
  }
  return graph
}

/**
 * Every circle of the graph, once each: one per strongly connected component of more than one
 * file (Tarjan's algorithm, iterative), as `{ files, cycle }`: the component's files sorted, and a
 * shortest loop through its first file (so a report names a real loop to cut, not only the tangle).
 */
export function findCircles(graph) {
  let index = 0
  const idx = new Map(), low = new Map(), onStack = new Set(), stack = [], components = []
  const enter = (v) => { idx.set(v, index); low.set(v, index); index++; stack.push(v); onStack.add(v) }
  for (const start of [...graph.keys()].sort()) {
    if (idx.has(start)) continue
    const work = [[start, 0]]
    enter(start)
    while (work.length) {
      const frame = work[work.length - 1]
      const [v, i] = frame
      const edges = graph.get(v) ?? []
      if (i < edges.length) {
        frame[1]++
        const w = edges[i].to
        if (!graph.has(w)) continue
        if (!idx.has(w)) { enter(w); work.push([w, 0]) }
        else if (onStack.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)))
      } else {
        work.pop()
        if (work.length) { const u = work[work.length - 1][0]; low.set(u, Math.min(low.get(u), low.get(v))) }
        if (low.get(v) === idx.get(v)) {
          const comp = []
          let w
          do { w = stack.pop(); onStack.delete(w); comp.push(w) } while (w !== v)
          if (comp.length > 1) components.push(comp.sort())
        }
      }
    }
  }
  return components.sort().map((files) => ({ files, cycle: shortestCycle(graph, new Set(files), files[0]) }))
}

function shortestCycle(graph, members, from) {
  const prev = new Map([[from, null]])
  const queue = [from]
  while (queue.length) {
    const v = queue.shift()
    for (const { to } of graph.get(v) ?? []) {
      if (!members.has(to)) continue
      if (to === from) {
        const path = []
        for (let x = v; x !== null; x = prev.get(x)) path.unshift(x)
        return path
      }
      if (!prev.has(to)) { prev.set(to, v); queue.push(to) }
    }
  }
  return [from]
}

const sameFiles = (a, b) => [...a].sort().join('\n') === [...b].sort().join('\n')

/**
 * The whole check on a tree of `sources` (repository path → text) against a rooms `table` and
 * its `refusal` (eslint-rules/rooms.mjs): circles not in `knownCircles`, known circles that are
 * gone, imports against the table, and allow-list entries of the table that no longer match an
 * import it would refuse. Returns the graph, the circles and the problems as sentences (empty: clean).
 */
export function checkTree({ sources, table, refusal, knownCircles = KNOWN_CIRCLES }) {
  const graph = buildGraph(sources)
  const problems = []
  const circles = findCircles(graph)
  for (const c of circles) {
    if (!knownCircles.some((k) => sameFiles(k.files, c.files))) problems.push(`circle: ${[...c.cycle, c.cycle[0]].join(' → ')}${c.files.length > c.cycle.length ? ` (one loop of ${c.files.join(', ')})` : ''}`)
  }
  for (const k of knownCircles) {
    if (!circles.some((c) => sameFiles(k.files, c.files))) problems.push(`KNOWN_CIRCLES lists a circle that is gone or changed (update the entry): ${k.files.join(', ')}`)
  }
  const stem = (p) => p.replace(/\.(ts|tsx|mts)$/, '')
  const withoutAllow = { ...table, allow: [] }
  for (const [from, edges] of graph) {
    for (const { to } of edges) {
      const why = refusal(table, from, to)
      if (why) problems.push(`room order: ${from} → ${to}: ${why}`)
    }
  }
  for (const e of table.allow ?? []) {
    const used = (graph.get(e.from.replace(/\.tsx?$/, '') + '.ts') ?? graph.get(e.from) ?? []).some((x) => stem(x.to) === stem(e.to) && refusal(withoutAllow, e.from, x.to))
    if (!used) problems.push(`the rooms allow-list (eslint.config.mjs) has an entry no import needs any more (remove it): ${e.from} → ${e.to}`)
  }
  return { graph, circles, problems }
}

function sourcesUnder(root, dir) {
  const out = {}
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name)
      if (statSync(p).isDirectory()) walk(p)
      else if (SOURCE.test(name) && !name.endsWith('.d.ts')) out[relative(root, p).split(sep).join('/')] = readFileSync(p, 'utf8')
    }
  }
  walk(join(root, dir))
  return out
}

const isMain = process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)
if (isMain) {
  const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
  const [{ rooms }, { refusal }] = await Promise.all([import(pathToFileURL(join(root, 'eslint.config.mjs')).href), import(pathToFileURL(join(root, 'eslint-rules/rooms.mjs')).href)])
  const { graph, problems } = checkTree({ sources: sourcesUnder(root, 'src'), table: rooms, refusal })
  if (process.argv.includes('--print')) {
    for (const [from, edges] of [...graph].sort()) for (const e of edges) console.log(`${from} → ${e.to}`)
  }
  for (const k of KNOWN_CIRCLES) console.log(`import-graph: known circle, to be opened by ${k.removedBy}: ${k.files.join(', ')}`)
  for (const e of rooms.allow) console.log(`import-graph: allowed for now, to be removed by ${e.removedBy}: ${e.from} → ${e.to}`)
  if (problems.length) {
    for (const p of problems) console.error(`import-graph: ${p}`)
    process.exit(1)
  }
  const edges = [...graph.values()].reduce((n, e) => n + e.length, 0)
  console.log(`import-graph: ${graph.size} files, ${edges} imports: ${KNOWN_CIRCLES.length ? `no circle but the ${KNOWN_CIRCLES.length} known` : "no circle"}, none against the room order`)
}
