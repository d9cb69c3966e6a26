import { describe, expect, it } from 'vitest'
import { toBase64, uploadBody } from '../../../src/renderer/src/features/skills/skill-upload'
import { corralSkillUploadSchema } from '../../../src/shared/api/skill-schemas'
import { skillsOf } from '../../../src/renderer/src/features/agents/SkillPicker'
import type { Agent } from '../../../src/shared/api/types'

describe('the Skills page upload body', () => {
  it('keeps each file under its path in the chosen folder and carries its bytes as base64', () => {
    const body = uploadBody([
      { path: 'csv-report/SKILL.md', bytes: new TextEncoder().encode('---\nname: csv-report\n---\n') },
      { path: 'csv-report/scripts/run.py', bytes: new Uint8Array([0, 255, 10]) },
    ])
    expect(body.files.map((f) => f.path)).toEqual(['csv-report/SKILL.md', 'csv-report/scripts/run.py'])
    expect(Buffer.from(body.files[1].content_base64, 'base64')).toEqual(Buffer.from([0, 255, 10]))
    expect(corralSkillUploadSchema.safeParse(body).success).toBe(true)
  })

  it('sends a display name only when one was typed, trimmed', () => {
    const files = [{ path: 'a/SKILL.md', bytes: new Uint8Array([65]) }]
    expect('display_name' in uploadBody(files, '   ')).toBe(false)
    expect(uploadBody(files, '  CSV report ').display_name).toBe('CSV report')
  })

  it('encodes a file larger than one chunk the same as Node does', () => {
    const bytes = new Uint8Array(100_000).map((_, i) => (i * 7) % 256)
    expect(toBase64(bytes)).toBe(Buffer.from(bytes).toString('base64'))
  })
})

describe("the agent editor's skills", () => {
  it('reads a skill following latest as unpinned and keeps a pinned version', () => {
    const agent = { skills: [{ type: 'custom', skill_id: 'skill_a', version: 'latest' }, { type: 'custom', skill_id: 'skill_b', version: '1796143766496000' }] } as unknown as Agent
    expect(skillsOf(agent)).toEqual([{ skill_id: 'skill_a', version: null }, { skill_id: 'skill_b', version: '1796143766496000' }])
    expect(skillsOf(undefined)).toEqual([])
  })
})
