import { describe, expect, it } from 'vitest'
import { acceleratorArgs, expectedSpeed } from '../../../../src/main/hands/vm/accel'
import { hardeningArgs, monitorExposure, QEMU_SECCOMP, qemuUser } from '../../../../src/main/hands/vm/hardening'

describe('qemu hardening arguments', () => {
  it('adds the seccomp filter with every deny option when qemu runs as Corral\'s own user', () => {
    expect(hardeningArgs({ seccomp: true })).toEqual(['-sandbox', 'on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny'])
    expect(QEMU_SECCOMP.split(',')).toEqual(['on', 'obsolete=deny', 'elevateprivileges=deny', 'spawn=deny', 'resourcecontrol=deny'])
  })

  it('drops root with -runas and lets only that setuid through the filter (qemu 7.2 drops after installing it)', () => {
    expect(hardeningArgs({ seccomp: true, runAs: { user: 'nobody', uid: 65534, gid: 65534 } })).toEqual(['-sandbox', 'on,obsolete=deny,elevateprivileges=allow,spawn=deny,resourcecontrol=deny', '-runas', 'nobody'])
  })

  it('leaves out what this host cannot give: no filter when qemu refuses it, no other user when Corral is not root', () => {
    expect(hardeningArgs({ seccomp: false })).toEqual([])
    expect(qemuUser({ uid: 1000 })).toBeUndefined()
  })

  it('refuses a user name that is not a plain login name', () => {
    expect(() => qemuUser({ uid: 0, user: 'nobody;id' })).toThrow(/not a plain user name/)
  })
})

describe('monitorExposure', () => {
  it('finds no monitor on a command line with QMP only on a unix socket', () => {
    expect(monitorExposure(['-nodefaults', '-display', 'none', '-serial', 'file:/r/console.log', '-qmp', 'unix:/r/qmp.sock,server=on,wait=off', '-chardev', 'stdio,id=runner,signal=off'])).toBeUndefined()
  })

  it.each([
    [['-monitor', 'stdio'], /-monitor stdio/],
    [['-mon', 'chardev=c0'], /-mon/],
    [['-serial', 'mon:stdio'], /-serial mon:stdio/],
    [['-chardev', 'stdio,id=c,mux=on'], /mux=on/],
    [['-nographic'], /-nographic/],
    [['-qmp', 'tcp:127.0.0.1:4444,server=on'], /QMP only on a unix socket/],
  ])('names %j as a monitor the guest or its serial line could reach', (args, why) => {
    expect(monitorExposure(args)).toMatch(why)
  })
})

describe('accelerator arguments', () => {
  it('uses the host CPU under KVM and the emulated max CPU under TCG, and says what speed each gives', () => {
    expect(acceleratorArgs('kvm')).toEqual(['-accel', 'kvm', '-cpu', 'host'])
    expect(acceleratorArgs('tcg')).toEqual(['-accel', 'tcg', '-cpu', 'max'])
    expect(expectedSpeed('tcg')).toMatch(/5 s per cold boot.*0\.2 s per snapshot restore/)
    expect(expectedSpeed('kvm')).toMatch(/sub-second/)
  })
})
