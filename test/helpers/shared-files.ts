import { fileURLToPath } from 'node:url';
import { dirname, resolve } from 'node:path';

/**
 * Material that lives beside the repository, not in it: `../shared` next to the project's root
 * holds the example blueprints every build must run and a Synthea sample used for realism
 * checks. Suites skip what is absent (a clone elsewhere has none).
 */
const projectRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const sharedRoot = process.env.CAREPATH_SHARED_DIR ?? resolve(projectRoot, '..', 'shared');

export const SHARED_EXAMPLE_BLUEPRINTS = resolve(sharedRoot, 'examples', 'blueprints');
export const SYNTHEA_FIXTURES = resolve(sharedRoot, 'fixtures', 'synthea-10-patients');
