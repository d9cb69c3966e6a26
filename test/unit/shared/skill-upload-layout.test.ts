import { describe, expect, it } from 'vitest'
import { skillNameProblem, skillUploadLayout } from '../../../src/shared/api/skills'

const parts = (...names: string[]) => names.map((filename) => ({ filename, content: filename }))

describe('skillUploadLayout', () => {
  it('takes the one top-level folder and gives each file its path inside it', () => {
    expect(skillUploadLayout(parts('pdf/SKILL.md', 'pdf/scripts/run.py', './pdf/ref.md', 'pdf\\win\\a.txt'))).toEqual({
      folder: 'pdf',
      files: [
        { path: 'SKILL.md', content: 'pdf/SKILL.md' },
        { path: 'scripts/run.py', content: 'pdf/scripts/run.py' },
        { path: 'ref.md', content: './pdf/ref.md' },
        { path: 'win/a.txt', content: 'pdf\\win\\a.txt' },
      ],
    })
  })

  it('takes absolute paths from the folder of the shallowest SKILL.md, and refuses files outside it', () => {
    expect(skillUploadLayout(parts('/home/me/x/pdf/SKILL.md', '/home/me/x/pdf/a/SKILL.md', '/home/me/x/pdf/b.txt')).files.map((f) => f.path)).toEqual(['SKILL.md', 'a/SKILL.md', 'b.txt'])
    expect(() => skillUploadLayout(parts('/home/me/pdf/SKILL.md', '/home/me/other/b.txt'))).toThrow(/files\[1\]: "\/home\/me\/other\/b\.txt" is not inside the skill's folder \/home\/me\/pdf/)
    expect(() => skillUploadLayout(parts('/SKILL.md'))).toThrow(/not at the root of the file system/)
    expect(() => skillUploadLayout(parts('/a/pdf/SKILL.md', 'pdf/b.txt'))).toThrow(/absolute path while others are relative/)
  })

  it('refuses an upload with no SKILL.md at the folder root, two folders, loose files, duplicates or unsafe segments, naming the file', () => {
    expect(() => skillUploadLayout(parts('pdf/a/SKILL.md'))).toThrow(/no pdf\/SKILL\.md/)
    expect(() => skillUploadLayout(parts('a/SKILL.md', 'b/SKILL.md'))).toThrow(/one top-level folder; this upload has 2/)
    expect(() => skillUploadLayout(parts('a/SKILL.md', 'loose.txt'))).toThrow(/files\[1\]: "loose\.txt" is not inside a folder/)
    expect(() => skillUploadLayout(parts('a/SKILL.md', 'a/SKILL.md'))).toThrow(/files\[1\]: a\/SKILL\.md is sent twice \(also files\[0\]\)/)
    expect(() => skillUploadLayout(parts('a/SKILL.md', 'a/x/../../y'))).toThrow(/files\[1\].*'\.\.' segment/)
    expect(() => skillUploadLayout(parts('a/SKILL.md', 'a//y'))).toThrow(/empty or '\.\.' segment/)
    expect(() => skillUploadLayout(parts('a/SKILL.md', 'a/x\u0000'))).toThrow(/control character/)
    expect(() => skillUploadLayout(parts('a/SKILL.md', 'a/x', 'a/x/y'))).toThrow(/a\/x is a file and also the folder of a\/x\/y/)
    expect(() => skillUploadLayout([])).toThrow(/at least one file/)
    expect(() => skillUploadLayout(parts(''))).toThrow(/files\[0\]: a file without a name/)
  })
})

describe('skillNameProblem', () => {
  it('accepts kebab-case names up to 64 characters and names what is wrong with others', () => {
    expect(skillNameProblem('pdf-tools-2')).toBeUndefined()
    expect(skillNameProblem('a'.repeat(65))).toMatch(/at most 64/)
    expect(skillNameProblem('PDF')).toMatch(/kebab-case/)
    expect(skillNameProblem('a--b')).toMatch(/kebab-case/)
    expect(skillNameProblem('-a')).toMatch(/kebab-case/)
    expect(skillNameProblem('anthropic-helper')).toMatch(/reserved word "anthropic"/)
    expect(skillNameProblem('')).toMatch(/empty/)
  })
})
