/**
 * How benchmarks print: figures with units, and ratios against a baseline measured in the same
 * run on the same machine (never a pass/fail on a time). Output is plain Markdown so it can be
 * pasted into docs/benchmarks.md as it is.
 */
export interface Reporter {
  section(title: string): void;
  figure(name: string, value: number, unit: string): void;
  ratio(name: string, value: number, baseline: number, target?: string): void;
  note(text: string): void;
}

export function markdownReporter(write: (text: string) => void = (t) => process.stdout.write(t)): Reporter {
  return {
    section(title) {
      write(`\n### ${title}\n\n`);
    },
    figure(name, value, unit) {
      write(`- ${name}: **${format(value)} ${unit}**\n`);
    },
    ratio(name, value, baseline, target) {
      const r = baseline > 0 ? value / baseline : NaN;
      write(`- ${name}: **${r.toFixed(2)}×**${target ? ` (target ${target})` : ''}\n`);
    },
    note(text) {
      write(`- ${text}\n`);
    },
  };
}

function format(value: number): string {
  if (!Number.isFinite(value)) return String(value);
  if (Math.abs(value) >= 100) return Math.round(value).toLocaleString('en-US');
  return value.toFixed(2);
}

/** p-th percentile (0–100) of a list of numbers. */
export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index];
}

export type BenchSuite = (reporter: Reporter, options: { only: string[] }) => Promise<void>;
