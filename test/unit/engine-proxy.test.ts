import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpProxyAgent } from 'http-proxy-agent';
import { HttpsProxyAgent } from 'https-proxy-agent';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { createAllowList } from '../../src/engine/outbound/allow-list.js';
import { OutboundNetworkError, OutboundRefusedError, sendOutbound } from '../../src/engine/outbound/outbound-request.js';
import { createOutboundProxy, noProxyMatcher, parseProxyUrl, ProxySettingError } from '../../src/engine/outbound/proxy.js';

const request = (url: string) => ({ method: 'GET', url: new URL(url), headers: {}, body: null, timeoutMs: 2_000, maxBodyBytes: 1024 });

describe('outbound proxy settings', () => {
  it('takes an http:// or https:// proxy URL, with or without credentials', () => {
    expect(parseProxyUrl('http://proxy.example.org:3128').host).toBe('proxy.example.org:3128');
    expect(parseProxyUrl('https://user:p%40ss@proxy.example.org/').username).toBe('user');
  });

  it.each([
    ['proxy.example.org:3128', /must be a URL|must start with http/],
    ['socks5://proxy.example.org:1080', /must start with http:\/\/ or https:\/\/, not socks5:\/\//],
    ['http://proxy.example.org:3128/path', /must name only the proxy/],
    ['http://proxy.example.org:3128/?x=1', /must name only the proxy/],
    ['not a url', /must be a URL/],
  ])('refuses %s', (text, message) => {
    expect(() => parseProxyUrl(text)).toThrow(ProxySettingError);
    expect(() => parseProxyUrl(text)).toThrow(message);
  });

  it('fails at start on a malformed CAREPATH_HTTP_PROXY or CAREPATH_HTTP_NO_PROXY, naming the variable', () => {
    expect(() => loadConfig({ CAREPATH_HTTP_PROXY: 'ftp://proxy:21' })).toThrow(ConfigError);
    expect(() => loadConfig({ CAREPATH_HTTP_PROXY: 'ftp://proxy:21' })).toThrow(/CAREPATH_HTTP_PROXY/);
    expect(() => loadConfig({ CAREPATH_HTTP_NO_PROXY: 'ok.example, 10.0.0.0/99' })).toThrow(/CAREPATH_HTTP_NO_PROXY: "10.0.0.0\/99"/);
    expect(() => loadConfig({ CAREPATH_HTTP_NO_PROXY: 'bad host!' })).toThrow(/CAREPATH_HTTP_NO_PROXY/);
  });

  it('keeps the settings in the config (no proxy by default)', () => {
    expect(loadConfig({}).httpProxy).toBeUndefined();
    expect(loadConfig({}).httpNoProxy).toEqual([]);
    const config = loadConfig({ CAREPATH_HTTP_PROXY: 'http://proxy:3128', CAREPATH_HTTP_NO_PROXY: ' .internal , 10.0.0.0/8,' });
    expect(config.httpProxy).toBe('http://proxy:3128');
    expect(config.httpNoProxy).toEqual(['.internal', '10.0.0.0/8']);
  });
});

describe('CAREPATH_HTTP_NO_PROXY', () => {
  const direct = noProxyMatcher(['example.org', '.hospital.local', '10.0.0.0/8', '192.0.2.7', '[::1]', 'api.partner.net:8443']);

  it('matches a domain and every name under it, with or without the leading dot', () => {
    expect(direct('example.org', 443)).toBe(true);
    expect(direct('api.EXAMPLE.org', 443)).toBe(true);
    expect(direct('notexample.org', 443)).toBe(false);
    expect(direct('hospital.local', 80)).toBe(true);
    expect(direct('ehr.hospital.local', 80)).toBe(true);
  });

  it('matches addresses and CIDRs only for targets written as addresses', () => {
    expect(direct('10.2.3.4', 80)).toBe(true);
    expect(direct('192.0.2.7', 80)).toBe(true);
    expect(direct('192.0.2.8', 80)).toBe(false);
    expect(direct('::1', 80)).toBe(true);
    expect(direct('ten.example.com', 80)).toBe(false);
  });

  it('honours a port when the entry has one', () => {
    expect(direct('api.partner.net', 8443)).toBe(true);
    expect(direct('api.partner.net', 443)).toBe(false);
  });

  it('sends everything direct with *', () => {
    expect(noProxyMatcher(['*'])('anything.example', 443)).toBe(true);
  });

  it('gives no agent for a direct host and one per scheme otherwise', () => {
    const proxy = createOutboundProxy('http://127.0.0.1:3128', ['internal.example'])!;
    const signal = new AbortController().signal;
    expect(proxy.agentFor(new URL('https://ehr.internal.example/fhir'), signal)).toBeNull();
    const https = proxy.agentFor(new URL('https://partner.example/a'), signal);
    const plain = proxy.agentFor(new URL('http://partner.example/a'), signal);
    expect(https).toBeInstanceOf(HttpsProxyAgent);
    expect(plain).toBeInstanceOf(HttpProxyAgent);
    expect(createOutboundProxy(undefined, ['x'])).toBeNull();
  });

  it('names the proxy by host and port only, never with its credentials', () => {
    expect(createOutboundProxy('http://egress:s3cret@proxy.hospital.local:3128', [])!.host).toBe('proxy.hospital.local:3128');
  });
});

describe('allow-list names', () => {
  it('names a host by name or name:port, never by address', () => {
    const list = createAllowList(['partner.example', 'other.example:8443', '10.0.0.0/8', '127.0.0.1']);
    expect(list.namesHost('PARTNER.example', 443)).toBe(true);
    expect(list.namesHost('other.example', 8443)).toBe(true);
    expect(list.namesHost('other.example', 443)).toBe(false);
    expect(list.namesHost('127.0.0.1', 80)).toBe(false);
    expect(list.namesHost('sub.partner.example', 443)).toBe(false);
  });
});

describe('sending through a proxy', () => {
  it('reports a proxy that does not answer as a network failure (worth another try)', async () => {
    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((resolve) => closed.close(() => resolve()));
    const proxy = createOutboundProxy(`http://127.0.0.1:${port}`, []);
    const allow = createAllowList(['partner.example']);
    await expect(sendOutbound(request('https://partner.example/x'), allow, proxy)).rejects.toThrow(OutboundNetworkError);
    await expect(sendOutbound(request('http://partner.example/x'), allow, proxy)).rejects.toThrow(/request failed: ECONNREFUSED/);
  });

  it('sends no request that carries a header the service sets (a blueprint stored before import refused them)', async () => {
    // Through the proxy a Host header became the proxy's target; it must fail before any connection.
    let connections = 0;
    const counting = http.createServer((_req, res) => res.end('ok'));
    counting.on('connection', () => connections++);
    await new Promise<void>((resolve) => counting.listen(0, '127.0.0.1', resolve));
    const proxy = createOutboundProxy(`http://127.0.0.1:${(counting.address() as AddressInfo).port}`, []);
    try {
      const refused: Record<string, string>[] = [{ host: '127.0.0.1' }, { 'transfer-encoding': 'chunked' }, { 'proxy-authorization': 'Basic eA==' }];
      for (const headers of refused) {
        await expect(sendOutbound({ ...request('http://partner.example/x'), headers }, createAllowList(['partner.example']), proxy)).rejects.toThrow(OutboundRefusedError);
        await expect(sendOutbound({ ...request('http://93.184.215.14/x'), headers }, createAllowList([]))).rejects.toThrow(/is set (from the URL|by the service)/);
      }
      await expect(sendOutbound({ ...request('http://partner.example//evil.example/x'), headers: {} }, createAllowList(['partner.example']), proxy)).rejects.toThrow(/its path starts with "\/\/"/);
      expect(connections).toBe(0);
    } finally {
      await new Promise<void>((resolve) => counting.close(() => resolve()));
    }
  });

  it('closes its connection to a proxy that never answers, when the try times out', async () => {
    const open = new Set<unknown>();
    // It never answers, but closes its side when the client closes (a CONNECT socket is half-open).
    const silent = http.createServer(() => undefined);
    silent.on('connect', (_req, socket) => socket.on('end', () => socket.end()));
    silent.on('connection', (socket) => {
      open.add(socket);
      socket.on('close', () => open.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const proxy = createOutboundProxy(`http://127.0.0.1:${(silent.address() as AddressInfo).port}`, []);
    const allow = createAllowList(['partner.example']);
    try {
      for (const url of ['https://partner.example/x', 'http://partner.example/x']) {
        await expect(sendOutbound({ ...request(url), timeoutMs: 100 }, allow, proxy)).rejects.toThrow('no answer within 100 ms');
        await expect.poll(() => open.size).toBe(0);
      }
    } finally {
      silent.closeAllConnections();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });

  it("marks the proxy's own answer (407 without credentials) as the proxy's", async () => {
    const strict = http.createServer((_req, res) => res.writeHead(407, { 'proxy-authenticate': 'Basic realm="egress"' }).end());
    strict.on('connect', (_req, socket) => socket.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="egress"\r\n\r\n'));
    await new Promise<void>((resolve) => strict.listen(0, '127.0.0.1', resolve));
    const proxy = createOutboundProxy(`http://127.0.0.1:${(strict.address() as AddressInfo).port}`, []);
    const allow = createAllowList(['partner.example']);
    try {
      expect(await sendOutbound(request('http://partner.example/x'), allow, proxy)).toMatchObject({ status: 407, fromProxy: true });
      expect(await sendOutbound(request('https://partner.example/x'), allow, proxy)).toMatchObject({ status: 407, fromProxy: true });
    } finally {
      await new Promise<void>((resolve) => strict.close(() => resolve()));
    }
  });
});
