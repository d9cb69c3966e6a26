// html-to-text 10 ships no type declarations; this is the part of its API web-fetch.ts uses.
declare module 'html-to-text' {
  export interface HtmlToTextOptions {
    wordwrap?: number | false | null
    selectors?: { selector: string; format?: string; options?: Record<string, unknown> }[]
  }
  export function convert(html: string, options?: HtmlToTextOptions): string
}
