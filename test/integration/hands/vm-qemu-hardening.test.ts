import { spawn, execFileSync, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { acceleratorCacheFile, chooseAccelerator, probeKvmBoot } from '../../../src/main/hands/vm/accel'
import { hardeningArgs, makePrivateRunDir, monitorExposure, probeQemuSeccomp, processHardening, qemuUser } from '../../../src/main/hands/vm/hardening'
import { vmDoctorDetails } from '../../../src/main/hands/vm/vm-doctor'
import { requirement } from '../../support/requirements'

/*
 * The qemu process's own hardening and the accelerator probe, against the real qemu (and, for the
 * probe, the real guest kernel and initramfs that `npm run vm:image` builds). Fails in CI when
 * qemu or the image is missing.
 */

const QEMU = process.env.CORRAL_QEMU || 'qemu-system-x86_64'
// CI installs qemu and builds the guest image with the vm backend (scripts/build-vm-image.sh and
// its .ci/run step); before that lands here, a checkout without them skips with the reason.
const vmBackendInRepo = existsSync(join(__dirname, '../../../scripts/build-vm-image.sh'))
const vmRequirement = (name: string, probe: () => string | undefined) =>
  vmBackendInRepo ? requirement(name, probe) : (console.warn(`[skip] ${name}: this checkout has no vm backend yet (scripts/build-vm-image.sh)`), { ok: false })
const qemu = vmRequirement('qemu', () => {
  try {
    execFileSync(QEMU, ['--version'], { stdio: 'ignore', timeout: 10_000 })
    return undefined
  } catch {
    return `${QEMU} is not installed (apt-get install --no-install-recommends qemu-system-x86 qemu-utils)`
  }
})

/** The newest built guest image under the VM cache (kernel + initramfs), if any. */
function builtImage(): { kernel: string; initrd: string } | undefined {
  const root = join(process.env.CORRAL_CACHE_DIR || '/var/cache/corral', 'vm')
  if (!existsSync(root)) return undefined
  const dirs = readdirSync(root)
    .map((d) => join(root, d))
    .filter((d) => existsSync(join(d, 'vmlinux')) && existsSync(join(d, 'initrd.cpio')))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)
  return dirs[0] ? { kernel: join(dirs[0], 'vmlinux'), initrd: join(dirs[0], 'initrd.cpio') } : undefined
}
const image = qemu.ok ? vmRequirement('the vm guest image', () => (builtImage() ? undefined : 'no built VM guest image (npm run vm:image)')) : { ok: false }

async function qmp(path: string, command: string): Promise<void> {
  const s = net.connect(path)
  await new Promise<void>((r, j) => s.once('connect', () => r()).once('error', j))
  s.write('{"execute":"qmp_capabilities"}\n' + JSON.stringify({ execute: command }) + '\n')
  await new Promise((r) => s.once('close', r).resume())
}

describe.skipIf(!qemu.ok)('the qemu process of a VM sandbox, hardened', () => {
  let parent: string
  let runDir: string
  let child: ChildProcess
  const runAs = qemuUser()
  let args: string[]

  beforeAll(async () => {
    parent = mkdtempSync(join(tmpdir(), 'corral-vmh-'))
    runDir = makePrivateRunDir(parent)
    const seccomp = await probeQemuSeccomp(QEMU)
    expect(seccomp).toEqual({ ok: true })
    args = ['-M', 'none', '-nodefaults', '-no-user-config', '-display', 'none', '-qmp', `unix:${runDir}/qmp.sock,server=on,wait=off`, ...hardeningArgs({ seccomp: true, runAs })]
    child = spawn(QEMU, args, { stdio: 'ignore' })
    for (let i = 0; i < 200 && !existsSync(join(runDir, 'qmp.sock')); i++) await new Promise((r) => setTimeout(r, 20))
    // -runas takes effect once qemu's set-up is done: wait for it rather than for a time.
    for (let i = 0; i < 200 && runAs && processHardening(child.pid!).uid === 0; i++) await new Promise((r) => setTimeout(r, 20))
  })
  afterAll(() => {
    child?.kill('SIGKILL')
    rmSync(parent, { recursive: true, force: true })
  })

  it('runs under its seccomp filter (Seccomp: 2 in /proc/<pid>/status)', () => {
    expect(processHardening(child.pid!).seccomp).toBe(2)
  })

  it('runs as an unprivileged user, never uid 0', () => {
    const h = processHardening(child.pid!)
    expect(h.uid).not.toBe(0)
    expect(h.euid).not.toBe(0)
    if (runAs) expect(h.uid).toBe(runAs.uid)
    else expect(h.uid).toBe(process.getuid!())
  })

  it('keeps its QMP socket in a directory only Corral may enter, and offers the guest no monitor', () => {
    expect(statSync(runDir).mode & 0o777).toBe(0o700)
    expect(statSync(runDir).uid).toBe(process.getuid!())
    expect(statSync(join(runDir, 'qmp.sock')).isSocket()).toBe(true)
    expect(monitorExposure(args)).toBeUndefined()
  })

  it('still answers QMP from the host and quits on it', async () => {
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
    await qmp(join(runDir, 'qmp.sock'), 'quit')
    expect(await exited).toBe(0)
  })
})

describe.skipIf(!image.ok)('the accelerator probe on the real guest kernel', () => {
  let dir: string
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'corral-accel-'))
  })
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  it('answers tcg without booting anything when there is no KVM device, and keeps the answer', async () => {
    const img = builtImage()!
    const cacheFile = acceleratorCacheFile(dir)
    const first = await chooseAccelerator({ qemu: QEMU, ...img, cacheFile, kvmDevice: join(dir, 'no-kvm') })
    expect(first).toMatchObject({ accel: 'tcg', cached: false })
    expect(first.reason).toMatch(/does not exist/)
    expect(first.qemuVersion).toMatch(/^QEMU emulator version \d+\.\d+/)
    const second = await chooseAccelerator({ qemu: QEMU, ...img, cacheFile, kvmDevice: join(dir, 'no-kvm') })
    expect(second).toMatchObject({ accel: 'tcg', cached: true, reason: first.reason, probedAt: first.probedAt })
  })

  it('sees a boot reach userspace when the accelerator works (the probe under TCG)', async () => {
    const img = builtImage()!
    const r = await probeKvmBoot({ qemu: QEMU, ...img, timeoutMs: 30_000, accel: 'tcg' })
    expect(r).toMatchObject({ ok: true })
  }, 40_000)

  it.skipIf(!existsSync('/dev/kvm'))('answers what a real boot under this host\'s KVM does, with the reason, within the probe timeout', async () => {
    const img = builtImage()!
    const started = Date.now()
    const c = await chooseAccelerator({ qemu: QEMU, ...img, cacheFile: join(dir, 'kvm.json'), timeoutMs: 8000 })
    expect(Date.now() - started).toBeLessThan(20_000)
    if (c.accel === 'kvm') expect(c.reason).toMatch(/reached userspace in \d+ ms/)
    // Here (a nested PVM /dev/kvm) the kernel hangs in early boot: the probe says so and falls back.
    else expect(c.reason).toMatch(/exists but a probe boot under KVM failed: (no kernel output|qemu exited)/)
  }, 30_000)

  it('gives corral doctor the qemu version, the image, the accelerator with its reason and the speed to expect', async () => {
    const img = builtImage()!
    const d = await vmDoctorDetails({ qemu: QEMU, image: img, cacheFile: join(dir, 'kvm.json') })
    expect(d.qemu).toMatch(/^QEMU emulator version/)
    expect(d.image).toMatch(/^built/)
    expect(d.accelerator).toMatch(/^(kvm|tcg): /)
    expect(d.expected_speed).toMatch(/cold boot/)
    expect(d.seccomp).toMatch(/seccomp filter/)
    expect(d.qemu_user).toMatch(process.getuid!() === 0 ? /^nobody \(uid 65534/ : /Corral's own user/)
    const missing = await vmDoctorDetails({ qemu: QEMU, image: { missing: 'the VM guest image abc is not built (run npm run vm:image)' }, cacheFile: join(dir, 'x.json') })
    expect(missing.image).toMatch(/npm run vm:image/)
  })
})
