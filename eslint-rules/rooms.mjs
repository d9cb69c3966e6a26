// `corral/rooms`: the rooms of src/main may import only the rooms below them (CONVENTIONS.md's
// order), as the rooms table in eslint.config.mjs says. VS Code's `code-import-patterns` is the
// model: each relative import is resolved to the file it names, that file's room is looked up in
// the table, and an import the table does not allow is reported with the rule and the allowed
// targets. scripts/import-graph.mjs runs the same `refusal` over the whole graph (and looks for
// circles, which no single file shows).
//
// A table (see eslint.config.mjs):
//   rooms:     [{ room, holds: ['src/main/cli/**', 'src/main/engine.ts'], may: ['session', 'src/main/hands/tool-router.ts'] }]
//              `may` names rooms or single files; a file may always import its own room.
//   private:   [{ file: 'src/main/session/database.ts', why }]  importable only from its own room
//   allow:     [{ from, to, removedBy }]  today's known violations, named, to be removed
import { existsSync, statSync } from 'node:fs'
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'

const EXT = /\.(ts|tsx|mts|js|mjs|jsx)$/

/** A repository path without its extension: 'src/main/hands/index.ts' → 'src/main/hands/index'. */
export const stemOf = (path) => path.split(sep).join('/').replace(EXT, '')

/** The room holding a repository path (or stem), by the longest matching `holds` entry; null outside every room. */
export function roomOf(table, path) {
  const stem = stemOf(path)
  let best = null, bestLength = -1
  for (const r of table.rooms) {
    for (const h of r.holds) {
      const folder = h.endsWith('/**') ? h.slice(0, -2) : null
      const hit = folder ? stem.startsWith(folder) : stem === stemOf(h)
      const length = folder ? folder.length : h.length
      if (hit && length > bestLength) { best = r; bestLength = length }
    }
  }
  return best
}

/** How a message names a room (by what it holds: `hands/`, `config.ts`, `src/shared/`) or a single file. */
function label(table, entry) {
  const room = table.rooms.find((r) => r.room === entry)
  const short = (p) => p.replace(/^src\/main\//, '').replace(/\*\*$/, '')
  return room ? room.holds.map(short).join(', ') : short(stemOf(entry))
}

/**
 * Why `from` may not import `to` (repository paths or stems), or null when it may. Type-only
 * imports are judged the same (a type names the room it comes from as surely as a value).
 * `allow` entries of the table let one named import through.
 */
export function refusal(table, from, to) {
  const a = roomOf(table, from), b = roomOf(table, to)
  if (!a || !b) return null
  const fromStem = stemOf(from), toStem = stemOf(to)
  if ((table.allow ?? []).some((e) => stemOf(e.from) === fromStem && stemOf(e.to) === toStem)) return null
  if (a === b) return null
  const priv = (table.private ?? []).find((p) => stemOf(p.file) === toStem)
  if (priv) return `${label(table, to)} is private to ${label(table, b.room)}: ${priv.why}`
  const allowed = a.may.some((m) => (m.includes('/') ? stemOf(m) === toStem : m === b.room))
  if (allowed) return null
  const targets = a.may.map((m) => label(table, m)).join(', ') || 'nothing of src/main'
  return `${label(table, a.room)} may import only ${targets}; ${label(table, toStem)} is ${label(table, b.room)} (order: ${table.order})`
}

/** The repository stem a relative specifier of `filename` names, or null for a package. */
function resolveImport(cwd, filename, specifier) {
  if (!specifier.startsWith('.')) return null
  const abs = resolve(dirname(filename), specifier)
  const stem = abs.replace(/\.(m?js|jsx)$/, '')
  let target = stem
  if (['.ts', '.tsx', '.mts'].some((e) => existsSync(stem + e))) target = stem
  else if (existsSync(abs) && statSync(abs).isDirectory()) target = join(abs, 'index')
  return relative(cwd, target).split(sep).join('/')
}

export const rooms = {
  meta: {
    type: 'problem',
    docs: { description: 'src/main imports only downward, as the rooms table of eslint.config.mjs says' },
    schema: [{ type: 'object', additionalProperties: true }],
    messages: {
      refused: 'corral/rooms: {{why}}',
      homeless: 'corral/rooms: {{file}} stands in no room of the rooms table (eslint.config.mjs): add it to the room it belongs to, so its imports are checked',
    },
  },
  create(context) {
    const table = context.options[0]
    const cwd = context.cwd
    const filename = isAbsolute(context.filename) ? context.filename : join(cwd, context.filename)
    const from = relative(cwd, filename).split(sep).join('/')
    if (!roomOf(table, from)) {
      if (!from.startsWith('src/main/')) return {}
      return { Program: (node) => context.report({ node, messageId: 'homeless', data: { file: from } }) }
    }
    const check = (node, source) => {
      if (!source || typeof source.value !== 'string') return
      const to = resolveImport(cwd, filename, source.value)
      const why = to && refusal(table, from, to)
      if (why) context.report({ node, messageId: 'refused', data: { why } })
    }
    return {
      ImportDeclaration: (n) => check(n, n.source),
      ExportNamedDeclaration: (n) => check(n, n.source),
      ExportAllDeclaration: (n) => check(n, n.source),
      ImportExpression: (n) => check(n, n.source),
      TSImportType: (n) => check(n, n.argument?.type === 'TSLiteralType' ? n.argument.literal : n.argument),
      TSExternalModuleReference: (n) => check(n, n.expression),
    }
  },
}

export default { meta: { name: 'corral' }, rules: { rooms } }
