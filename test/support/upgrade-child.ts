/**
 * Another process upgrading the same database (the desktop and a `corral serve` on one data
 * directory): runs upgradeDatabase on argv[2], printing `step <stage> <done>` per progress report
 * and `done <from> <to>` at the end. Usage: node --import tsx upgrade-child.ts <path>
 */
import { upgradeDatabase } from '../../src/main/session/database'

void upgradeDatabase(process.argv[2], { onProgress: (p) => process.stdout.write(`step ${p.stage} ${p.done}\n`) }).then(
  ({ from, to }) => process.stdout.write(`done ${from} ${to}\n`),
  (err: Error) => {
    process.stderr.write(`upgrade failed: ${err.message}\n`)
    process.exit(1)
  },
)
