import { useRef, useState } from 'react'
import { useClient } from '../../api/context'
import type { Page, Skill, SkillVersion } from '../../api/types'
import { Button, Empty, ErrorNote, Field, Icon } from '../../ui/components'
import { relativeTime } from '../../ui/format'
import { useAction, useQuery } from '../../ui/hooks'
import { skillMountPath } from '../../../../shared/api/skills'
import { readChosen, uploadBody } from './skill-upload'

/**
 * Skills (spec resources.md §7): the list (display name, latest version, created), a skill's
 * versions with delete, and "Upload a skill" from a folder holding a SKILL.md. Uploads go through
 * Corral's JSON route (`skills.upload`), which both transports carry.
 */
export function SkillsView({ selectedId, onSelect }: { selectedId?: string; onSelect: (id: string) => void }) {
  const client = useClient()
  const skills = useQuery(() => client.request<Page<Skill>>('skills.list', {}, { limit: 100 }), [])
  const list = skills.data?.data ?? []
  const creating = selectedId === 'new'
  const selected = creating ? undefined : list.find((s) => s.id === selectedId)
  return (
    <div className="split">
      <aside className="sidebar" aria-label="Skills">
        <div className="sidebar-head">
          <h2 className="sidebar-title">Skills</h2>
          <Button variant="primary" icon="plus" onClick={() => onSelect('new')}>
            Upload
          </Button>
        </div>
        <ErrorNote error={skills.error} />
        <ul className="session-list">
          {list.length === 0 && <li className="session-empty">{skills.loading ? 'Loading…' : 'No skills yet.'}</li>}
          {list.map((s) => (
            <li key={s.id}>
              <button type="button" className={`session-item${s.id === selectedId ? ' selected' : ''}`} aria-current={s.id === selectedId ? 'page' : undefined} onClick={() => onSelect(s.id)}>
                <span className="session-item-top">
                  <span className="session-title">{s.display_name}</span>
                  <span className="muted mono">{s.latest_version_id ?? 'no version'}</span>
                </span>
                <span className="session-item-bottom">
                  <span>created {relativeTime(s.created_at)}</span>
                </span>
              </button>
            </li>
          ))}
        </ul>
      </aside>
      <div className="pane">
        {creating ? (
          <SkillUpload onUploaded={(s) => { skills.reload(); onSelect(s.id) }} />
        ) : selected ? (
          <SkillDetail key={selected.id} skill={selected} onChanged={() => skills.reload()} onDeleted={() => { skills.reload(); onSelect('') }} />
        ) : (
          <Empty icon="file" title="Skills">
            A skill is a folder with a SKILL.md (its name and description in the frontmatter) and any scripts or files it needs. An agent that has it finds it at {skillMountPath('<name>')} in its sandbox.
          </Empty>
        )}
      </div>
    </div>
  )
}

function SkillUpload({ skill, onUploaded }: { skill?: Skill; onUploaded: (s: Skill) => void }) {
  const client = useClient()
  const input = useRef<HTMLInputElement>(null)
  const [displayName, setDisplayName] = useState('')
  const [chosen, setChosen] = useState<File[]>([])
  const action = useAction()
  const upload = () =>
    action.run(async () => {
      const files = await readChosen(chosen)
      if (skill) {
        await client.request<SkillVersion>('skills.versions.upload', { id: skill.id }, { files: uploadBody(files).files })
        onUploaded(skill)
      } else {
        onUploaded(await client.request<Skill>('skills.upload', {}, uploadBody(files, displayName)))
      }
      setChosen([])
      if (input.current) input.current.value = ''
    })
  const folder = chosen[0]?.webkitRelativePath.split('/')[0]
  return (
    <section className={skill ? 'versions' : 'editor'} aria-label={skill ? 'Upload a new version' : 'Upload a skill'}>
      {skill ? <h2>Upload a new version</h2> : <h1>Upload a skill</h1>}
      <ErrorNote error={action.error} />
      <form className="form" onSubmit={(e) => { e.preventDefault(); void upload() }}>
        {!skill && (
          <Field id="sk-display" label="Display name" hint="Optional; the SKILL.md's name when left empty.">
            <input id="sk-display" value={displayName} onChange={(e) => setDisplayName(e.target.value)} maxLength={255} />
          </Field>
        )}
        <Field id={skill ? 'sk-version-folder' : 'sk-folder'} label="Skill folder" hint="A folder with SKILL.md at its root.">
          <input
            id={skill ? 'sk-version-folder' : 'sk-folder'}
            ref={input}
            type="file"
            multiple
            {...{ webkitdirectory: '', directory: '' }}
            onChange={(e) => setChosen(Array.from(e.target.files ?? []))}
          />
        </Field>
        {chosen.length > 0 && (
          <p className="field-hint">
            {folder ? <span className="mono">{folder}/</span> : null} {chosen.length} file{chosen.length === 1 ? '' : 's'}
          </p>
        )}
        <div className="thread-actions">
          <Button variant="primary" icon="plus" type="submit" disabled={action.busy !== undefined || chosen.length === 0}>
            {action.busy ? 'Uploading…' : skill ? 'Upload version' : 'Upload skill'}
          </Button>
        </div>
      </form>
    </section>
  )
}

function SkillDetail({ skill, onChanged, onDeleted }: { skill: Skill; onChanged: () => void; onDeleted: () => void }) {
  const client = useClient()
  const versions = useQuery(() => client.request<Page<SkillVersion>>('skills.versions.list', { id: skill.id }, { limit: 100 }), [skill.id, skill.updated_at])
  const action = useAction()
  const list = versions.data?.data ?? []
  const deleteVersion = async (v: SkillVersion) => {
    if (!window.confirm(`Delete version ${v.id} of ${skill.display_name}? Agents pinned to it can no longer start sessions.`)) return
    await action.run(async () => {
      await client.request('skills.versions.delete', { id: skill.id, versionId: v.id })
      versions.reload()
      onChanged()
    })
  }
  const deleteSkill = async () => {
    if (!window.confirm(`Delete ${skill.display_name}?`)) return
    await action.run(async () => {
      await client.request('skills.delete', { id: skill.id })
      onDeleted()
    })
  }
  return (
    <div className="editor">
      <header className="editor-head">
        <div>
          <h1>{skill.display_name}</h1>
          <div className="thread-sub">
            <span className="mono">{skill.id}</span>
            <span>latest {skill.latest_version_id ?? '—'}</span>
            <span>created {relativeTime(skill.created_at)}</span>
          </div>
        </div>
        <div className="thread-actions">
          <Button variant="ghost" icon="x" onClick={() => void deleteSkill()} disabled={list.length > 0} title={list.length > 0 ? 'Delete its versions first' : undefined}>
            Delete skill
          </Button>
        </div>
      </header>
      <ErrorNote error={action.error ?? versions.error} />
      <section className="versions" aria-label="Versions">
        <h2>
          <Icon name="history" /> Versions
        </h2>
        <ol className="version-list">
          {list.map((v) => (
            <li key={v.id} className="skill-version">
              <span className="mono">{v.id}</span>
              <span className="mono">{v.name}</span>
              <span className="muted">{v.description}</span>
              <span className="muted">{relativeTime(v.created_at)}</span>
              {v.id === skill.latest_version_id && <span className="pill pill-done">latest</span>}
              <Button small variant="ghost" icon="x" aria-label={`Delete version ${v.id}`} onClick={() => void deleteVersion(v)}>
                Delete
              </Button>
            </li>
          ))}
        </ol>
      </section>
      <SkillUpload skill={skill} onUploaded={() => { versions.reload(); onChanged() }} />
    </div>
  )
}
