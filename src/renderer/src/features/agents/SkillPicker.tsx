import { useState } from 'react'
import { useClient } from '../../api/context'
import type { Agent, Page, Skill, SkillVersion } from '../../api/types'
import { Button } from '../../ui/components'
import { useQuery } from '../../ui/hooks'

/** A custom skill on the agent being edited: pinned to a version, or following the latest (null). */
export interface SkillChoice {
  skill_id: string
  version: string | null
}

/** The agent's custom skills as the editor holds them (`latest`, as the API shows a follower, is null). */
export function skillsOf(agent: Agent | undefined): SkillChoice[] {
  return (agent?.skills ?? []).filter((s) => s.type === 'custom').map((s) => ({ skill_id: s.skill_id, version: s.version && s.version !== 'latest' ? s.version : null }))
}

/** The agent editor's skill picker: add a custom skill, pin it to a version or follow the latest, remove it. */
export function SkillPicker({ value, onChange }: { value: readonly SkillChoice[]; onChange: (v: SkillChoice[]) => void }) {
  const client = useClient()
  const skills = useQuery(() => client.request<Page<Skill>>('skills.list', {}, { limit: 100, source: 'custom' }), [])
  const all = skills.data?.data ?? []
  const addable = all.filter((s) => !value.some((v) => v.skill_id === s.id))
  const [adding, setAdding] = useState('')
  const nameOf = (id: string) => all.find((s) => s.id === id)?.display_name ?? id
  return (
    <fieldset className="toolset" aria-label="Skills">
      <legend>Skills</legend>
      <p className="field-hint">Custom skills placed in the agent&apos;s sandbox under /mnt/skills and named to the model. Manage them on the Skills page.</p>
      {value.length > 0 && (
        <table className="tool-table">
          <thead>
            <tr>
              <th scope="col">Skill</th>
              <th scope="col">Version</th>
              <th scope="col">
                <span className="sr-only">Remove</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {value.map((v, i) => (
              <tr key={v.skill_id}>
                <th scope="row">{nameOf(v.skill_id)}</th>
                <td>
                  <VersionSelect skillId={v.skill_id} label={`${nameOf(v.skill_id)} version`} value={v.version} onChange={(version) => onChange(value.map((x, j) => (j === i ? { ...x, version } : x)))} />
                </td>
                <td>
                  <Button small variant="ghost" icon="x" aria-label={`Remove ${nameOf(v.skill_id)}`} onClick={() => onChange(value.filter((_, j) => j !== i))} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <div className="form-row">
        <select aria-label="Add a skill" value={adding} onChange={(e) => setAdding(e.target.value)} disabled={addable.length === 0}>
          <option value="">{all.length === 0 ? 'No skills uploaded yet' : addable.length === 0 ? 'Every skill is added' : 'Choose a skill…'}</option>
          {addable.map((s) => (
            <option key={s.id} value={s.id}>
              {s.display_name}
            </option>
          ))}
        </select>
        <Button small icon="plus" disabled={!adding} onClick={() => { onChange([...value, { skill_id: adding, version: null }]); setAdding('') }}>
          Add skill
        </Button>
      </div>
    </fieldset>
  )
}

function VersionSelect({ skillId, label, value, onChange }: { skillId: string; label: string; value: string | null; onChange: (v: string | null) => void }) {
  const client = useClient()
  const versions = useQuery(() => client.request<Page<SkillVersion>>('skills.versions.list', { id: skillId }, { limit: 100 }), [skillId])
  const list = versions.data?.data ?? []
  return (
    <select aria-label={label} value={value ?? ''} onChange={(e) => onChange(e.target.value || null)}>
      <option value="">Latest</option>
      {value && !list.some((v) => v.id === value) && <option value={value}>{value}</option>}
      {list.map((v) => (
        <option key={v.id} value={v.id}>
          {v.id}
        </option>
      ))}
    </select>
  )
}
