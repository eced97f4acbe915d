/**
 * The operator contract of DESIGN §11: environment → a frozen, typed Config, validated once.
 * Nothing else in the code reads process.env.
 */
import { decodeSecretKey } from './lib/secret-box.js';
import { noProxyMatcher, parseProxyUrl, ProxySettingError } from './engine/outbound/proxy.js';
import { AllowListEntryError, createAllowList } from './engine/outbound/allow-list.js';

export interface RateLimitSetting {
  requests: number;
  perSeconds: number;
}

export interface Config {
  databaseUrl: string;
  host: string;
  port: number;
  publicUrl: string;
  environment: 'staging' | 'production';
  rateLimit: RateLimitSetting;
  logLevel: string;
  httpAllow: string[];
  /** Forward proxy for http automations (CAREPATH_HTTP_PROXY); may carry credentials: never log it. */
  httpProxy?: string;
  /** Hosts http automations reach without the proxy (CAREPATH_HTTP_NO_PROXY). */
  httpNoProxy: string[];
  /** Seals webhook signing secrets at rest (lib/secret-box.ts); unset = stored as `plain:`. */
  secretKey?: string;
}

export class ConfigError extends Error {}

export function parseRateLimit(text: string): RateLimitSetting {
  const match = /^(\d+)\/(\d+)s$/.exec(text.trim());
  if (!match || Number(match[1]) < 1 || Number(match[2]) < 1) {
    throw new ConfigError(`CAREPATH_RATE_LIMIT must look like <requests>/<seconds>s (e.g. 100/1s), got "${text}"`);
  }
  return { requests: Number(match[1]), perSeconds: Number(match[2]) };
}

/** A comma-separated setting as its non-empty entries. */
function listSetting(text: string | undefined): string[] {
  return (text || '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
}

const DATABASE_URL_FORMS = 'sqlite:<path>, sqlite::memory: or postgres://…';

/**
 * `sqlite:` with nothing after it is refused rather than read as memory: written as
 * `sqlite:$DB_PATH` with the variable unset, it would keep every run and record in memory and
 * lose them at the next restart, without a word.
 */
function checkedDatabaseUrl(url: string): string {
  if (url.startsWith('sqlite:')) {
    if (url.slice('sqlite:'.length).trim() === '') {
      throw new ConfigError(`CAREPATH_DATABASE_URL names no SQLite file ("${url}"): it must be ${DATABASE_URL_FORMS}`);
    }
    return url;
  }
  if (!/^postgres(ql)?:\/\//.test(url)) throw new ConfigError(`CAREPATH_DATABASE_URL must be ${DATABASE_URL_FORMS}`);
  try {
    new URL(url);
  } catch {
    // The URL itself is not printed: it may hold a password.
    throw new ConfigError('CAREPATH_DATABASE_URL is not a valid postgres:// URL (check the port, and percent-encode special characters in the password)');
  }
  return url;
}

/** The base of the webhook URLs handed out: an absolute http(s) URL, without a trailing slash. */
function checkedPublicUrl(text: string): string {
  let url: URL | null = null;
  try {
    url = new URL(text);
  } catch {
    // refused below
  }
  if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    throw new ConfigError(`CAREPATH_PUBLIC_URL must be an http:// or https:// URL such as https://carepath.example.org, got "${text}"`);
  }
  return text.replace(/\/+$/, '');
}

/**
 * What is wrong with the webhook URLs this configuration hands out, said at start (the service
 * runs either way). With `CAREPATH_HOST=0.0.0.0` and no `CAREPATH_PUBLIC_URL`, every endpoint's
 * `url` read `http://0.0.0.0:8080/…`, which no sender can reach (a walk through the README), and
 * nothing said why. In production a plain http:// URL sends bearer secrets readable.
 */
export function publicUrlWarnings(config: Pick<Config, 'publicUrl' | 'environment'>): string[] {
  const url = new URL(config.publicUrl);
  const warnings: string[] = [];
  if (url.hostname === '0.0.0.0' || url.hostname === '[::]') {
    warnings.push(
      `webhook urls handed out begin ${config.publicUrl}, an address no sender can reach (made from CAREPATH_HOST when CAREPATH_PUBLIC_URL is not set): ` +
        'set CAREPATH_PUBLIC_URL to the address senders reach this service at, such as https://carepath.example.org',
    );
    return warnings;
  }
  const loopback = url.hostname === 'localhost' || url.hostname === '[::1]' || url.hostname.startsWith('127.');
  if (config.environment === 'production' && url.protocol === 'http:' && !loopback) {
    warnings.push(
      `webhook urls handed out begin ${config.publicUrl}, plain http in production: a bearer endpoint's secret and every delivery travel readable; ` +
        'serve TLS in front and set CAREPATH_PUBLIC_URL to its https:// address',
    );
  }
  return warnings;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Whether `host` is a host a URL holds as written: an IP address (v6 without brackets) or a name. */
function isUrlHost(host: string): boolean {
  const written = host.includes(':') ? `[${host}]` : host;
  return URL.canParse(`http://${written}/`) && new URL(`http://${written}/`).host === written.toLowerCase();
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const host = env.CAREPATH_HOST || '127.0.0.1';
  // A host no URL can hold (999.1.1.1) was blamed on CAREPATH_PUBLIC_URL, made from it.
  if (!isUrlHost(host)) {
    throw new ConfigError(`CAREPATH_HOST must be an IP address or a host name of this machine, such as 127.0.0.1 or 0.0.0.0, got "${host}"`);
  }
  const portText = env.CAREPATH_PORT || '8080';
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new ConfigError(`CAREPATH_PORT must be a port number, got "${portText}"`);
  }
  const environment = env.CAREPATH_ENVIRONMENT || 'staging';
  if (environment !== 'staging' && environment !== 'production') {
    throw new ConfigError(`CAREPATH_ENVIRONMENT must be staging or production, got "${environment}"`);
  }
  const databaseUrl = checkedDatabaseUrl(env.CAREPATH_DATABASE_URL || 'sqlite:./data/carepath.db');
  const logLevel = env.CAREPATH_LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(`CAREPATH_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);
  }
  const publicUrl = checkedPublicUrl(env.CAREPATH_PUBLIC_URL || `http://${host.includes(':') ? `[${host}]` : host}:${port}`);
  const httpAllow = listSetting(env.CAREPATH_HTTP_ALLOW);
  const httpProxy = env.CAREPATH_HTTP_PROXY || undefined;
  const httpNoProxy = listSetting(env.CAREPATH_HTTP_NO_PROXY);
  // The outbound settings are read by the code that uses them; their errors name the variable.
  try {
    createAllowList(httpAllow);
    if (httpProxy !== undefined) parseProxyUrl(httpProxy);
    noProxyMatcher(httpNoProxy);
  } catch (error) {
    if (error instanceof AllowListEntryError || error instanceof ProxySettingError) throw new ConfigError(error.message);
    throw error;
  }
  const secretKey = env.CAREPATH_SECRET_KEY || undefined;
  if (secretKey !== undefined && !decodeSecretKey(secretKey)) {
    throw new ConfigError('CAREPATH_SECRET_KEY must be 32 bytes, written as 64 hex characters or base64');
  }
  // Without a key, webhook signing secrets are stored as they are: fine for a first try on a
  // laptop, not for patients' data (docs/operations.md "Secrets").
  if (secretKey === undefined && environment === 'production') {
    throw new ConfigError(
      'CAREPATH_SECRET_KEY must be set when CAREPATH_ENVIRONMENT=production: webhook signing secrets and partner secrets are sealed with it (make one with: openssl rand -hex 32)',
    );
  }
  return Object.freeze({
    databaseUrl,
    host,
    port,
    publicUrl,
    environment,
    rateLimit: parseRateLimit(env.CAREPATH_RATE_LIMIT || '100/1s'),
    logLevel,
    httpAllow,
    ...(httpProxy !== undefined ? { httpProxy } : {}),
    httpNoProxy,
    ...(secretKey !== undefined ? { secretKey } : {}),
  });
}
