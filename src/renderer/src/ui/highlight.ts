/**
 * A small syntax highlighter for the code blocks in messages and tool cards: one ordered list of
 * token rules per language family (comments, strings, numbers, keywords, types, functions),
 * applied left to right. Light by design: no grammar files, no WASM, no work off the main thread.
 */
export type TokenType = 'comment' | 'string' | 'number' | 'keyword' | 'literal' | 'type' | 'function' | 'property' | 'operator' | 'tag' | 'attr' | 'variable' | 'inserted' | 'deleted' | 'meta' | 'plain'

export interface Token {
  type: TokenType
  text: string
}

interface Rule {
  type: TokenType
  re: RegExp
}

const words = (list: string) => new RegExp(`\\b(?:${list.trim().split(/\s+/).join('|')})\\b`, 'y')

const JS_KW = words(`async await break case catch class const continue debugger default delete do else export extends finally for from function
  get if import in instanceof let new of return satisfies set static super switch this throw try typeof var void while with yield
  type interface enum implements declare namespace readonly keyof as abstract private protected public`)
const PY_KW = words(`and as assert async await break class continue def del elif else except finally for from global if import in is lambda
  nonlocal not or pass raise return try while with yield match case self`)
const SH_KW = words(`if then else elif fi for while until do done case esac in function return local export readonly set unset shift exit
  source alias echo cd sudo`)
const GO_KW = words(`break case chan const continue default defer else fallthrough for func go goto if import interface map package range
  return select struct switch type var`)
const RS_KW = words(`as async await break const continue crate dyn else enum extern fn for if impl in let loop match mod move mut pub ref
  return self Self static struct super trait type unsafe use where while`)
const C_KW = words(`auto break case char class const continue default do double else enum extern float for goto if inline int long
  namespace new private protected public return short signed sizeof static struct switch template this throw try typedef typename
  union unsigned using virtual void volatile while final override import package extends implements interface var val fun let func`)
const SQL_KW = new RegExp(
  `\\b(?:${'select from where and or not insert into values update set delete create table drop alter index join left right inner outer on group by order having limit offset as distinct union all primary key foreign references null is in like between case when then else end with returning'.split(' ').join('|')})\\b`,
  'iy',
)
const LITERALS = words('true false null undefined None True False nil NaN Infinity')

const STR_DQ = /"(?:[^"\\\n]|\\.)*"?/y
const STR_SQ = /'(?:[^'\\\n]|\\.)*'?/y
const STR_BT = /`(?:[^`\\]|\\.)*`?/y
const NUM = /\b(?:0x[\da-fA-F_]+|0b[01_]+|\d[\d_]*(?:\.\d[\d_]*)?(?:[eE][+-]?\d+)?n?)\b/y
const FN = /\b[A-Za-z_$][\w$]*(?=\s*\()/y
const TYPE = /\b[A-Z][A-Za-z0-9_]*\b/y
const IDENT = /[A-Za-z_$][\w$]*/y
const OP = /[+\-*/%=!<>&|^~?:]+/y

const FAMILIES: Record<string, Rule[]> = {
  js: [
    { type: 'comment', re: /\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/y },
    { type: 'string', re: STR_DQ },
    { type: 'string', re: STR_SQ },
    { type: 'string', re: STR_BT },
    { type: 'number', re: NUM },
    { type: 'literal', re: LITERALS },
    { type: 'keyword', re: JS_KW },
    { type: 'function', re: FN },
    { type: 'type', re: TYPE },
    { type: 'plain', re: IDENT },
    { type: 'operator', re: OP },
  ],
  json: [
    { type: 'property', re: /"(?:[^"\\\n]|\\.)*"(?=\s*:)/y },
    { type: 'string', re: STR_DQ },
    { type: 'number', re: /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/y },
    { type: 'literal', re: words('true false null') },
  ],
  py: [
    { type: 'comment', re: /#[^\n]*/y },
    { type: 'string', re: /[rRbBfFuU]{0,2}(?:"""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$))/y },
    { type: 'string', re: STR_DQ },
    { type: 'string', re: STR_SQ },
    { type: 'meta', re: /@[\w.]+/y },
    { type: 'number', re: NUM },
    { type: 'literal', re: LITERALS },
    { type: 'keyword', re: PY_KW },
    { type: 'function', re: FN },
    { type: 'type', re: TYPE },
    { type: 'plain', re: IDENT },
    { type: 'operator', re: OP },
  ],
  sh: [
    { type: 'comment', re: /(?:^|(?<=\s))#[^\n]*/y },
    { type: 'string', re: STR_DQ },
    { type: 'string', re: /'[^']*'?/y },
    { type: 'variable', re: /\$(?:\{[^}\n]*\}?|[A-Za-z_][\w]*|[@*#?$!0-9-])/y },
    { type: 'keyword', re: SH_KW },
    { type: 'attr', re: /(?<=\s)--?[A-Za-z0-9][\w-]*/y },
    { type: 'number', re: /\b\d+\b/y },
    { type: 'operator', re: /[|&;<>]+/y },
    { type: 'plain', re: /[A-Za-z_][\w.-]*/y },
  ],
  go: [
    { type: 'comment', re: /\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/y },
    { type: 'string', re: STR_DQ },
    { type: 'string', re: STR_BT },
    { type: 'string', re: STR_SQ },
    { type: 'number', re: NUM },
    { type: 'literal', re: LITERALS },
    { type: 'keyword', re: GO_KW },
    { type: 'function', re: FN },
    { type: 'type', re: TYPE },
    { type: 'plain', re: IDENT },
    { type: 'operator', re: OP },
  ],
  rs: [
    { type: 'comment', re: /\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/y },
    { type: 'string', re: STR_DQ },
    { type: 'meta', re: /#!?\[[^\]\n]*\]?/y },
    { type: 'number', re: NUM },
    { type: 'literal', re: LITERALS },
    { type: 'keyword', re: RS_KW },
    { type: 'function', re: /\b[a-z_][\w]*!?(?=\s*\()|\b[a-z_][\w]*!/y },
    { type: 'type', re: TYPE },
    { type: 'plain', re: IDENT },
    { type: 'operator', re: OP },
  ],
  c: [
    { type: 'comment', re: /\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/y },
    { type: 'meta', re: /#\s*\w+[^\n]*/y },
    { type: 'string', re: STR_DQ },
    { type: 'string', re: STR_SQ },
    { type: 'number', re: NUM },
    { type: 'literal', re: LITERALS },
    { type: 'keyword', re: C_KW },
    { type: 'function', re: FN },
    { type: 'type', re: TYPE },
    { type: 'plain', re: IDENT },
    { type: 'operator', re: OP },
  ],
  css: [
    { type: 'comment', re: /\/\*[\s\S]*?(?:\*\/|$)/y },
    { type: 'string', re: STR_DQ },
    { type: 'string', re: STR_SQ },
    { type: 'property', re: /[a-z-]+(?=\s*:)/y },
    { type: 'number', re: /-?\d*\.?\d+(?:px|em|rem|%|vh|vw|s|ms|deg|fr)?/y },
    { type: 'keyword', re: /@[\w-]+/y },
    { type: 'tag', re: /[.#]?[A-Za-z_][\w-]*/y },
  ],
  html: [
    { type: 'comment', re: /<!--[\s\S]*?(?:-->|$)/y },
    { type: 'tag', re: /<\/?[A-Za-z][\w:-]*|\/?>/y },
    { type: 'string', re: STR_DQ },
    { type: 'string', re: STR_SQ },
    { type: 'attr', re: /[A-Za-z_:][\w:.-]*(?==)/y },
  ],
  yaml: [
    { type: 'comment', re: /#[^\n]*/y },
    { type: 'property', re: /[\w.-]+(?=\s*:(?:\s|$))/y },
    { type: 'string', re: STR_DQ },
    { type: 'string', re: STR_SQ },
    { type: 'number', re: /\b\d+(?:\.\d+)?\b/y },
    { type: 'literal', re: words('true false null yes no on off') },
  ],
  sql: [
    { type: 'comment', re: /--[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/y },
    { type: 'string', re: STR_SQ },
    { type: 'string', re: STR_DQ },
    { type: 'number', re: NUM },
    { type: 'keyword', re: SQL_KW },
    { type: 'function', re: FN },
    { type: 'plain', re: IDENT },
  ],
  diff: [
    { type: 'meta', re: /^(?:@@[^\n]*|diff [^\n]*|index [^\n]*|\+\+\+ [^\n]*|--- [^\n]*)/my },
    { type: 'inserted', re: /^\+[^\n]*/my },
    { type: 'deleted', re: /^-[^\n]*/my },
  ],
}

const ALIASES: Record<string, string> = {
  js: 'js', jsx: 'js', mjs: 'js', cjs: 'js', javascript: 'js', ts: 'js', tsx: 'js', typescript: 'js', mts: 'js',
  json: 'json', jsonc: 'json', json5: 'json',
  py: 'py', python: 'py', python3: 'py',
  sh: 'sh', bash: 'sh', shell: 'sh', zsh: 'sh', console: 'sh', shellscript: 'sh', dockerfile: 'sh',
  go: 'go', golang: 'go',
  rs: 'rs', rust: 'rs',
  c: 'c', h: 'c', cpp: 'c', 'c++': 'c', cc: 'c', hpp: 'c', java: 'c', kotlin: 'c', kt: 'c', swift: 'c', cs: 'c', csharp: 'c', php: 'c', scala: 'c', dart: 'c',
  css: 'css', scss: 'css', less: 'css',
  html: 'html', xml: 'html', svg: 'html', vue: 'html',
  yaml: 'yaml', yml: 'yaml', toml: 'yaml', ini: 'yaml',
  sql: 'sql', sqlite: 'sql', postgres: 'sql', postgresql: 'sql', mysql: 'sql',
  diff: 'diff', patch: 'diff',
}

/** The language family of a fence tag or file extension ('ts', 'Python', 'src/app.rs'), or undefined. */
export function languageOf(tagOrPath: string | undefined): string | undefined {
  if (!tagOrPath) return undefined
  const t = tagOrPath.toLowerCase().trim()
  if (ALIASES[t]) return ALIASES[t]
  const base = t.split(/[\\/]/).pop() ?? t
  if (base === 'dockerfile' || base === 'makefile') return 'sh'
  const ext = base.includes('.') ? base.slice(base.lastIndexOf('.') + 1) : ''
  return ALIASES[ext]
}

/**
 * Splits code into tokens; concatenating their text gives the input back exactly. An unknown
 * language gives one plain token. Input over `limit` characters is not highlighted (it stays readable).
 */
export function tokenize(code: string, language: string | undefined, limit = 200_000): Token[] {
  const family = language ? FAMILIES[ALIASES[language] ?? language] : undefined
  if (!family || code.length > limit) return [{ type: 'plain', text: code }]
  const tokens: Token[] = []
  let plainStart = 0
  let i = 0
  const flushPlain = (end: number) => {
    if (end > plainStart) {
      const prev = tokens[tokens.length - 1]
      if (prev && prev.type === 'plain') prev.text += code.slice(plainStart, end)
      else tokens.push({ type: 'plain', text: code.slice(plainStart, end) })
    }
  }
  outer: while (i < code.length) {
    for (const rule of family) {
      rule.re.lastIndex = i
      const m = rule.re.exec(code)
      if (m && m[0].length > 0) {
        flushPlain(i)
        if (rule.type === 'plain') {
          const prev = tokens[tokens.length - 1]
          if (prev && prev.type === 'plain') prev.text += m[0]
          else tokens.push({ type: 'plain', text: m[0] })
        } else tokens.push({ type: rule.type, text: m[0] })
        i += m[0].length
        plainStart = i
        continue outer
      }
    }
    i++
  }
  flushPlain(code.length)
  return tokens
}
