import { skillMountPath } from '../../../shared/api/skills'

/** A skill placed in the session's sandbox, as the session store resolves it (SessionStore.skillsOf). */
export interface PlacedSkill {
  skill_id: string
  name: string
  description: string
}

/**
 * What the model is told about the skills in its sandbox, the way Claude Code presents skills:
 * each skill's name and description (from its SKILL.md frontmatter) and where its SKILL.md is, so
 * the model reads the rest only when a task calls for it. Only the skills the thread's own agent
 * lists (`agentSkills`, by skill_id) among those placed. Undefined when there are none. Pure.
 */
export function skillsSystemContext(placed: readonly PlacedSkill[] | undefined, agentSkills: readonly unknown[] | undefined): string | undefined {
  const ids = new Set((agentSkills ?? []).map((s) => (s as { skill_id?: unknown } | null)?.skill_id).filter((id): id is string => typeof id === 'string'))
  const skills = (placed ?? []).filter((s) => ids.has(s.skill_id))
  if (skills.length === 0) return undefined
  const entries = skills.map((s) => `<skill name=${JSON.stringify(s.name)} path=${JSON.stringify(`${skillMountPath(s.name)}/SKILL.md`)}>\n${s.description}\n</skill>`)
  return [
    `Skills are installed in this session's sandbox, read-only, under ${skillMountPath('')}: each is a folder of instructions, and often scripts and reference files, for one kind of task. When a task matches a skill's description, read its SKILL.md first (the path below) and follow it; open the other files it mentions only when you need them.`,
    ...entries,
  ].join('\n\n')
}
