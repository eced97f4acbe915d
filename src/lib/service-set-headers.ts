/**
 * Request headers an outbound call's blueprint may not write: the service sets them itself.
 *
 * `Host` must be the host of the URL the allow-list checked. Written by a blueprint (or filled
 * from a run's payload), it re-pointed the call: a forward proxy in absolute form asks for
 * `http://<Host header>/path`, so a call checked as going to a listed partner reached loopback,
 * carrying the partner's secret, while its audit event named the partner (a security review,
 * 2026-11-28); without a proxy it picks another virtual host behind a listed ingress. The others
 * frame the message or the connection (length, chunking, upgrades, hop-by-hop options) or speak
 * to a proxy: Node writes them from the body and the agent, and a second value smuggles a request.
 */
const SERVICE_SET = new Set([
  'host',
  'content-length',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'expect',
]);

/**
 * Set by the proxies on the way, never by a client: an ingress or an application behind it may
 * pick the virtual host, scheme or client address from them, as from `Host`.
 */
const PROXY_SET = new Set(['forwarded', 'via', 'max-forwards']);

/** True for a header name (any case) that only the service or a proxy sets: see above. `proxy-*` and `x-forwarded-*` included. */
export function isServiceSetHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return SERVICE_SET.has(lower) || PROXY_SET.has(lower) || lower.startsWith('proxy-') || lower.startsWith('x-forwarded-');
}

/** Why such a header cannot be written, for an import error or a step's failure. */
export function serviceSetHeaderProblem(name: string): string {
  const lower = name.toLowerCase();
  if (lower === 'host') return `with.headers: "${name}" is set from the URL, so the host the allow-list checks is the one called; write the host in with.url`;
  if (PROXY_SET.has(lower) || lower.startsWith('x-forwarded-')) return `with.headers: "${name}" is for the proxies on the way to set (it can choose the host or address a partner's ingress routes to) and cannot be written`;
  return `with.headers: "${name}" is set by the service (it frames the request or speaks to a proxy) and cannot be written`;
}
