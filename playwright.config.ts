import { defineConfig } from '@playwright/test'

/**
 * End-to-end tests of the renderer against `corral serve` (a real child process on a free port
 * with a temp data dir) and the scripted model server, in Debian's Chromium. Never run
 * `playwright install`: the browser is the system one. Screenshots land in test-results/e2e/.
 */
export default defineConfig({
  testDir: 'test/e2e',
  testMatch: '**/*.spec.ts',
  outputDir: 'test-results/e2e',
  globalSetup: './test/e2e/support/global-setup.ts',
  fullyParallel: false,
  workers: 1,
  timeout: 90_000,
  expect: { timeout: 15_000 },
  retries: 0,
  reporter: process.env.CI ? [['list'], ['json', { outputFile: 'test-results/e2e/results.json' }]] : [['list']],
  use: {
    browserName: 'chromium',
    viewport: { width: 1360, height: 860 },
    screenshot: 'only-on-failure',
    trace: 'retain-on-failure',
    launchOptions: {
      executablePath: process.env.CORRAL_CHROMIUM ?? '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    },
  },
})
