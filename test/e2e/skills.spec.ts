import { expect, test } from '@playwright/test'
import AxeBuilder from '@axe-core/playwright'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startServe, type ServeProcess } from './support/serve'
import { shot } from './support/screenshots'
import { openSection } from './support/navigate'

/**
 * The Skills page and the agent editor's skill picker against `corral serve`: a folder with a
 * SKILL.md is uploaded through the page (Corral's JSON upload route, which the desktop's IPC
 * carries too), listed with its version; a folder without one shows the API's 400; the skill is
 * attached to an agent in the editor, pinned to its version, and saved, which the API confirms.
 */

const TOKEN = 'e2e_skills_token_0123456789abc'

test.describe.serial('skills page', () => {
  let dataDir: string
  let folders: string
  let serve: ServeProcess
  const api = <T = Record<string, any>>(method: string, path: string, body?: unknown) => serve.api<T>(method, path, body)

  test.beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'corral-e2e-skills-'))
    folders = mkdtempSync(join(tmpdir(), 'corral-e2e-skill-folders-'))
    mkdirSync(join(folders, 'csv-report', 'scripts'), { recursive: true })
    writeFileSync(join(folders, 'csv-report', 'SKILL.md'), '---\nname: csv-report\ndescription: Summarise a CSV file into report.md with a table per column.\n---\n\nRun scripts/summarise.py on the file.\n')
    writeFileSync(join(folders, 'csv-report', 'scripts', 'summarise.py'), 'import sys\nprint(open(sys.argv[1]).read().count("\\n"))\n')
    mkdirSync(join(folders, 'no-manifest'), { recursive: true })
    writeFileSync(join(folders, 'no-manifest', 'README.md'), 'no SKILL.md here\n')
    serve = await startServe({ dataDir, token: TOKEN, noApiKey: true })
  })

  test.afterAll(async () => {
    await serve?.stop()
    rmSync(dataDir, { recursive: true, force: true })
    rmSync(folders, { recursive: true, force: true })
  })

  test('a folder without a SKILL.md shows the API’s 400 message and adds nothing', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/sessions`)
    await openSection(page, 'Skills')
    await page.getByRole('complementary', { name: 'Skills' }).getByRole('button', { name: 'Upload' }).click()
    await expect(page.getByRole('heading', { name: 'Upload a skill' })).toBeVisible()
    await page.getByLabel('Skill folder').setInputFiles(join(folders, 'no-manifest'))
    await page.getByRole('button', { name: 'Upload skill' }).click()
    await expect(page.getByRole('alert')).toContainText("files: no no-manifest/SKILL.md; a skill's folder has SKILL.md at its root")
    await shot(page, info, 'skills-01-bad-upload')
    expect((await api('GET', '/v1/skills')).data).toEqual([])
  })

  test('uploads a folder with a SKILL.md and lists it with its version', async ({ page }, info) => {
    await page.goto(`${serve.url}/?token=${TOKEN}#/skills/new`)
    await page.getByLabel('Display name').fill('CSV report')
    await page.getByLabel('Skill folder').setInputFiles(join(folders, 'csv-report'))
    await expect(page.getByText('2 files')).toBeVisible()
    await page.getByRole('button', { name: 'Upload skill' }).click()
    await expect(page.getByRole('heading', { name: 'CSV report' })).toBeVisible()
    await expect(page).toHaveURL(/#\/skills\/skill_/)
    const skills = (await api('GET', '/v1/skills')).data as { id: string; display_name: string; latest_version_id: string }[]
    expect(skills.map((s) => s.display_name)).toEqual(['CSV report'])
    const { id, latest_version_id: version } = skills[0]
    const row = page.getByRole('complementary', { name: 'Skills' }).getByRole('button', { name: /CSV report/ })
    await expect(row).toContainText(version)
    const versions = page.getByRole('region', { name: 'Versions' })
    await expect(versions.locator('.skill-version')).toHaveCount(1)
    await expect(versions.locator('.skill-version')).toContainText('csv-report')
    await expect(versions.locator('.skill-version')).toContainText('Summarise a CSV file')
    const axe = await new AxeBuilder({ page }).withTags(['wcag2a', 'wcag2aa']).analyze()
    expect(axe.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => v.id)).toEqual([])
    await shot(page, info, 'skills-02-listed')
    const files = (await api('GET', `/v1/skills/${id}/versions/${version}`)) as { name: string }
    expect(files.name).toBe('csv-report')
  })

  test('attaches the skill to an agent in the editor, pinned to its version, and saves it', async ({ page }, info) => {
    const agent = await api('POST', '/v1/agents', { name: 'Reporter', model: 'claude-sonnet-5-5' })
    const skill = ((await api('GET', '/v1/skills')).data as { id: string; latest_version_id: string }[])[0]
    await page.goto(`${serve.url}/?token=${TOKEN}#/agents/${agent.id}`)
    await expect(page.getByRole('heading', { name: 'Reporter' })).toBeVisible()
    const picker = page.getByRole('group', { name: 'Skills' })
    await picker.getByLabel('Add a skill').selectOption({ label: 'CSV report' })
    await picker.getByRole('button', { name: 'Add skill' }).click()
    await picker.getByLabel('CSV report version').selectOption(skill.latest_version_id)
    await shot(page, info, 'skills-03-agent-picker')
    await page.getByRole('button', { name: 'Save as new version' }).click()
    await expect(page.getByText('version 2')).toBeVisible()
    const saved = await api('GET', `/v1/agents/${agent.id}`)
    expect(saved.version).toBe(2)
    expect(saved.skills).toEqual([{ type: 'custom', skill_id: skill.id, version: skill.latest_version_id }])

    await picker.getByLabel('CSV report version').selectOption({ label: 'Latest' })
    await page.getByRole('button', { name: 'Save as new version' }).click()
    await expect(page.getByText('version 3')).toBeVisible()
    expect((await api('GET', `/v1/agents/${agent.id}`)).skills).toEqual([{ type: 'custom', skill_id: skill.id, version: 'latest' }])

    await picker.getByRole('button', { name: 'Remove CSV report' }).click()
    await page.getByRole('button', { name: 'Save as new version' }).click()
    await expect(page.getByText('version 4')).toBeVisible()
    expect((await api('GET', `/v1/agents/${agent.id}`)).skills).toEqual([])
  })

  test('a folder chosen for a new version stays chosen while an older version is deleted', async ({ page }) => {
    const skill = ((await api('GET', '/v1/skills')).data as { id: string; latest_version_id: string }[])[0]
    await page.goto(`${serve.url}/?token=${TOKEN}#/skills/${skill.id}`)
    page.on('dialog', (d) => void d.accept())
    const upload = page.getByRole('region', { name: 'Upload a new version' })
    const versions = page.getByRole('region', { name: 'Versions' }).locator('.skill-version')
    await upload.getByLabel('Skill folder').setInputFiles(join(folders, 'csv-report'))
    await upload.getByRole('button', { name: 'Upload version' }).click()
    await expect(versions).toHaveCount(2)
    // chosen, not uploaded yet; deleting the first version reads the skill again (a newer updated_at)
    await upload.getByLabel('Skill folder').setInputFiles(join(folders, 'csv-report'))
    await expect(upload.getByText('2 files')).toBeVisible()
    await page.getByRole('button', { name: `Delete version ${skill.latest_version_id}` }).click()
    await expect(versions).toHaveCount(1)
    await expect(upload.getByText('2 files')).toBeVisible()
    await expect(upload.getByRole('button', { name: 'Upload version' })).toBeEnabled()
  })

  test('deletes a version from the skill’s page, then the skill', async ({ page }) => {
    const skill = ((await api('GET', '/v1/skills')).data as { id: string; latest_version_id: string }[])[0]
    await page.goto(`${serve.url}/?token=${TOKEN}#/skills/${skill.id}`)
    page.on('dialog', (d) => void d.accept())
    await page.getByRole('button', { name: `Delete version ${skill.latest_version_id}` }).click()
    await expect(page.getByRole('region', { name: 'Versions' }).locator('.skill-version')).toHaveCount(0)
    expect((await api('GET', `/v1/skills/${skill.id}/versions`)).data).toEqual([])
    await page.getByRole('button', { name: 'Delete skill' }).click()
    await expect(page.getByRole('complementary', { name: 'Skills' })).toContainText('No skills yet.')
    expect((await api('GET', '/v1/skills')).data).toEqual([])
  })
})
