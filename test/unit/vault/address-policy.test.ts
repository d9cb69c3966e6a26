import { describe, expect, it } from 'vitest'
import { embeddedIPv4, forbiddenAddressReason, forbiddenHostnameReason } from '../../../src/main/vault/address-policy'
import { hostAllowed, hostMatches } from '../../../src/shared/api/allowed-hosts'

describe('forbiddenAddressReason', () => {
  it.each([
    ['127.0.0.1', /loopback/],
    ['127.255.1.2', /loopback/],
    ['10.1.2.3', /private/],
    ['172.16.0.1', /private/],
    ['172.31.255.255', /private/],
    ['192.168.1.1', /private/],
    ['169.254.169.254', /link-local/],
    ['100.100.100.200', /shared address space/],
    ['0.0.0.0', /this network/],
    ['224.0.0.1', /multicast/],
    ['255.255.255.255', /reserved/],
    ['::1', /loopback/],
    ['::', /unspecified/],
    ['fe80::1', /link-local/],
    ['fe80::1%eth0', /link-local/],
    ['fd00:ec2::254', /unique local/],
    ['fc00::5', /unique local/],
    ['::ffff:127.0.0.1', /loopback.*embedded/],
    ['::ffff:7f00:1', /loopback.*embedded/],
    ['::ffff:169.254.169.254', /link-local.*embedded/],
    ['::ffff:a9fe:a9fe', /link-local.*embedded/],
    ['64:ff9b::a9fe:a9fe', /link-local.*embedded/],
    ['2002:0a00:0001::', /private.*embedded/],
    ['::10.0.0.1', /private.*embedded/],
    ['ff02::1', /multicast/],
    ['64:ff9b:1::7f00:1', /local-use NAT64/],
    ['64:ff9b:1:a9fe:a9:fe00::', /local-use NAT64/],
    ['64:ff9b:1::808:808', /local-use NAT64/],
    ['::ffff:0:127.0.0.1', /loopback.*embedded/],
    ['::ffff:0:7f00:1', /loopback.*embedded/],
    ['::ffff:0:a9fe:a9fe', /link-local.*embedded/],
    ['::ffff:0:a00:1', /private.*embedded/],
    ['not-an-ip', /not an IP address/],
  ])('refuses %s', (ip, why) => {
    expect(forbiddenAddressReason(ip)).toMatch(why)
  })

  it.each(['93.184.216.34', '8.8.8.8', '172.32.0.1', '100.128.0.1', '2606:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808', '::ffff:0:8.8.8.8'])('allows the public address %s', (ip) => {
    expect(forbiddenAddressReason(ip)).toBeUndefined()
  })
})

describe('embeddedIPv4', () => {
  it('finds the IPv4 address in mapped, SIIT-translated, NAT64 and 6to4 forms and none in a plain IPv6 address', () => {
    expect([embeddedIPv4('::ffff:1.2.3.4'), embeddedIPv4('::ffff:0:102:304'), embeddedIPv4('64:ff9b::102:304'), embeddedIPv4('2002:102:304::1'), embeddedIPv4('2606:4700::1')]).toEqual(['1.2.3.4', '1.2.3.4', '1.2.3.4', '1.2.3.4', undefined])
  })
})

describe('forbiddenHostnameReason', () => {
  it('refuses localhost and metadata names before any lookup, and lets ordinary names through', () => {
    expect(forbiddenHostnameReason('localhost')).toMatch(/this machine/)
    expect(forbiddenHostnameReason('api.localhost.')).toMatch(/this machine/)
    expect(forbiddenHostnameReason('metadata.google.internal')).toMatch(/metadata/)
    expect(forbiddenHostnameReason('api.github.com')).toBeUndefined()
  })
})

describe('hostMatches', () => {
  it('matches an exact host case-insensitively, and a wildcard only for subdomains', () => {
    expect(hostMatches('API.example.com', 'api.example.com')).toBe(true)
    expect(hostMatches('a.example.com', '*.example.com')).toBe(true)
    expect(hostMatches('a.b.example.com', '*.example.com')).toBe(true)
    expect(hostMatches('example.com', '*.example.com')).toBe(false)
    expect(hostMatches('badexample.com', '*.example.com')).toBe(false)
    expect(hostMatches('example.com.evil.net', 'example.com')).toBe(false)
    expect(hostAllowed('x.y', ['a.b', '*.y'])).toBe(true)
    expect(hostAllowed('x.z', ['a.b', '*.y'])).toBe(false)
  })
})
