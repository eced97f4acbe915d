/** Where a URL connects: its host without IPv6 brackets, and its port (the scheme's by default). */
export function targetOf(url: URL): { host: string; port: number } {
  return { host: unbracket(url.hostname), port: url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80 };
}

/** `[::1]` → `::1`; anything else as it is. */
export function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}
