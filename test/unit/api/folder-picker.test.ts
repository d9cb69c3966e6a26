import { describe, expect, it } from 'vitest'
import { answerPickFolder, FOLDER_DIALOG_OPTIONS, type FolderDialog } from '../../../src/main/api/folder-picker'

/** A dialog that answers what it is told and records what it was asked. */
function dialog(answer: { canceled: boolean; filePaths: string[] } | Error): FolderDialog & { asked: unknown[] } {
  const asked: unknown[] = []
  const fn = async (options: typeof FOLDER_DIALOG_OPTIONS) => {
    asked.push(options)
    if (answer instanceof Error) throw answer
    return answer
  }
  return Object.assign(fn, { asked })
}

describe('the desktop folder picker (IPC pickFolder)', () => {
  it('opens the system dialog for one directory and answers the folder the person chose', async () => {
    const d = dialog({ canceled: false, filePaths: ['/home/me/project'] })
    expect(await answerPickFolder({ trusted: true, showDialog: d })).toEqual({ ok: true, data: '/home/me/project' })
    expect(d.asked).toEqual([{ title: 'Choose a folder for the agent', properties: ['openDirectory', 'createDirectory'] }])
  })

  it('answers null when the person cancels the dialog', async () => {
    expect(await answerPickFolder({ trusted: true, showDialog: dialog({ canceled: true, filePaths: [] }) })).toEqual({ ok: true, data: null })
  })

  it('refuses an untrusted sender with a permission error and never shows the dialog', async () => {
    const d = dialog({ canceled: false, filePaths: ['/etc'] })
    expect(await answerPickFolder({ trusted: false, showDialog: d })).toEqual({ ok: false, status: 403, error: { type: 'permission_error', message: 'IPC from an untrusted frame' } })
    expect(d.asked).toEqual([])
  })

  it('answers a failing dialog with an api_error naming why', async () => {
    expect(await answerPickFolder({ trusted: true, showDialog: dialog(new Error('no display')) })).toEqual({ ok: false, status: 500, error: { type: 'api_error', message: 'the folder dialog failed: no display' } })
  })
})
