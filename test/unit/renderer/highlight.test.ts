import { describe, expect, it } from 'vitest'
import { languageOf, tokenize } from '../../../src/renderer/src/ui/highlight'

const join = (code: string, lang?: string) => tokenize(code, lang).map((t) => t.text).join('')
const types = (code: string, lang?: string) => tokenize(code, lang).filter((t) => t.type !== 'plain').map((t) => `${t.type}:${t.text}`)

describe('tokenize', () => {
  it('gives back the input exactly, for every language family', () => {
    const samples: [string, string][] = [
      ['ts', 'const x: number = 1 // hi\nfunction f() { return `a${x}` }'],
      ['py', 'def f(x):\n    """doc"""\n    return x  # c'],
      ['sh', 'echo "$HOME" --flag | grep -v x # done'],
      ['json', '{"a": [1, true, null, "s"]}'],
      ['diff', '@@ -1 +1 @@\n-old\n+new\n ctx'],
      ['rust', 'fn main() { println!("{}", 1); }'],
      ['sql', "SELECT * FROM t WHERE a = 'x'"],
      ['unknown-lang', 'whatever <b>'],
    ]
    for (const [lang, code] of samples) expect(join(code, lang)).toBe(code)
  })

  it('marks keywords, strings, comments, numbers and functions in TypeScript', () => {
    expect(types('const n = f(42) // x', 'ts')).toEqual(['keyword:const', 'operator:=', 'function:f', 'number:42', 'comment:// x'])
  })

  it('marks JSON keys apart from string values', () => {
    expect(types('{"k": "v"}', 'json')).toEqual(['property:"k"', 'string:"v"'])
  })

  it('marks diff lines as inserted and deleted', () => {
    expect(types('-a\n+b', 'diff')).toEqual(['deleted:-a', 'inserted:+b'])
  })

  it('leaves very long input unhighlighted', () => {
    expect(tokenize('x'.repeat(20), 'ts', 10)).toEqual([{ type: 'plain', text: 'x'.repeat(20) }])
  })
})

describe('languageOf', () => {
  it('maps fence tags and file paths to a family', () => {
    expect(languageOf('TypeScript')).toBe('js')
    expect(languageOf('src/app.rs')).toBe('rs')
    expect(languageOf('/workspace/Dockerfile')).toBe('sh')
    expect(languageOf('notes.unknown')).toBeUndefined()
  })
})
