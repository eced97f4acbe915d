/**
 * Where `http` automations may connect (DESIGN §11, `CAREPATH_HTTP_ALLOW`). Public addresses are
 * always allowed. Private, loopback, link-local, CGNAT, documentation, multicast and other
 * non-public ranges are refused unless an entry allows them: a host name, `host:port`, an IP
 * address, or a CIDR that contains the address. The check runs on the resolved address that
 * the connection then uses, so a name cannot be re-pointed between the check and the connect.
 */
import { BlockList, isIP } from 'node:net';
import { unbracket } from './target.js';

/** Ranges that are not the public internet (IANA special-purpose registries, v4 and v6). */
const NON_PUBLIC_V4: [string, number][] = [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (cloud metadata lives here)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, and the broadcast address
];

const NON_PUBLIC_V6: [string, number][] = [
  ['::', 96], // unspecified, loopback, and IPv4-compatible `::a.b.c.d` (deprecated: wraps any IPv4 address)
  ['::ffff:0:0:0', 96], // SIIT `::ffff:0:a.b.c.d`: wraps any IPv4 address, translated where SIIT runs
  ['64:ff9b:1::', 48], // local-use NAT64
  ['100::', 64], // discard-only
  ['2001::', 23], // IETF protocol assignments (Teredo, ORCHID, …)
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4: wraps any IPv4 address, private ones included
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
];

function nonPublicRanges(): BlockList {
  const list = new BlockList();
  for (const [network, prefix] of NON_PUBLIC_V4) list.addSubnet(network, prefix, 'ipv4');
  for (const [network, prefix] of NON_PUBLIC_V6) list.addSubnet(network, prefix, 'ipv6');
  return list;
}

/**
 * An IPv6 address that carries an IPv4 one (mapped `::ffff:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`),
 * in any of its spellings: read as its eight groups, not matched as text, since `64:ff9b::a`
 * (NAT64 of 0.0.0.10) and `64:ff9b::` are such addresses too (a security review, 2026-11-28).
 */
function embeddedIpv4(address: string): string | null {
  const groups = ipv6Groups(address);
  if (!groups) return null;
  const prefix = groups.slice(0, 6).join(':');
  if (prefix !== '0:0:0:0:0:65535' && prefix !== '100:65435:0:0:0:0') return null;
  const [high, low] = [groups[6], groups[7]];
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.');
}

/** The eight 16-bit groups of an IPv6 address (one `isIP` takes), a dotted IPv4 end included. */
function ipv6Groups(address: string): number[] | null {
  let text = address.toLowerCase();
  const dotted = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number);
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const halves = text.split('::');
  if (halves.length > 2) return null;
  const groupsOf = (part: string) => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)));
  const head = groupsOf(halves[0]);
  const tail = halves.length === 2 ? groupsOf(halves[1]) : [];
  const zeros = halves.length === 2 ? 8 - head.length - tail.length : 0;
  const groups = [...head, ...new Array<number>(Math.max(0, zeros)).fill(0), ...tail];
  return groups.length === 8 && groups.every((group) => Number.isInteger(group) && group >= 0 && group <= 0xffff) ? groups : null;
}

export interface AllowList {
  /** Why a connection to `address` (resolved from `host`, on `port`) is refused, or null when allowed. */
  refusal(host: string, port: number, address: string): string | null;
  /**
   * True when an entry names `host` by name (alone, or with this port). Such a host is allowed
   * wherever it points, so a call through a proxy needs no address for it here.
   */
  namesHost(host: string, port: number): boolean;
}

export class AllowListEntryError extends Error {}

/** A DNS name: letters, digits, `-` and `_` in dot-separated labels. */
const HOST_NAME = /^(?=.{1,253}\.?$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*\.?$/;

function isHostOrAddress(host: string): boolean {
  return isIP(host) !== 0 || HOST_NAME.test(host);
}

/**
 * An entry that is none of the forms: refused at start, naming it. A typo (`exa mple.com`,
 * `host:99999`, `not/a/cidr`) was taken as a host name no call ever has, and the partner stayed
 * refused with no word at start (an operations review).
 */
function malformed(raw: string): AllowListEntryError {
  return new AllowListEntryError(`CAREPATH_HTTP_ALLOW: "${raw}" is not a host name, host:port (port 1–65535), IP address or CIDR such as 10.0.0.0/8`);
}

/** Builds the check from `CAREPATH_HTTP_ALLOW` entries; a malformed entry is an error at start. */
export function createAllowList(entries: readonly string[]): AllowList {
  const nonPublic = nonPublicRanges();
  const allowedRanges = new BlockList();
  const hosts = new Set<string>();
  const hostPorts = new Set<string>();
  for (const raw of entries) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    const cidr = /^(.+)\/(\d{1,3})$/.exec(entry);
    if (cidr) {
      const family = isIP(cidr[1]);
      const prefix = Number(cidr[2]);
      if (family === 0 || prefix > (family === 4 ? 32 : 128)) {
        throw new AllowListEntryError(`CAREPATH_HTTP_ALLOW: "${raw}" is not a CIDR such as 10.0.0.0/8`);
      }
      allowedRanges.addSubnet(cidr[1], prefix, family === 4 ? 'ipv4' : 'ipv6');
      continue;
    }
    const hostPort = /^(\[[0-9a-f:.]+\]|[^:]+):(\d{1,5})$/.exec(entry);
    if (hostPort) {
      const [target, port] = [unbracket(hostPort[1]), Number(hostPort[2])];
      if (!isHostOrAddress(target) || port < 1 || port > 65_535) throw malformed(raw);
      hostPorts.add(`${target}:${port}`);
      continue;
    }
    const host = unbracket(entry);
    if (isIP(host) !== 0) allowedRanges.addAddress(host, isIP(host) === 4 ? 'ipv4' : 'ipv6');
    else if (HOST_NAME.test(host)) hosts.add(host);
    else throw malformed(raw);
  }

  return {
    refusal(host, port, address) {
      const name = unbracket(host.toLowerCase());
      const family = isIP(address);
      if (family === 0) return `"${address}" is not an IP address`;
      const v4 = family === 6 ? embeddedIpv4(address) : null;
      const [checked, checkedFamily] = v4 ? [v4, 'ipv4' as const] : [address, family === 4 ? ('ipv4' as const) : ('ipv6' as const)];
      if (!nonPublic.check(checked, checkedFamily)) return null;
      if (hosts.has(name)) return null;
      if (hostPorts.has(`${name}:${port}`) || hostPorts.has(`${checked}:${port}`)) return null;
      if (allowedRanges.check(checked, checkedFamily)) return null;
      return `${name} resolves to ${address}, a non-public address not listed in CAREPATH_HTTP_ALLOW`;
    },
    namesHost(host, port) {
      const name = unbracket(host.toLowerCase());
      return isIP(name) === 0 && (hosts.has(name) || hostPorts.has(`${name}:${port}`));
    },
  };
}
