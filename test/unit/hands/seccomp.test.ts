import { describe, expect, it } from 'vitest'
import { auditArch, CLONE_NEW_NAMESPACES, DENIED_SYSCALLS, ENOSYS, EPERM, evaluateSeccomp, seccompFilterBytes, seccompProgram, SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS, syscallNumber, type SeccompArch } from '../../../src/main/hands/bubblewrap/seccomp'

const eperm = SECCOMP_RET_ERRNO | EPERM
const enosys = SECCOMP_RET_ERRNO | ENOSYS
const CLONE_THREAD_FLAGS = 0x003d0f00 // what glibc's pthread_create passes
const CLONE_NEWUSER = 0x10000000

describe('the bubblewrap seccomp filter', () => {
  for (const arch of ['x86_64', 'aarch64'] as SeccompArch[]) {
    describe(arch, () => {
      const program = seccompProgram(arch)
      const call = (nr: number, arg0 = 0) => evaluateSeccomp(program, { arch: auditArch(arch), nr, arg0 })

      it('refuses every listed syscall the architecture has with EPERM', () => {
        const listed = DENIED_SYSCALLS.filter((name) => syscallNumber(arch, name) !== undefined)
        expect(listed.length).toBeGreaterThan(40)
        for (const name of listed) expect(call(syscallNumber(arch, name)!), name).toBe(eperm)
      })

      it('allows ordinary syscalls (read, write, openat, execve, mmap, a thread\'s clone)', () => {
        const ordinary = arch === 'x86_64' ? { read: 0, write: 1, openat: 257, execve: 59, mmap: 9, wait4: 61 } : { read: 63, write: 64, openat: 56, execve: 221, mmap: 222, wait4: 260 }
        for (const [name, nr] of Object.entries(ordinary)) expect(call(nr), name).toBe(SECCOMP_RET_ALLOW)
        expect(call(syscallNumber(arch, 'clone')!, CLONE_THREAD_FLAGS)).toBe(SECCOMP_RET_ALLOW)
        expect(call(syscallNumber(arch, 'unshare')!, 0x400 /* CLONE_FILES */)).toBe(SECCOMP_RET_ALLOW)
      })

      it('refuses clone and unshare with any CLONE_NEW* flag, and clone3 with ENOSYS', () => {
        for (let bit = 0; bit < 32; bit++) {
          const flag = (1 << bit) >>> 0
          if (!(CLONE_NEW_NAMESPACES & flag)) continue
          expect(call(syscallNumber(arch, 'clone')!, flag | CLONE_THREAD_FLAGS)).toBe(eperm)
          expect(call(syscallNumber(arch, 'unshare')!, flag)).toBe(eperm)
        }
        expect(call(syscallNumber(arch, 'unshare')!, CLONE_NEWUSER)).toBe(eperm)
        expect(call(syscallNumber(arch, 'clone3')!)).toBe(enosys)
      })

      it('kills a process calling through another architecture\'s ABI', () => {
        const other = arch === 'x86_64' ? 0x40000003 /* i386 */ : 0x40000028 /* arm */
        expect(evaluateSeccomp(program, { arch: other, nr: 0 })).toBe(SECCOMP_RET_KILL_PROCESS)
      })

      it('encodes 8 bytes per instruction, little-endian, starting with a load of the architecture', () => {
        const bytes = seccompFilterBytes(arch)
        expect(bytes.length).toBe(program.length * 8)
        expect([bytes.readUInt16LE(0), bytes[2], bytes[3], bytes.readUInt32LE(4)]).toEqual([0x20, 0, 0, 4])
        expect(bytes.readUInt32LE(12)).toBe(auditArch(arch))
      })
    })
  }

  it('refuses x32 system calls on x86-64 with ENOSYS', () => {
    expect(evaluateSeccomp(seccompProgram('x86_64'), { arch: auditArch('x86_64'), nr: 0x40000000 + 1 })).toBe(enosys)
  })
})
