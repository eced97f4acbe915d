/**
 * `npm run bench`: every benchmark in one run on one machine, each next to its baseline.
 * `npm run bench -- fire engine` runs only the named suites (fire, engine, ingestion, search, large).
 */
import os from 'node:os';
import { markdownReporter, type BenchSuite } from './reporter.js';

const suites: Record<string, () => Promise<{ default: BenchSuite }>> = {
  fire: () => import('./fire.js'),
  engine: () => import('./engine.js'),
  ingestion: () => import('./ingestion.js'),
  search: () => import('./ingestion.js').then((module) => ({ default: module.searchBench })),
  large: () => import('./large-delivery.js'),
};

const only = process.argv.slice(2);
const reporter = markdownReporter();
process.stdout.write(
  `## carepath benchmarks\n\n- machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ` +
    `${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}\n- date: ${new Date().toISOString()}\n`,
);
for (const [name, load] of Object.entries(suites)) {
  if (only.length > 0 && !only.includes(name)) continue;
  const suite = (await load()).default;
  await suite(reporter, { only });
}
process.exit(0);
