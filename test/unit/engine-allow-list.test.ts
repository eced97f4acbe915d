import { describe, expect, it } from 'vitest';
import { AllowListEntryError, createAllowList } from '../../src/engine/outbound/allow-list.js';

describe('http allow-list', () => {
  const none = createAllowList([]);

  it('allows public addresses, v4 and v6', () => {
    expect(none.refusal('example.org', 443, '93.184.216.34')).toBeNull();
    expect(none.refusal('example.org', 443, '2606:2800:220:1:248:1893:25c8:1946')).toBeNull();
    expect(none.refusal('x', 80, '::ffff:93.184.216.34')).toBeNull();
  });

  it.each([
    '127.0.0.1', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1',
    '0.0.0.0', '192.0.2.1', '198.18.0.1', '224.0.0.1', '255.255.255.255',
    '::1', '::', 'fe80::1', 'fc00::1', 'fd12:3456::1', 'ff02::1', '2001:db8::1', '2002:0a00:0001::1',
    '::ffff:127.0.0.1', '::ffff:7f00:1', '64:ff9b::10.0.0.1',
    // IPv4 wrapped the older ways (URLs write [::127.0.0.1] as ::7f00:1, [::ffff:0:127.0.0.1] as ::ffff:0:7f00:1).
    '::7f00:1', '::a00:1', '::ffff:0:7f00:1', '::ffff:0:a9fe:a9fe',
    // NAT64 of 0.0.0.0/8 ("this host" on Linux), written with the zeros compressed.
    '64:ff9b::', '64:ff9b::a', '64:ff9b::0.0.0.10', '64:ff9b:0:0:0:0:7f00:1',
  ])('refuses the non-public address %s', (address) => {
    expect(none.refusal('h', 80, address)).toMatch(/non-public/);
  });

  it('does not refuse 172.32.0.1 (just outside 172.16/12)', () => {
    expect(none.refusal('h', 80, '172.32.0.1')).toBeNull();
  });

  it('allows a listed host name, any port', () => {
    const list = createAllowList(['hooks.internal']);
    expect(list.refusal('hooks.internal', 8443, '10.0.0.5')).toBeNull();
    expect(list.refusal('HOOKS.internal', 80, '10.0.0.5')).toBeNull();
    expect(list.refusal('other.internal', 80, '10.0.0.5')).not.toBeNull();
  });

  it('allows host:port only on that port, by name or by address', () => {
    const list = createAllowList(['127.0.0.1:9099', 'ledger.local:8080']);
    expect(list.refusal('127.0.0.1', 9099, '127.0.0.1')).toBeNull();
    expect(list.refusal('localhost', 9099, '127.0.0.1')).toBeNull();
    expect(list.refusal('127.0.0.1', 9100, '127.0.0.1')).not.toBeNull();
    expect(list.refusal('ledger.local', 8080, '192.168.0.9')).toBeNull();
    expect(list.refusal('ledger.local', 8081, '192.168.0.9')).not.toBeNull();
  });

  it('allows addresses inside a listed CIDR, and a bare listed address', () => {
    const list = createAllowList(['10.20.0.0/16', 'fd00::/8', '192.168.5.5']);
    expect(list.refusal('a', 80, '10.20.3.4')).toBeNull();
    expect(list.refusal('a', 80, '10.21.0.1')).not.toBeNull();
    expect(list.refusal('a', 80, 'fd00::1')).toBeNull();
    expect(list.refusal('a', 80, '192.168.5.5')).toBeNull();
    expect(list.refusal('a', 80, '192.168.5.6')).not.toBeNull();
  });

  it('rejects a malformed CIDR at start', () => {
    expect(() => createAllowList(['10.0.0.0/33'])).toThrow(AllowListEntryError);
    expect(() => createAllowList(['nonsense/8'])).toThrow(AllowListEntryError);
  });

  it('rejects at start an entry that is no host name, host:port, address or CIDR, naming it', () => {
    for (const entry of ['exa mple.com', 'host:99999', 'host:0', 'not/a/cidr', 'http://lab.example', 'lab.example/path', '*.example.org', 'a..b']) {
      expect(() => createAllowList([entry]), entry).toThrow(new AllowListEntryError(`CAREPATH_HTTP_ALLOW: "${entry}" is not a host name, host:port (port 1–65535), IP address or CIDR such as 10.0.0.0/8`));
    }
    // The forms it takes, in any case, with a trailing dot, an underscore, IPv6 in brackets.
    expect(() => createAllowList(['Lab.Example.ORG', 'lab.example.', 'svc_a.internal:8443', '[::1]:9099', '::1', '10.1.2.3', 'localhost', '127.0.0.1:9099'])).not.toThrow();
  });
});
