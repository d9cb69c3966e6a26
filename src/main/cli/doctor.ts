import type { Command } from 'commander'
import { resolveDataDir } from '../config'
import { runDoctor } from '../doctor'

export function registerDoctorCommand(program: Command): void {
  program
    .command('doctor')
    .description('report which sandbox backends, keychain and model endpoint work on this machine, and why the others do not')
    .option('--json', 'print the findings as JSON')
    .option('--data-dir <dir>', 'data directory (default: $CORRAL_DATA_DIR or the XDG data home)')
    .action(async (opts: { json?: boolean; dataDir?: string }) => {
      const findings = await runDoctor({ dataDir: opts.dataDir ?? resolveDataDir() })
      if (opts.json) console.log(JSON.stringify(findings, null, 2))
      else for (const f of findings) console.log(`${f.ok ? '✓' : '✗'} ${f.area.padEnd(20)} ${f.detail}`)
    })
}
