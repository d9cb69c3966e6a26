/**
 * A folder chosen in the browser as the body of Corral's JSON skill upload (`POST /v1/corral/skills`,
 * `{ display_name?, files: [{ path, content_base64 }] }`): each file's path is its
 * `webkitRelativePath` (`my-skill/SKILL.md`), so the engine sees the same layout as the API's
 * multipart `files[]`. Pure over its inputs: the caller reads the bytes.
 */

/** One chosen file: its path inside the chosen folder and its bytes. */
export interface ChosenFile {
  path: string
  bytes: Uint8Array
}

/** The bytes as base64, in chunks (String.fromCharCode over a whole file would overflow the stack). */
export function toBase64(bytes: Uint8Array): string {
  let bin = ''
  const CHUNK = 0x8000
  for (let i = 0; i < bytes.length; i += CHUNK) bin += String.fromCharCode(...bytes.subarray(i, i + CHUNK))
  return btoa(bin)
}

/** The upload's body; `display_name` only when one was typed. */
export function uploadBody(files: readonly ChosenFile[], displayName?: string): { display_name?: string; files: { path: string; content_base64: string }[] } {
  const name = displayName?.trim()
  return { ...(name ? { display_name: name } : {}), files: files.map((f) => ({ path: f.path, content_base64: toBase64(f.bytes) })) }
}

/** Reads the files of an `<input type=file webkitdirectory>`, each under its relative path. */
export async function readChosen(list: FileList | readonly File[]): Promise<ChosenFile[]> {
  const files = Array.from(list)
  return Promise.all(files.map(async (f) => ({ path: f.webkitRelativePath || f.name, bytes: new Uint8Array(await f.arrayBuffer()) })))
}
