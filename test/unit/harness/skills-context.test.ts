import { describe, expect, it } from 'vitest'
import { skillsSystemContext } from '../../../src/main/harness/context/skills'

const placed = [
  { skill_id: 'skill_a', name: 'pdf-tools', description: 'Fill PDF forms. Use when given a PDF.' },
  { skill_id: 'skill_b', name: 'csv-helper', description: 'Clean CSV files.' },
]

describe('skillsSystemContext', () => {
  it("tells each skill the thread's agent lists with its name, description and SKILL.md path under /mnt/skills", () => {
    const text = skillsSystemContext(placed, [{ type: 'custom', skill_id: 'skill_a', version: '1' }])!
    expect(text).toContain('<skill name="pdf-tools" path="/mnt/skills/pdf-tools/SKILL.md">\nFill PDF forms. Use when given a PDF.\n</skill>')
    expect(text).not.toContain('csv-helper')
    expect(text).toMatch(/read its SKILL\.md first/)
  })

  it('says nothing when the agent lists no skill that is placed', () => {
    expect(skillsSystemContext(placed, [])).toBeUndefined()
    expect(skillsSystemContext([], [{ type: 'custom', skill_id: 'skill_a', version: '1' }])).toBeUndefined()
    expect(skillsSystemContext(undefined, undefined)).toBeUndefined()
  })
})
