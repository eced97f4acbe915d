/**
 * One outbound HTTP request for an `http` automation: the host is resolved first, every address
 * is checked against the allow-list, and the connection is made to those checked addresses
 * only (a custom `lookup`), so DNS cannot hand out another address between check and connect.
 * Redirects are never followed (a 3xx is an answer like any other). The answer body is read up
 * to a cap and the rest discarded. Nothing here logs a body.
 *
 * Through a proxy (proxy.ts) the same check runs first, on the addresses this process resolves
 * for the target; then the proxy connects. A host named in CAREPATH_HTTP_ALLOW needs no address
 * here (proxied networks often resolve outside names at the proxy only). An answer the proxy
 * gave itself is marked as such: https-proxy-agent hands a refused CONNECT's answer to the
 * request as if the target had sent it, and "the partner answered 403" would send whoever reads
 * the run's error to the wrong people.
 */
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import type { AllowList } from './allow-list.js';
import { isServiceSetHeader, serviceSetHeaderProblem } from '../../lib/service-set-headers.js';
import type { OutboundProxy } from './proxy.js';
import { targetOf } from './target.js';

export interface OutboundRequest {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body: string | null;
  timeoutMs: number;
  maxBodyBytes: number;
  /**
   * Called once the address is resolved and checked, right before connecting: it throws to send
   * nothing (the engine's check that the worker still holds the run: a DNS lookup may stall).
   */
  beforeSend?: () => void;
}

export interface OutboundAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  truncated: boolean;
  /**
   * The proxy answered in the target's stead (a CONNECT it refused, or 407 for its own
   * credentials): the target was never reached, and the body is the proxy's error page.
   */
  fromProxy: boolean;
}

/**
 * Why a path that starts with `//` is not sent: http-proxy-agent makes the URL it asks the proxy
 * for with `new URL(path, 'http://' + host)`, which reads `//evil.example/x` as another host's
 * (a security review, 2026-11-28: an empty first path placeholder sent a partner's secret to a
 * host the payload named). Such a path comes from an empty placeholder more than from intent.
 */
export const DOUBLE_SLASH = 'a path that starts so names another host to a proxy; was a placeholder at its start empty?';

/** The allow-list refused the address, or the request is one never sent: asking again will not help. */
export class OutboundRefusedError extends Error {}

/**
 * DNS, connection, TLS or timeout failure: worth another try. `message` is for the run's step
 * (it may name the host, which a placeholder may have filled from a payload); `kind` is for
 * logs: no host, no data, only what went wrong (`dns ENOTFOUND`, `timeout`, `connect ECONNREFUSED`).
 */
export class OutboundNetworkError extends Error {
  constructor(
    message: string,
    readonly kind: string,
  ) {
    super(message);
    this.name = 'OutboundNetworkError';
  }
}

export async function sendOutbound(request: OutboundRequest, allow: AllowList, proxy: OutboundProxy | null = null): Promise<OutboundAnswer> {
  const { url } = request;
  // Import refuses them (lib/service-set-headers.ts); a blueprint stored before it did must not
  // send them either: a Host header re-points a proxied call past the address checked below.
  const serviceSet = Object.keys(request.headers).find(isServiceSetHeader);
  if (serviceSet !== undefined) throw new OutboundRefusedError(serviceSetHeaderProblem(serviceSet));
  if (url.pathname.startsWith('//')) throw new OutboundRefusedError(`its path starts with "//" (${DOUBLE_SLASH})`);
  const target = targetOf(url);
  const { host, port } = target;
  // The try's timeout covers the name's lookup too: what is left of it goes to the exchange.
  const deadline = Date.now() + request.timeoutMs;
  const giveUp = new AbortController();
  const agent = proxy?.agentFor(url, giveUp.signal) ?? null;
  if (agent) {
    if (!allow.namesHost(host, port)) checkAll(allow, host, port, await resolve(host, true, request.timeoutMs));
    request.beforeSend?.();
    return exchange(request, target, { agent }, giveUp, deadline);
  }
  const addresses = await resolve(host, false, request.timeoutMs);
  checkAll(allow, host, port, addresses);
  const vettedLookup: LookupFunction = (_hostname, options, callback) => {
    const family = options.family === 4 || options.family === 6 ? options.family : 0;
    const usable = family ? addresses.filter((a) => a.family === family) : addresses;
    if (usable.length === 0) {
      callback(Object.assign(new Error(`no IPv${family} address for ${host}`), { code: 'ENOTFOUND' }), '', 0);
    } else if (options.all) {
      (callback as unknown as (error: null, all: LookupAddress[]) => void)(null, usable);
    } else callback(null, usable[0].address, usable[0].family);
  };
  // A fresh connection per request: a pooled socket could outlive the address check.
  request.beforeSend?.();
  return exchange(request, target, { lookup: vettedLookup, agent: false }, giveUp, deadline);
}

function checkAll(allow: AllowList, host: string, port: number, addresses: LookupAddress[]): void {
  for (const { address } of addresses) {
    const refusal = allow.refusal(host, port, address);
    if (refusal) throw new OutboundRefusedError(refusal);
  }
}

/**
 * Lookups of outbound calls running at once, at most. `dns.lookup` is getaddrinfo on one of
 * libuv's four threads, held until the resolver answers (5 s a server and try by default when
 * one does not), and those threads also run the file system calls every request waits for (the
 * SQLite WAL flush of each answered write). A blueprint calling names of a DNS server that never
 * answers held all four with a few dozen runs, and with them every other workspace's writes.
 */
export const MAX_OUTBOUND_LOOKUPS = 2;
let lookupsRunning = 0;
const waitingForLookup: (() => void)[] = [];

/** Runs `lookup` when fewer than MAX_OUTBOUND_LOOKUPS run; `lookup` calls its argument once its thread is free. */
function whenLookupFree(lookup: (free: () => void) => void): () => void {
  let state: 'waiting' | 'started' | 'dropped' = 'waiting';
  const start = () => {
    if (state !== 'waiting') return;
    state = 'started';
    lookupsRunning++;
    lookup(() => {
      lookupsRunning--;
      waitingForLookup.shift()?.();
    });
  };
  if (lookupsRunning < MAX_OUTBOUND_LOOKUPS) start();
  else waitingForLookup.push(start);
  // The caller gave up: a lookup not started yet never starts (a started one keeps its thread).
  return () => {
    if (state !== 'waiting') return;
    state = 'dropped';
    const at = waitingForLookup.indexOf(start);
    if (at >= 0) waitingForLookup.splice(at, 1);
  };
}

async function resolve(host: string, proxied: boolean, timeoutMs: number): Promise<LookupAddress[]> {
  const family = isIP(host);
  if (family !== 0) return [{ address: host, family }];
  return new Promise((done, fail) => {
    let settled = false;
    const settle = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      outcome();
    };
    const timer = setTimeout(() => {
      drop();
      settle(() => fail(new OutboundNetworkError(`could not resolve ${host} within ${timeoutMs} ms`, 'dns timeout')));
    }, timeoutMs);
    const drop = whenLookupFree((free) => {
      try {
        dnsLookup(host, { all: true, verbatim: true }, (error, addresses) => {
          free();
          // Through a proxy the name may resolve only there: the message says how to let it through.
          const hint = proxied ? ' (through the proxy, a host this process cannot resolve goes only when CAREPATH_HTTP_ALLOW names it)' : '';
          if (error) settle(() => fail(new OutboundNetworkError(`could not resolve ${host}: ${error.code ?? error.message}${hint}`, `dns ${error.code ?? 'error'}`)));
          else if (addresses.length === 0) settle(() => fail(new OutboundNetworkError(`${host} has no address`, 'dns no address')));
          else settle(() => done(addresses));
        });
      } catch (error) {
        // Refused before it reached a thread (a name it cannot take): the place is free again.
        free();
        settle(() => fail(error));
      }
    });
  });
}

/** How the connection is made: to vetted addresses (direct), or by a proxy's agent. */
type Connection = { lookup: LookupFunction; agent: false } | { agent: http.Agent };

/** `giveUp` is aborted when the deadline passes: whatever the connection opened closes. */
function exchange(
  request: OutboundRequest,
  target: { host: string; port: number },
  connection: Connection,
  giveUp: AbortController,
  deadlineAt: number,
): Promise<OutboundAnswer> {
  const { url } = request;
  const transport = url.protocol === 'https:' ? https : http;
  return new Promise((done, fail) => {
    let settled = false;
    const finish = (outcome: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      outcome();
    };
    // A tunnel the proxy refused: what follows is its answer, not the target's.
    let refusedTunnel = false;
    const viaProxy = connection.agent !== false;
    const answerOf = (res: http.IncomingMessage, body: Buffer[], truncated: boolean): OutboundAnswer => {
      const status = res.statusCode ?? 0;
      // 407 is by definition a proxy's (Proxy Authentication Required), in absolute form as well.
      const fromProxy = viaProxy && (refusedTunnel || status === 407);
      return { status, headers: res.headers, body: Buffer.concat(body).toString('utf8'), truncated, fromProxy };
    };
    const req = transport.request(
      {
        protocol: url.protocol,
        hostname: target.host,
        port: target.port,
        path: `${url.pathname}${url.search}`,
        method: request.method,
        headers: framedHeaders(request),
        ...connection,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        let truncated = false;
        res.on('data', (chunk: Buffer) => {
          if (truncated) return;
          const room = request.maxBodyBytes - size;
          if (chunk.length > room) {
            chunks.push(chunk.subarray(0, room));
            size += room;
            truncated = true;
            // The cap is reached: the answer is what we have; stop reading the rest.
            finish(() => done(answerOf(res, chunks, truncated)));
            res.destroy();
            return;
          }
          chunks.push(chunk);
          size += chunk.length;
        });
        res.on('end', () => finish(() => done(answerOf(res, chunks, truncated))));
        res.on('error', (error) => finish(() => fail(new OutboundNetworkError(`the answer broke off: ${error.message}`, 'answer broke off'))));
      },
    );
    const deadline = setTimeout(() => {
      finish(() => fail(new OutboundNetworkError(`no answer within ${request.timeoutMs} ms`, 'timeout')));
      req.destroy();
      giveUp.abort();
    }, Math.max(1, deadlineAt - Date.now()));
    // https-proxy-agent reports the answer to its CONNECT; http-proxy-agent (absolute form, no
    // CONNECT) sends the same event with no status at all.
    req.on('proxyConnect', (connect: { statusCode?: number }) => {
      if (typeof connect.statusCode === 'number' && connect.statusCode !== 200) refusedTunnel = true;
    });
    req.on('error', (error: NodeJS.ErrnoException) =>
      finish(() => fail(new OutboundNetworkError(`request failed: ${error.code ?? error.message}`, `connect ${error.code ?? 'error'}`))),
    );
    if (request.body !== null) req.write(request.body);
    req.end();
  });
}

/**
 * The headers with the body's length. Node frames a body it is not told the length of as
 * chunked for POST, PUT and PATCH, but not for DELETE (nor GET, OPTIONS): a DELETE with a body
 * went out with no framing at all, the partner read no body, took the JSON for the start of a
 * next request and answered 400, and the run errored blaming the partner (a blueprint review).
 * A length is what every server reads, whatever the method; blueprints cannot set it
 * (lib/service-set-headers.ts).
 */
function framedHeaders(request: OutboundRequest): Record<string, string> {
  if (request.body === null) return request.headers;
  return { ...request.headers, 'content-length': String(Buffer.byteLength(request.body)) };
}
