import { crc32, deflateRawSync } from 'node:zlib'

/** One file of a zip archive: its path inside the archive (`/`-separated) and its bytes. */
export interface ZipEntry {
  path: string
  bytes: Buffer
}

/**
 * Writes a zip archive (PKZIP 2.0: deflate, or stored when deflate does not shrink it; UTF-8
 * names; no zip64, so each file and the whole archive stay under 4 GiB and 65,535 entries, far
 * above a skill's caps). Each folder on the way to a file gets its own entry first, so `unzip -Z`
 * and the SDK's skill extractor see plain directories (mode 0755) and files (0644). `mtime`
 * stamps every entry, so the same files and time give the same bytes.
 */
export function writeZip(entries: readonly ZipEntry[], mtime: Date): Buffer {
  const { time, date } = dosTime(mtime)
  const locals: Buffer[] = []
  const centrals: Buffer[] = []
  let offset = 0
  const dirs = new Set<string>()
  const add = (name: string, data: Buffer, mode: number, crc: number, size: number) => {
    const nameBytes = Buffer.from(name, 'utf8')
    const deflated = data.length > 0 ? deflateRawSync(data) : Buffer.alloc(0)
    const stored = deflated.length >= data.length
    const body = stored ? data : deflated
    const method = stored ? 0 : 8
    const local = Buffer.alloc(30)
    local.writeUInt32LE(0x04034b50, 0)
    local.writeUInt16LE(20, 4) // version needed: 2.0
    local.writeUInt16LE(0x0800, 6) // flags: names are UTF-8
    local.writeUInt16LE(method, 8)
    local.writeUInt16LE(time, 10)
    local.writeUInt16LE(date, 12)
    local.writeUInt32LE(crc, 14)
    local.writeUInt32LE(body.length, 18)
    local.writeUInt32LE(size, 22)
    local.writeUInt16LE(nameBytes.length, 26)
    local.writeUInt16LE(0, 28)
    const central = Buffer.alloc(46)
    central.writeUInt32LE(0x02014b50, 0)
    central.writeUInt16LE((3 << 8) | 20, 4) // made by: Unix, 2.0 (so the external attributes are a mode)
    central.writeUInt16LE(20, 6)
    central.writeUInt16LE(0x0800, 8)
    central.writeUInt16LE(method, 10)
    central.writeUInt16LE(time, 12)
    central.writeUInt16LE(date, 14)
    central.writeUInt32LE(crc, 16)
    central.writeUInt32LE(body.length, 20)
    central.writeUInt32LE(size, 24)
    central.writeUInt16LE(nameBytes.length, 28)
    // extra, comment, disk, internal attributes: 0
    central.writeUInt32LE((mode << 16) >>> 0, 38)
    central.writeUInt32LE(offset, 42)
    locals.push(local, nameBytes, body)
    centrals.push(central, nameBytes)
    offset += local.length + nameBytes.length + body.length
  }
  for (const e of entries) {
    const segs = e.path.split('/')
    for (let i = 1; i < segs.length; i++) {
      const dir = segs.slice(0, i).join('/') + '/'
      if (dirs.has(dir)) continue
      dirs.add(dir)
      add(dir, Buffer.alloc(0), 0o40755, 0, 0)
    }
    add(e.path, e.bytes, 0o100644, crc32(e.bytes), e.bytes.length)
  }
  const cd = Buffer.concat(centrals)
  const end = Buffer.alloc(22)
  end.writeUInt32LE(0x06054b50, 0)
  const count = entries.length + dirs.size
  end.writeUInt16LE(count, 8)
  end.writeUInt16LE(count, 10)
  end.writeUInt32LE(cd.length, 12)
  end.writeUInt32LE(offset, 16)
  return Buffer.concat([...locals, cd, end])
}

/** MS-DOS date and time fields (local time as UTC: a zip stores no zone), 2-second resolution, from 1980. */
function dosTime(d: Date): { time: number; date: number } {
  const year = Math.max(1980, d.getUTCFullYear())
  return {
    time: (d.getUTCHours() << 11) | (d.getUTCMinutes() << 5) | Math.floor(d.getUTCSeconds() / 2),
    date: ((year - 1980) << 9) | ((d.getUTCMonth() + 1) << 5) | d.getUTCDate(),
  }
}
