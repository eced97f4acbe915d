/** The text of `carepath --help`: every command, the admin commands of DESIGN §11, the environment. */
import { adminUsageLines } from './admin/dispatch.js';

export function usageText(): string {
  return `carepath: Care Pathway Automation Service

Usage:
  carepath serve      API, automation worker and scheduler in one process (npm start);
                      on an empty store it also creates a demo workspace and prints its key
  carepath api        the HTTP API alone (scale-out)
  carepath worker     the automation worker and scheduler alone (scale-out)
  carepath migrate [--json]
                      bring the store's schema up to date, then exit
  carepath admin …    workspaces (and their tenants), keys, blueprints, webhook and partner secrets, deliveries, audit export
  carepath version    the version, and the store schema it brings (its last migration)
  carepath help       this text

Admin commands:
${adminUsageLines()
  .map((line) => `  ${line}`)
  .join('\n')}

  --json prints exactly one JSON value on stdout (an array for list) and nothing else there.
  --help after any command shows its usage.

Environment (all optional):
  CAREPATH_DATABASE_URL   sqlite:<path> (default sqlite:./data/carepath.db), sqlite::memory: or postgres://…
  CAREPATH_HOST           address to listen on (default 127.0.0.1)
  CAREPATH_PORT           port to listen on (default 8080)
  CAREPATH_PUBLIC_URL     base of the webhook url handed out (default http://<host>:<port>)
  CAREPATH_ENVIRONMENT    staging (default) or production
  CAREPATH_RATE_LIMIT     per key: <requests>/<seconds>s (default 100/1s)
  CAREPATH_LOG_LEVEL      pino level (default info)
  CAREPATH_HTTP_ALLOW     extra hosts, host:port or CIDRs that http automations may call
  CAREPATH_HTTP_PROXY     forward proxy for http automations: http://[user:password@]host:port
  CAREPATH_HTTP_NO_PROXY  hosts, domains, addresses or CIDRs http automations reach without the proxy
  CAREPATH_SECRET_KEY     32-byte key (hex or base64) that seals webhook and partner secrets at rest

Exit codes: 0 done, 1 failed (the reason on stderr), 2 wrong usage.
`;
}
