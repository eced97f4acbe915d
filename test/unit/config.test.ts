/**
 * The environment half of the operator contract (DESIGN §11): defaults, and every malformed
 * setting stopped before anything starts, with a message that names the variable. Every
 * command (serve, api, worker, migrate, admin) reads its settings through loadConfig first.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, publicUrlWarnings } from '../../src/config.js';

const refused = (env: Record<string, string>, message: RegExp) => {
  expect(() => loadConfig(env)).toThrow(ConfigError);
  expect(() => loadConfig(env)).toThrow(message);
};

describe('loadConfig', () => {
  it('has the defaults of DESIGN §11', () => {
    expect(loadConfig({})).toMatchObject({
      databaseUrl: 'sqlite:./data/carepath.db',
      host: '127.0.0.1',
      port: 8080,
      publicUrl: 'http://127.0.0.1:8080',
      environment: 'staging',
      rateLimit: { requests: 100, perSeconds: 1 },
      logLevel: 'info',
      httpAllow: [],
    });
  });

  it('makes the default public URL from the host and port (an IPv6 host in brackets)', () => {
    expect(loadConfig({ CAREPATH_HOST: '0.0.0.0', CAREPATH_PORT: '9000' }).publicUrl).toBe('http://0.0.0.0:9000');
    expect(loadConfig({ CAREPATH_HOST: '::' }).publicUrl).toBe('http://[::]:8080');
    expect(loadConfig({ CAREPATH_PUBLIC_URL: 'https://carepath.example.org/' }).publicUrl).toBe('https://carepath.example.org');
    expect(loadConfig({ CAREPATH_PUBLIC_URL: 'https://example.org/carepath' }).publicUrl).toBe('https://example.org/carepath');
  });

  it('refuses a public URL the webhook URLs could not be built on', () => {
    for (const url of ['not a url', 'carepath.example.org', 'ftp://example.org', 'https://example.org/?x=1', 'https://user:pw@example.org']) {
      refused({ CAREPATH_PUBLIC_URL: url }, /^CAREPATH_PUBLIC_URL must be an http:\/\/ or https:\/\/ URL/);
    }
  });

  it('takes sqlite:<path>, sqlite::memory: and postgres:// URLs', () => {
    for (const url of ['sqlite:/var/lib/carepath/c.db', 'sqlite::memory:', 'postgres://carepath@db:5432/carepath', 'postgresql://db/carepath']) {
      expect(loadConfig({ CAREPATH_DATABASE_URL: url }).databaseUrl).toBe(url);
    }
  });

  it('refuses a database URL that names no SQLite file rather than keeping the data in memory', () => {
    refused({ CAREPATH_DATABASE_URL: 'sqlite:' }, /^CAREPATH_DATABASE_URL names no SQLite file/);
    refused({ CAREPATH_DATABASE_URL: 'sqlite:  ' }, /^CAREPATH_DATABASE_URL names no SQLite file/);
  });

  it('refuses other database URLs, and never prints a malformed one (it may hold a password)', () => {
    refused({ CAREPATH_DATABASE_URL: 'mysql://db/carepath' }, /^CAREPATH_DATABASE_URL must be sqlite:<path>, sqlite::memory: or postgres:\/\/…$/);
    const badPort = 'postgres://carepath:s3cret@db:99999/carepath';
    refused({ CAREPATH_DATABASE_URL: badPort }, /^CAREPATH_DATABASE_URL is not a valid postgres:\/\/ URL/);
    expect(() => loadConfig({ CAREPATH_DATABASE_URL: badPort })).not.toThrow(/s3cret/);
  });

  it('refuses a malformed CAREPATH_HTTP_ALLOW entry at start, naming it', () => {
    expect(loadConfig({ CAREPATH_HTTP_ALLOW: '10.0.0.0/8, ehr.internal:8443, lab.internal' }).httpAllow).toEqual(['10.0.0.0/8', 'ehr.internal:8443', 'lab.internal']);
    refused({ CAREPATH_HTTP_ALLOW: 'ehr.internal, 10.0.0.0/40' }, /^CAREPATH_HTTP_ALLOW: "10.0.0.0\/40" is not a CIDR/);
  });

  it('refuses a bad port, environment, rate limit or log level, naming the variable', () => {
    refused({ CAREPATH_PORT: '70000' }, /^CAREPATH_PORT must be a port number/);
    refused({ CAREPATH_PORT: 'http' }, /^CAREPATH_PORT must be a port number/);
    // Not blamed on CAREPATH_PUBLIC_URL, which is made from it.
    for (const host of ['999.1.1.1', 'two words', 'a/b']) refused({ CAREPATH_HOST: host }, /^CAREPATH_HOST must be an IP address or a host name/);
    refused({ CAREPATH_ENVIRONMENT: 'prod' }, /^CAREPATH_ENVIRONMENT must be staging or production/);
    refused({ CAREPATH_RATE_LIMIT: '100 per second' }, /^CAREPATH_RATE_LIMIT must look like <requests>\/<seconds>s/);
    refused({ CAREPATH_RATE_LIMIT: '0/1s' }, /^CAREPATH_RATE_LIMIT/);
    refused({ CAREPATH_LOG_LEVEL: 'verbose' }, /^CAREPATH_LOG_LEVEL must be one of/);
  });
});

describe('publicUrlWarnings', () => {
  it('says that webhook urls made from CAREPATH_HOST=0.0.0.0 or :: reach nobody, and how to fix it', () => {
    for (const host of ['0.0.0.0', '::']) {
      const warnings = publicUrlWarnings(loadConfig({ CAREPATH_HOST: host }));
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/no sender can reach/);
      expect(warnings[0]).toContain('set CAREPATH_PUBLIC_URL');
    }
    expect(publicUrlWarnings(loadConfig({ CAREPATH_HOST: '0.0.0.0', CAREPATH_PUBLIC_URL: 'https://carepath.example.org' }))).toEqual([]);
  });

  it('says that plain http webhook urls in production send secrets readable, except on this machine', () => {
    const production = { CAREPATH_ENVIRONMENT: 'production', CAREPATH_SECRET_KEY: 'a'.repeat(64) };
    const warnings = publicUrlWarnings(loadConfig({ ...production, CAREPATH_PUBLIC_URL: 'http://carepath.example.org' }));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain('plain http in production');
    expect(publicUrlWarnings(loadConfig({ ...production, CAREPATH_PUBLIC_URL: 'https://carepath.example.org' }))).toEqual([]);
    expect(publicUrlWarnings(loadConfig(production))).toEqual([]);
    expect(publicUrlWarnings(loadConfig({ CAREPATH_PUBLIC_URL: 'http://carepath.example.org' }))).toEqual([]);
  });
});
