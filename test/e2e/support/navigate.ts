import { expect, type Page } from '@playwright/test'

/**
 * Opens one of the app's sections (Sessions, Agents, Environments, …) from the left navigation
 * and waits until the app has switched to it. The switch follows the hash change a frame or more
 * after the click, so a locator used right after a bare click can still find the previous page's
 * buttons (CI once clicked the sessions landing's "New agent" looking for the Agents page's "New").
 */
export async function openSection(page: Page, name: string): Promise<void> {
  const link = page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name, exact: true })
  await link.click()
  await expect(link).toHaveAttribute('aria-current', 'page')
}
