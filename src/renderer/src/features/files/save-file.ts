/**
 * Hands a file the API sent as base64 to the browser as a download named `name` (the browser, or
 * Electron's save dialog, decides where it goes).
 */
export function saveFile(name: string, contentBase64: string, mimeType = 'application/octet-stream'): void {
  const bin = atob(contentBase64)
  const bytes = new Uint8Array(bin.length)
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i)
  const url = URL.createObjectURL(new Blob([bytes], { type: mimeType }))
  const a = document.createElement('a')
  a.href = url
  a.download = name
  a.click()
  // the download has started by then; the object URL's bytes are freed after it
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}
