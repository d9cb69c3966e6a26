import { OUTPUTS_DIR, UPLOADS_DIR } from '../../../shared/api/file-paths'

/**
 * What the model is told about a session's files: the `file` resources it can read under
 * /mnt/session/uploads (read-only), and the outputs folder whose files are handed back to the
 * user as the session's files. Undefined when the agent has no toolset (nothing could read or
 * write them). Pure: the caller passes the session's resources and the agent's tools.
 */
export function filesSystemContext(p: { resources: readonly unknown[] | undefined; tools: readonly unknown[] | undefined }): string | undefined {
  const toolset = (p.tools ?? []).some((t) => (t as { type?: unknown } | null)?.type === 'agent_toolset_20260401')
  if (!toolset) return undefined
  const inputs = (p.resources ?? [])
    .filter((r) => (r as { type?: unknown } | null)?.type === 'file')
    .map((r) => (r as { mount_path?: unknown }).mount_path)
    .filter((m): m is string => typeof m === 'string')
  const lines = [
    `Files you write under ${OUTPUTS_DIR}/ (create the folder first) are given to the user as this session's files after each tool call; put deliverables (reports, data, images) there. Rewriting a file there replaces the copy the user gets.`,
  ]
  if (inputs.length) lines.push(`The user's files for this session are under ${UPLOADS_DIR}/ (read-only): ${inputs.join(', ')}.`)
  return lines.join('\n')
}
