/**
 * The name lookup of an `http` automation's call: inside the try's timeout, and never holding
 * more than a few of libuv's threads (getaddrinfo runs on them, and so do the file system calls
 * every other request waits for, such as the SQLite WAL flush of every answered write).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

type LookupCallback = (error: NodeJS.ErrnoException | null, addresses: { address: string; family: number }[]) => void;
const pending: LookupCallback[] = [];
let answerWith: { address: string; family: number }[] | null = null;

vi.mock('node:dns', async (importOriginal) => {
  const original = await importOriginal<typeof import('node:dns')>();
  const lookup = (_host: string, _options: unknown, callback: LookupCallback) => {
    if (answerWith) setImmediate(() => callback(null, answerWith!));
    else pending.push(callback);
  };
  return { ...original, default: { ...original, lookup }, lookup };
});

const { createAllowList } = await import('../../src/engine/outbound/allow-list.js');
const { MAX_OUTBOUND_LOOKUPS, OutboundNetworkError, OutboundRefusedError, sendOutbound } = await import('../../src/engine/outbound/outbound-request.js');

const request = (url: string, timeoutMs = 200) => ({ method: 'GET', url: new URL(url), headers: {}, body: null, timeoutMs, maxBodyBytes: 1024 });
const allow = createAllowList(['127.0.0.1']);

/** Lets every stalled lookup answer (as a slow DNS server finally does), with `address`. */
function answerStalled(address: string): void {
  for (const callback of pending.splice(0)) callback(null, [{ address, family: 4 }]);
}

describe('the name lookup of an outbound call', () => {
  beforeEach(() => {
    pending.length = 0;
    answerWith = null;
  });
  afterEach(() => answerStalled('127.0.0.1'));

  it('counts against the try\'s timeout: a DNS server that never answers fails the try in time', async () => {
    const started = Date.now();
    const outcome = sendOutbound(request('http://slow-dns.example/x', 200), allow);
    await expect(outcome).rejects.toThrow(OutboundNetworkError);
    await expect(outcome).rejects.toThrow(/could not resolve slow-dns\.example within 200 ms/);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('runs at most 2 lookups at once; the others wait for a free one, within their own timeout', async () => {
    expect(MAX_OUTBOUND_LOOKUPS).toBe(2);
    const calls = Array.from({ length: 10 }, (_, i) => sendOutbound(request(`http://slow-${i}.example/x`, 300), allow).catch((error: Error) => error));
    await new Promise((wake) => setTimeout(wake, 50));
    expect(pending).toHaveLength(MAX_OUTBOUND_LOOKUPS);
    const outcomes = await Promise.all(calls);
    for (const outcome of outcomes) expect(outcome).toBeInstanceOf(OutboundNetworkError);
    // The callers gave up, the threads did not: no new lookup starts until a stalled one ends.
    expect(pending).toHaveLength(MAX_OUTBOUND_LOOKUPS);
    const late = sendOutbound(request('http://late.example/x', 300), allow).catch((error: Error) => error);
    await new Promise((wake) => setTimeout(wake, 50));
    expect(pending).toHaveLength(MAX_OUTBOUND_LOOKUPS);
    answerStalled('127.0.0.1');
    await new Promise((wake) => setTimeout(wake, 20));
    expect(pending).toHaveLength(1);
    answerStalled('10.0.0.1');
    expect(await late).toBeInstanceOf(OutboundRefusedError);
  });

  it('leaves what is left of the timeout to the exchange once the name is resolved', async () => {
    const server = http.createServer((_req, res) => res.end('ok'));
    await new Promise<void>((ready) => server.listen(0, '127.0.0.1', ready));
    try {
      const { port } = server.address() as AddressInfo;
      answerWith = [{ address: '127.0.0.1', family: 4 }];
      const answer = await sendOutbound(request(`http://partner.example:${port}/x`, 2_000), createAllowList([`partner.example:${port}`]));
      expect(answer).toMatchObject({ status: 200, body: 'ok' });
    } finally {
      server.close();
    }
  });
});
