import { memo } from 'react'
import ReactMarkdown, { type Components } from 'react-markdown'
import { CodeBlock } from './Code'

const components: Components = {
  code({ className, children }) {
    const text = String(children ?? '')
    const lang = /language-([\w+#.-]+)/.exec(className ?? '')?.[1]
    // Fenced blocks end with a newline or name a language; everything else is inline code.
    if (lang || text.includes('\n')) return <CodeBlock code={text.replace(/\n$/, '')} language={lang} />
    return <code className="code-inline">{children}</code>
  },
  pre({ children }) {
    return <>{children}</>
  },
  a({ href, children }) {
    return (
      <a href={href} target="_blank" rel="noreferrer noopener">
        {children}
      </a>
    )
  },
  img({ alt }) {
    // Remote images would leak the reader's address; the CSP blocks them anyway.
    return <span className="md-img">[image: {alt || 'untitled'}]</span>
  },
}

/** A message as markdown, with highlighted code blocks. Raw HTML in the text is shown as text, never run. */
export const Markdown = memo(function Markdown({ text }: { text: string }) {
  return (
    <div className="md">
      <ReactMarkdown components={components}>{text}</ReactMarkdown>
    </div>
  )
})
