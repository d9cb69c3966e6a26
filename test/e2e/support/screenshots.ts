import type { Page, TestInfo } from '@playwright/test'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'

/** Where the e2e screenshots land (the closing note and the issues point at them). */
export const SHOTS = join(__dirname, '..', '..', '..', 'test-results', 'screenshots')

/** Saves a screenshot of the page as `<SHOTS>/<name>.png` and attaches it to the test's report. */
export async function shot(page: Page, info: TestInfo, name: string): Promise<void> {
  mkdirSync(SHOTS, { recursive: true })
  const path = join(SHOTS, `${name}.png`)
  await page.screenshot({ path, animations: 'disabled' })
  await info.attach(name, { path, contentType: 'image/png' })
}
