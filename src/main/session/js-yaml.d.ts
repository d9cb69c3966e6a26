// js-yaml 4 ships no types; only `load` is used (SKILL.md frontmatter, skill-manifest.ts).
declare module 'js-yaml' {
  export class YAMLException extends Error {
    reason: string
    mark?: { line: number; column: number }
  }
  /** Parses one YAML document with the default (safe) schema; throws YAMLException. */
  export function load(text: string, options?: { filename?: string; json?: boolean }): unknown
}
