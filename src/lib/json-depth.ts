/**
 * How deep a JSON text nests, found without parsing it and without recursion.
 *
 * Why: parsing deep JSON is fine (V8's parser does not recurse), but what comes after does:
 * `JSON.stringify`, canonical JSON, schema validation and FHIRPath all walk a value
 * recursively, and a body of 50 KB nested 4,000 levels deep overflowed the stack there and was a
 * 500. An API body is refused at the door instead (400), before anything walks it. No run
 * payload comes near the limit: even a FHIR resource in one, with contained resources and
 * nested extensions, is a few dozen levels deep. A delivered resource nested deeper is skipped
 * (ingestion/fhir-validate.ts), and the rest of its delivery processed: it would become a run's
 * payload.
 */
export const MAX_JSON_DEPTH = 100;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;

/** True when objects and arrays in `text` nest deeper than `limit` (brackets inside strings do not count). */
export function jsonNestsDeeperThan(text: string, limit = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === BACKSLASH) i++;
      else if (code === QUOTE) inString = false;
    } else if (code === QUOTE) {
      inString = true;
    } else if (code === OPEN_BRACE || code === OPEN_BRACKET) {
      if (++depth > limit) return true;
    } else if (code === CLOSE_BRACE || code === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

/**
 * True when objects and arrays in a parsed value nest deeper than `limit` (the same count as
 * `jsonNestsDeeperThan` over its text). It recurses, but never more than `limit` levels.
 */
export function valueNestsDeeperThan(value: unknown, limit = MAX_JSON_DEPTH): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (limit === 0) return true;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (valueNestsDeeperThan(value[i], limit - 1)) return true;
    return false;
  }
  for (const key in value) if (valueNestsDeeperThan((value as Record<string, unknown>)[key], limit - 1)) return true;
  return false;
}
