/**
 * What `carepath version` prints and the start-up log names: the package's version and the
 * store schema this code brings (its last migration). During a rolling deploy, old and new
 * processes share one log: this is how they are told apart (an upgrade review, 2026-11-27).
 */
import { readFileSync } from 'node:fs';
import { migrations } from '../storage/migrations/index.js';

export const CAREPATH_VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** The migration this code's schema ends with. */
export const SCHEMA_LEVEL = Object.keys(migrations).sort().at(-1)!;

export const versionText = (): string => `carepath ${CAREPATH_VERSION} (schema ${SCHEMA_LEVEL})\n`;
