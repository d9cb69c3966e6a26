/**
 * The desktop's "Choose…" for a session's host folder, as the IPC handler answers it, without
 * Electron: src/main/index.ts passes the system dialog in (`dialog.showOpenDialog` on the asking
 * window), so the answer can be tested where the Electron binary cannot run.
 */
import type { IpcResult } from '../../shared/api/operations'

/** What the folder dialog is asked for: one directory (a new one may be made in the dialog). */
export const FOLDER_DIALOG_OPTIONS = { title: 'Choose a folder for the agent', properties: ['openDirectory', 'createDirectory'] } as { title: string; properties: Array<'openDirectory' | 'createDirectory'> }

/** The system dialog, as Electron's `dialog.showOpenDialog` answers it. */
export type FolderDialog = (options: typeof FOLDER_DIALOG_OPTIONS) => Promise<{ canceled: boolean; filePaths: string[] }>

export interface PickFolderParams {
  /** The asking frame is our own page (index.ts's sender check); otherwise no dialog opens. */
  trusted: boolean
  showDialog: FolderDialog
}

/**
 * Answers the renderer's pickFolder call: a 403 permission_error for an untrusted sender (no
 * dialog is shown), else the folder the person chose, or null when they cancelled. A dialog that
 * fails is an api_error result naming why, never a thrown error across IPC. The path is not
 * checked here: the engine resolves and checks it when the session is created (hands/folders.ts).
 */
export async function answerPickFolder(p: PickFolderParams): Promise<IpcResult<string | null>> {
  if (!p.trusted) return { ok: false, status: 403, error: { type: 'permission_error', message: 'IPC from an untrusted frame' } }
  try {
    const r = await p.showDialog(FOLDER_DIALOG_OPTIONS)
    return { ok: true, data: r.canceled ? null : (r.filePaths[0] ?? null) }
  } catch (err) {
    return { ok: false, status: 500, error: { type: 'api_error', message: `the folder dialog failed: ${(err as Error).message}` } }
  }
}
