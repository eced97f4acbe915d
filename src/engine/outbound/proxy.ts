/**
 * The forward proxy `http` automations go through (`CAREPATH_HTTP_PROXY`), and the hosts they
 * reach directly instead (`CAREPATH_HTTP_NO_PROXY`). Many hospital networks let nothing out
 * but through such a proxy; without one, calls to partners outside simply time out.
 *
 * `https:` targets go through a CONNECT tunnel (https-proxy-agent): the proxy sees the host and
 * port, TLS runs end to end and the target's certificate is verified as on a direct call.
 * `http:` targets are sent to the proxy in absolute form (http-proxy-agent), as proxies expect
 * (many allow CONNECT to port 443 only). Credentials in the proxy URL go as
 * `Proxy-Authorization: Basic`.
 *
 * The allow-list still decides (outbound-request.ts): the target is checked before anything
 * is sent. What the proxy then connects to is the proxy's own business and rules.
 */
import type { Agent } from 'node:http';
import { BlockList, isIP } from 'node:net';
import { HttpProxyAgent } from 'http-proxy-agent';
import { HttpsProxyAgent } from 'https-proxy-agent';
import { targetOf, unbracket } from './target.js';

export interface OutboundProxy {
  /** The proxy's `host:port`, never its credentials: what a log line may name. */
  readonly host: string;
  /**
   * The agent that carries a request for `url` through the proxy; null when it goes direct.
   * `signal` ends the connection to the proxy when the request gives up, also while the proxy
   * has not yet answered a CONNECT (destroying the request alone leaves that socket open).
   */
  agentFor(url: URL, signal: AbortSignal): Agent | null;
}

export class ProxySettingError extends Error {}

/** Checks `CAREPATH_HTTP_PROXY`: an http:// or https:// URL of a proxy, nothing after the port. */
export function parseProxyUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ProxySettingError('CAREPATH_HTTP_PROXY must be a URL such as http://proxy.example.org:3128');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ProxySettingError(`CAREPATH_HTTP_PROXY must start with http:// or https://, not ${url.protocol}//`);
  }
  if (url.hostname === '' || (url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.hash !== '') {
    throw new ProxySettingError('CAREPATH_HTTP_PROXY must name only the proxy: scheme, optional user:password@, host and port');
  }
  return url;
}

/** Builds the route from the settings; null without a proxy. Malformed settings are an error at start. */
export function createOutboundProxy(proxyUrl: string | undefined, noProxy: readonly string[]): OutboundProxy | null {
  if (proxyUrl === undefined) return null;
  const proxy = parseProxyUrl(proxyUrl);
  const direct = noProxyMatcher(noProxy);
  return {
    host: proxy.host,
    agentFor(url, signal) {
      const { host, port } = targetOf(url);
      if (direct(host, port)) return null;
      // An agent per call, keeping no connection (each call connects afresh, as direct calls
      // do); the signal goes to the socket it opens to the proxy.
      return url.protocol === 'https:' ? new HttpsProxyAgent(proxy, { signal }) : new HttpProxyAgent(proxy, { signal });
    },
  };
}

/**
 * `CAREPATH_HTTP_NO_PROXY` entries, as curl and most tools read NO_PROXY: `*` (everything
 * direct), a domain (`example.org` or `.example.org`: the domain and every name under it), an
 * IP address, a CIDR (targets written as an address in it), each optionally with `:port`.
 */
export function noProxyMatcher(entries: readonly string[]): (host: string, port: number) => boolean {
  const rules: { name?: string; ranges?: BlockList; port: number | null }[] = [];
  let everything = false;
  for (const raw of entries) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    if (entry === '*') {
      everything = true;
      continue;
    }
    const withPort = /^(\[[0-9a-f:.]+\]|[^:\s]+):(\d{1,5})$/.exec(entry);
    const target = withPort ? unbracket(withPort[1]) : unbracket(entry);
    const port = withPort ? Number(withPort[2]) : null;
    const cidr = /^(.+)\/(\d{1,3})$/.exec(target);
    if (cidr || isIP(target) !== 0) {
      const [address, prefix] = cidr ? [cidr[1], Number(cidr[2])] : [target, isIP(target) === 4 ? 32 : 128];
      const family = isIP(address);
      if (family === 0 || prefix > (family === 4 ? 32 : 128)) {
        throw new ProxySettingError(`CAREPATH_HTTP_NO_PROXY: "${raw}" is not an address or CIDR such as 10.0.0.0/8`);
      }
      const ranges = new BlockList();
      ranges.addSubnet(address, prefix, family === 4 ? 'ipv4' : 'ipv6');
      rules.push({ ranges, port });
      continue;
    }
    if (!/^\.?[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(target)) {
      throw new ProxySettingError(`CAREPATH_HTTP_NO_PROXY: "${raw}" is not a host, domain, address or CIDR`);
    }
    rules.push({ name: target.replace(/^\./, ''), port });
  }
  return (host, port) => {
    if (everything) return true;
    const name = unbracket(host.toLowerCase());
    const family = isIP(name);
    return rules.some((rule) => {
      if (rule.port !== null && rule.port !== port) return false;
      if (rule.ranges) return family !== 0 && rule.ranges.check(name, family === 4 ? 'ipv4' : 'ipv6');
      return name === rule.name || name.endsWith(`.${rule.name}`);
    });
  };
}
