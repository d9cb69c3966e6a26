import { BlockList, isIP } from 'node:net'

/*
 * Which destinations the egress proxy refuses after it has resolved a name itself: anything
 * that is not the public internet. Metadata services (169.254.169.254, fd00:ec2::254,
 * 100.100.100.200) fall inside the link-local, unique-local and shared (CGNAT) ranges.
 */

const V4_BLOCKED: Array<[string, number, string]> = [
  ['0.0.0.0', 8, 'this network'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared address space (carrier-grade NAT, cloud metadata)'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local (cloud metadata)'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'IETF protocol assignments'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
]

const V6_BLOCKED: Array<[string, number, string]> = [
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['64:ff9b:1::', 48, 'local-use NAT64 (translates to IPv4 addresses of the local network)'],
  ['100::', 64, 'discard'],
  ['fc00::', 7, 'unique local (private, cloud metadata)'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local'],
  ['ff00::', 8, 'multicast'],
]

const v4 = new BlockList()
const v4Reasons: Array<[BlockList, string]> = V4_BLOCKED.map(([net, prefix, why]) => {
  v4.addSubnet(net, prefix, 'ipv4')
  const one = new BlockList()
  one.addSubnet(net, prefix, 'ipv4')
  return [one, `${net}/${prefix} ${why}`]
})
const v6Reasons: Array<[BlockList, string]> = V6_BLOCKED.map(([net, prefix, why]) => {
  const one = new BlockList()
  one.addSubnet(net, prefix, 'ipv6')
  return [one, `${net}/${prefix} ${why}`]
})

/** Expands an IPv6 address to its 8 groups (numbers). */
function v6Groups(ip: string): number[] | undefined {
  let s = ip.toLowerCase()
  const zone = s.indexOf('%')
  if (zone >= 0) s = s.slice(0, zone)
  // A dotted IPv4 tail (::ffff:1.2.3.4) becomes two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(s)
  if (dotted) {
    const o = dotted[1]!.split('.').map(Number)
    s = s.slice(0, -dotted[1]!.length) + `${((o[0]! << 8) | o[1]!).toString(16)}:${((o[2]! << 8) | o[3]!).toString(16)}`
  }
  const [head, tail] = s.split('::') as [string, string | undefined]
  const h = head ? head.split(':') : []
  const t = tail ? tail.split(':') : []
  const fill = tail === undefined ? 0 : 8 - h.length - t.length
  const groups = [...h, ...Array(fill).fill('0'), ...t].map((g) => parseInt(g, 16))
  return groups.length === 8 && groups.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? groups : undefined
}

const v4FromGroups = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`

/**
 * The IPv4 address an IPv6 address carries, for the forms that reach IPv4 hosts: mapped
 * (::ffff:a.b.c.d), SIIT IPv4-translated (::ffff:0:a.b.c.d), IPv4-compatible (::a.b.c.d),
 * well-known NAT64 (64:ff9b::/96) and 6to4 (2002::/16). The local-use NAT64 prefix
 * (64:ff9b:1::/48) is refused as a whole: where its operator puts the IPv4 bits depends on a
 * prefix length the proxy cannot know.
 */
export function embeddedIPv4(ip: string): string | undefined {
  const g = v6Groups(ip)
  if (!g) return undefined
  const zeros = (n: number) => g.slice(0, n).every((x) => x === 0)
  if (zeros(5) && g[5] === 0xffff) return v4FromGroups(g[6]!, g[7]!)
  if (zeros(4) && g[4] === 0xffff && g[5] === 0) return v4FromGroups(g[6]!, g[7]!)
  if (zeros(6) && (g[6] !== 0 || g[7]! > 1)) return v4FromGroups(g[6]!, g[7]!)
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return v4FromGroups(g[6]!, g[7]!)
  if (g[0] === 0x2002) return v4FromGroups(g[1]!, g[2]!)
  return undefined
}

/**
 * Why the proxy must not connect to `ip`, or undefined when it is a public address.
 * Not an IP literal at all → refused too (the caller resolves names first).
 */
export function forbiddenAddressReason(ip: string): string | undefined {
  const family = isIP(ip.split('%')[0]!)
  if (family === 4) {
    if (!v4.check(ip, 'ipv4')) return undefined
    return v4Reasons.find(([b]) => b.check(ip, 'ipv4'))?.[1] ?? 'blocked range'
  }
  if (family === 6) {
    const inner = embeddedIPv4(ip)
    if (inner) {
      const why = forbiddenAddressReason(inner)
      return why ? `${why} (embedded in ${ip})` : undefined
    }
    const bare = ip.split('%')[0]!
    for (const [b, why] of v6Reasons) if (b.check(bare, 'ipv6')) return why
    return undefined
  }
  return `${JSON.stringify(ip)} is not an IP address`
}

/** Host names refused before any lookup: they name this machine or a cloud's internals. */
export function forbiddenHostnameReason(host: string): string | undefined {
  const h = host.toLowerCase().replace(/\.$/, '')
  if (h === 'localhost' || h.endsWith('.localhost')) return 'names this machine'
  if (h === 'metadata' || h === 'metadata.google.internal' || (h.startsWith('metadata.') && h.endsWith('.internal'))) return 'names a cloud metadata service'
  return undefined
}
