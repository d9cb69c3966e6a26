/**
 * Skills (spec resources.md §7): the rules of an upload's layout and of a skill's name, shared by
 * the engine (which enforces them) and the renderer (which shows where a skill appears). Plain
 * TypeScript: no node:, no DOM.
 */

/** Where a session's skills appear in its sandbox: `/mnt/skills/<name>/SKILL.md`, read-only. */
export const SKILLS_DIR = '/mnt/skills'

/** Largest upload of one skill version: the sum of its files' sizes. */
export const MAX_SKILL_BYTES = 8 * 1024 * 1024
/** Most files in one skill version. */
export const MAX_SKILL_FILES = 1000
/** Longest `name` (the kebab-case slug) and `description` of a SKILL.md frontmatter. */
export const MAX_SKILL_NAME = 64
export const MAX_SKILL_DESCRIPTION = 1024
/** Most skills on one agent (the agents schema's cap). */
export const MAX_AGENT_SKILLS = 64

/** The sandbox path of a skill's folder. */
export function skillMountPath(name: string): string {
  return `${SKILLS_DIR}/${name}`
}

/** Why a skill name breaks the rules (kebab-case, ≤ 64, no reserved word), or undefined. */
export function skillNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'must not be empty'
  if (name.length > MAX_SKILL_NAME) return `is at most ${MAX_SKILL_NAME} characters (got ${name.length})`
  if (!/^[a-z0-9]+(-[a-z0-9]+)*$/.test(name)) return 'must be kebab-case: lowercase letters, digits and single hyphens between them'
  for (const word of ['anthropic', 'claude']) if (name.includes(word)) return `must not contain the reserved word "${word}"`
  return undefined
}

/** One file of an upload after its path is checked: where it lies inside the skill's folder. */
export interface SkillUploadFile<T> {
  /** Path inside the skill's folder, `/`-separated, never empty, `.` or `..` (e.g. `scripts/run.py`). */
  path: string
  content: T
}

/** An upload's files under their one top-level folder. */
export interface SkillUploadLayout<T> {
  /** The top-level folder's name, as uploaded. */
  folder: string
  files: SkillUploadFile<T>[]
}

/**
 * Checks an upload's layout: every file under one top-level folder, with `SKILL.md` at that
 * folder's root. Paths are the parts' filenames, not stripped (`my-skill/scripts/run.py`);
 * backslashes count as separators and `./` prefixes are dropped. A relative path may not hold
 * `..`, an empty segment or a control character. Absolute paths (what the SDK sends for a file
 * opened from disk, e.g. `fs.createReadStream('/home/me/my-skill/SKILL.md')`) are taken from the
 * folder that holds the upload's shallowest `SKILL.md`: `/home/me/` is dropped and the folder is
 * `my-skill`. Throws an Error whose message names the file and the rule (callers wrap it).
 */
export function skillUploadLayout<T>(parts: readonly { filename: string; content: T }[]): SkillUploadLayout<T> {
  if (parts.length === 0) throw new Error('files: at least one file is required, SKILL.md among them')
  if (parts.length > MAX_SKILL_FILES) throw new Error(`files: at most ${MAX_SKILL_FILES} files per skill (got ${parts.length})`)
  const split = parts.map((p, i) => ({ ...p, i, absolute: /^([/\\]|[A-Za-z]:[/\\])/.test(p.filename), segs: segmentsOf(p.filename, i) }))
  const absolute = split.filter((p) => p.absolute)
  if (absolute.length > 0 && absolute.length < split.length) {
    throw new Error(`files[${absolute[0].i}]: ${JSON.stringify(parts[absolute[0].i].filename)} is an absolute path while others are relative; send every path relative to the skill's folder's parent (e.g. my-skill/SKILL.md)`)
  }
  let prefix = 0
  if (absolute.length > 0) {
    const manifests = split.filter((p) => p.segs[p.segs.length - 1] === 'SKILL.md').sort((a, b) => a.segs.length - b.segs.length)
    if (manifests.length === 0) throw new Error('files: no SKILL.md; a skill is a folder with SKILL.md at its root')
    if (manifests[0].segs.length < 2) throw new Error(`files[${manifests[0].i}]: SKILL.md must be inside the skill's folder, not at the root of the file system`)
    prefix = manifests[0].segs.length - 2
    const base = manifests[0].segs.slice(0, prefix).join('/')
    for (const p of split) {
      if (p.segs.slice(0, prefix).join('/') !== base || p.segs[prefix] !== manifests[0].segs[prefix] || p.segs.length <= prefix + 1) {
        throw new Error(`files[${p.i}]: ${JSON.stringify(parts[p.i].filename)} is not inside the skill's folder /${manifests[0].segs.slice(0, prefix + 1).join('/')} (the folder of its SKILL.md)`)
      }
    }
  }
  const rel = split.map((p) => ({ i: p.i, segs: p.segs.slice(prefix), content: p.content }))
  const folders = [...new Set(rel.map((p) => p.segs[0]))]
  const loose = rel.find((p) => p.segs.length < 2)
  if (loose) throw new Error(`files[${loose.i}]: ${JSON.stringify(parts[loose.i].filename)} is not inside a folder; put every file under one top-level folder (e.g. my-skill/${loose.segs[0]})`)
  if (folders.length > 1) throw new Error(`files: every file must be under one top-level folder; this upload has ${folders.length} (${folders.slice(0, 4).map((f) => JSON.stringify(f)).join(', ')})`)
  const folder = folders[0]
  const seen = new Map<string, number>()
  const files = rel.map((p) => {
    const path = p.segs.slice(1).join('/')
    const earlier = seen.get(path)
    if (earlier !== undefined) throw new Error(`files[${p.i}]: ${folder}/${path} is sent twice (also files[${earlier}])`)
    seen.set(path, p.i)
    return { path, content: p.content }
  })
  for (const f of files) {
    const clash = files.find((g) => g.path.startsWith(f.path + '/'))
    if (clash) throw new Error(`files: ${folder}/${f.path} is a file and also the folder of ${folder}/${clash.path}`)
  }
  if (!seen.has('SKILL.md')) throw new Error(`files: no ${folder}/SKILL.md; a skill's folder has SKILL.md at its root`)
  return { folder, files }
}

function segmentsOf(filename: string, i: number): string[] {
  if (filename === '') throw new Error(`files[${i}]: a file without a name; each part's filename is its path in the skill (e.g. my-skill/SKILL.md)`)
  if (/[\u0000-\u001f\u007f]/.test(filename)) throw new Error(`files[${i}]: ${JSON.stringify(filename)} holds a control character`)
  const segs = filename
    .replace(/^[A-Za-z]:[/\\]/, '/')
    .split(/[/\\]/)
    .filter((s, k) => !(s === '.' || (s === '' && k === 0)))
  if (segs.some((s) => s === '' || s === '..')) throw new Error(`files[${i}]: ${JSON.stringify(filename)} has an empty or '..' segment; paths stay inside the skill's folder`)
  if (segs.some((s) => s.length > 255)) throw new Error(`files[${i}]: a segment of ${JSON.stringify(filename)} is over 255 characters`)
  return segs
}
