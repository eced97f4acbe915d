/** One sample of a Prometheus text exposition: the value of `name{labels}` (`name` alone without labels), or undefined. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  const wanted = Object.entries(labels).map(([label, value]) => `${label}="${value}"`);
  for (const line of text.split('\n')) {
    if (wanted.length === 0 && line.startsWith(`${name} `)) return Number(line.slice(name.length + 1));
    if (!line.startsWith(`${name}{`)) continue;
    const inside = line.slice(name.length + 1, line.lastIndexOf('}'));
    const parts = inside.split(',');
    if (parts.length === wanted.length && wanted.every((pair) => parts.includes(pair))) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}
