/**
 * How deep a JSON text nests, found without parsing it and without recursion.
 *
 * Why: parsing deep JSON is fine (V8's parser does not recurse), but what comes after does:
 * `JSON.stringify`, canonical JSON, schema validation and FHIRPath all walk a value
 * recursively, and a body of 50 KB nested 4,000 levels deep overflowed the stack there and was a
 * 500. An API body is refused at the door instead (400), before anything walks it. No run
 * payload comes near the limit: even a FHIR resource in one, with contained resources and
 * nested extensions, is a few dozen levels deep. (Deliveries skip an entry nested too deeply to
 * validate and process the rest: ingestion/check-items.ts.)
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
