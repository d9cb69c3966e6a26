import { describe, expect, it } from 'vitest'
import { qemuArgs, type QemuArgsParams, startLine, VM_FOLDER_SLOTS } from '../../../../src/main/hands/vm/qemu-args'
import { shapeKey, type VmShape } from '../../../../src/main/hands/vm/templates'

const image = { key: 'abc123def456', dir: '/cache/vm/abc', kernel: '/cache/vm/abc/vmlinux', initrd: '/cache/vm/abc/initrd.cpio', rootfs: '/cache/vm/abc/rootfs.ext4', kernelRelease: '6.1.0-57-amd64' }
const base: QemuArgsParams = {
  image,
  accel: 'tcg',
  memoryMb: 512,
  vcpus: 1,
  runDir: '/data/vm/run/sesn_1-aa',
  workspaceDir: '/data/vm/workspaces/sesn_1',
  folderDirs: Array.from({ length: VM_FOLDER_SLOTS }, () => '/data/vm/run/sesn_1-aa/empty'),
  runnerEnv: { CORRAL_WORKSPACE: '/workspace', CORRAL_ROOTS: '/mnt/session:/mnt/skills' },
  incoming: false,
}
const value = (args: string[], flag: string) => args.filter((_, i) => args[i - 1] === flag)

describe('the vm backend\'s qemu command line', () => {
  it('gives the guest no network device, no default devices, no display and no monitor but QMP in its run directory', () => {
    const args = qemuArgs(base)
    expect(args).toEqual(expect.arrayContaining(['-nodefaults', '-no-user-config', '-nic', 'none', '-display', 'none', '-no-reboot']))
    expect(args.some((a) => /^-(netdev|net|monitor|mon)$/.test(a))).toBe(false)
    expect(args.join(' ')).not.toMatch(/virtio-net|e1000|mon:/)
    expect(value(args, '-qmp')).toEqual(['unix:/data/vm/run/sesn_1-aa/qmp.sock,server=on,wait=off'])
    expect(value(args, '-M')).toEqual(['q35'])
  })

  it('takes memory and vCPUs from the settings and the accelerator from the probe', () => {
    const args = qemuArgs({ ...base, memoryMb: 2048, vcpus: 2, accel: 'kvm' })
    expect(value(args, '-m')).toEqual(['2048'])
    expect(value(args, '-smp')).toEqual(['2'])
    expect(value(args, '-accel')).toEqual(['kvm'])
    expect(value(qemuArgs(base), '-accel')).toEqual(['tcg'])
    expect(value(qemuArgs(base), '-cpu')).toEqual(['max'])
  })

  it('restores from fd 3 only when asked, with the same devices in the same order as the cold boot', () => {
    const cold = qemuArgs(base)
    const warm = qemuArgs({ ...base, incoming: true, workspaceDir: '/elsewhere/ws' })
    expect(cold).not.toContain('-incoming')
    expect(value(warm, '-incoming')).toEqual(['fd:3'])
    expect(value(warm, '-device')).toEqual(value(cold, '-device'))
  })

  it('puts the runner\'s settings on the kernel command line and refuses a value that would split it', () => {
    expect(value(qemuArgs(base), '-append')[0]).toContain('corral.env.CORRAL_ROOTS=/mnt/session:/mnt/skills')
    expect(() => qemuArgs({ ...base, runnerEnv: { CORRAL_ROOTS: '/mnt/my files' } })).toThrow(/cannot pass CORRAL_ROOTS="\/mnt\/my files" to its runner \(no spaces/)
    expect(() => qemuArgs({ ...base, workspaceDir: '/data/a,b' })).toThrow(/a comma ends a qemu option/)
    expect(() => qemuArgs({ ...base, folderDirs: [] })).toThrow(/folder slots/)
  })

  it('appends the hardening arguments it is given', () => {
    expect(qemuArgs({ ...base, hardening: ['-sandbox', 'on'] }).slice(-2)).toEqual(['-sandbox', 'on'])
  })
})

describe('the guest\'s start line', () => {
  it('carries the host clock and each share as tag, guest path and mode', () => {
    expect(startLine({ now: 1_700_000_000_123, shares: [{ tag: 'ws', target: '/workspace', readOnly: false }, { tag: 'f1', target: '/mnt/skills', readOnly: true }] })).toBe('start 1700000000 ws,/workspace,rw f1,/mnt/skills,ro\n')
  })

  it('carries a guest path with spaces, commas or other letters as one word, each such byte as \\0ooo', () => {
    expect(startLine({ now: 0, shares: [{ tag: 'f1', target: '/workspace/my dir,é', readOnly: false }] })).toBe('start 0 f1,/workspace/my\\0040dir\\0054\\0303\\0251,rw\n')
  })

  it('refuses a guest path with .. segments, control characters or no leading slash', () => {
    expect(() => startLine({ now: 0, shares: [{ tag: 'f1', target: '/workspace/../etc', readOnly: false }] })).toThrow(/cannot mount a share at "\/workspace\/..\/etc" \(an absolute guest path without .. segments or control characters\)/)
    expect(() => startLine({ now: 0, shares: [{ tag: 'f1', target: '/workspace/a\nb', readOnly: false }] })).toThrow(/cannot mount a share/)
    expect(() => startLine({ now: 0, shares: [{ tag: 'f1', target: 'workspace/x', readOnly: false }] })).toThrow(/cannot mount a share/)
  })
})

describe('template shapes', () => {
  it('gives VMs another template when memory, vCPUs, runner settings, qemu or the image differ', () => {
    const shape: VmShape = { image, accel: 'tcg', memoryMb: 512, vcpus: 1, runnerEnv: base.runnerEnv, qemuVersion: 'QEMU emulator version 7.2.22', hardening: [] }
    const key = shapeKey(shape)
    expect(shapeKey({ ...shape })).toBe(key)
    for (const other of [{ memoryMb: 1024 }, { vcpus: 2 }, { runnerEnv: { CORRAL_WORKSPACE: '/workspace' } }, { qemuVersion: 'QEMU emulator version 8.0' }, { image: { ...image, key: 'fff' } }, { accel: 'kvm' as const }]) {
      expect(shapeKey({ ...shape, ...other })).not.toBe(key)
    }
  })
})
