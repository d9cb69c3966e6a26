import { load, YAMLException } from 'js-yaml'
import { MAX_SKILL_DESCRIPTION, skillNameProblem } from '../../shared/api/skills'
import { invalid } from '../../shared/errors'

/** What a SKILL.md's frontmatter says about its skill. */
export interface SkillManifest {
  /** The frontmatter's `name`, when it has one (checked: kebab-case, ≤ 64, no reserved word). */
  name?: string
  /** The frontmatter's `description` (required, ≤ 1024 characters, one or more lines). */
  description: string
}

/**
 * Reads the YAML frontmatter of a SKILL.md (the block between a first line `---` and the next
 * `---`), the way Claude Code reads a skill: `name` (optional here: the folder name stands in)
 * and `description` (required: it is what the model is told). Other keys are kept in the file
 * and ignored. Throws invalid_request_error naming `files: <folder>/SKILL.md` and the rule.
 */
export function parseSkillManifest(bytes: Buffer, where: string): SkillManifest {
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch {
    throw invalid(`${where}: not valid UTF-8 text`)
  }
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/)
  if (lines[0]?.trim() !== '---') throw invalid(`${where}: must start with YAML frontmatter (a first line '---', then name: and description:, then '---')`)
  const end = lines.findIndex((l, i) => i > 0 && (l.trim() === '---' || l.trim() === '...'))
  if (end < 0) throw invalid(`${where}: the frontmatter opened on line 1 is never closed with a '---' line`)
  let data: unknown
  try {
    data = load(lines.slice(1, end).join('\n'))
  } catch (err) {
    const reason = err instanceof YAMLException ? `${err.reason}${err.mark ? ` at line ${err.mark.line + 2}` : ''}` : (err as Error).message
    throw invalid(`${where}: the frontmatter is not valid YAML (${reason})`)
  }
  if (data === null || data === undefined) data = {}
  if (typeof data !== 'object' || Array.isArray(data)) throw invalid(`${where}: the frontmatter must be a YAML mapping (name: …, description: …)`)
  const fm = data as Record<string, unknown>
  let name: string | undefined
  if (fm.name !== undefined && fm.name !== null) {
    if (typeof fm.name !== 'string') throw invalid(`${where}: frontmatter name must be a string`)
    const problem = skillNameProblem(fm.name)
    if (problem) throw invalid(`${where}: frontmatter name ${JSON.stringify(fm.name)} ${problem}`)
    name = fm.name
  }
  if (typeof fm.description !== 'string' || fm.description.trim() === '') {
    throw invalid(`${where}: frontmatter description is required (a non-empty string: what the skill does and when to use it)`)
  }
  const description = fm.description.trim()
  if (description.length > MAX_SKILL_DESCRIPTION) throw invalid(`${where}: frontmatter description is at most ${MAX_SKILL_DESCRIPTION} characters (got ${description.length})`)
  if (/<\/?[A-Za-z][^>]*>/.test(description)) throw invalid(`${where}: frontmatter description must not contain XML tags`)
  return { name, description }
}
