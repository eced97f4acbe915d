/**
 * Where, and why, JSON text is malformed. Node 20's JSON.parse often says only
 * "Unexpected token '}', …" without a position, which is no help in a 300-line blueprint, so a
 * failed parse is scanned again here to find the first offending character.
 */

export interface JsonSyntaxProblem {
  line: number;
  column: number;
  message: string;
}

class Stop {
  constructor(
    readonly offset: number,
    readonly message: string,
  ) {}
}

/** The first syntax error in `text`, or undefined when it is valid JSON. Lines and columns count from 1. */
export function findJsonSyntaxProblem(text: string): JsonSyntaxProblem | undefined {
  try {
    scanDocument(text);
    return undefined;
  } catch (error) {
    // Anything other than a Stop (nesting deep enough to exhaust the stack) has no position.
    if (!(error instanceof Stop)) return undefined;
    return { ...lineAndColumn(text, error.offset), message: error.message };
  }
}

function scanDocument(text: string): void {
  let i = 0;
  const fail = (message: string, at = i): never => {
    throw new Stop(at, message);
  };
  const found = () => (i < text.length ? `unexpected ${JSON.stringify(text[i])}` : 'unexpected end of input');
  const skipSpace = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
  };

  const scanString = () => {
    const start = i++;
    while (i < text.length) {
      const char = text[i];
      if (char === '"') {
        i++;
        return;
      }
      if (char === '\\') {
        const escape = text[i + 1] ?? '';
        if ('"\\/bfnrt'.includes(escape) && escape !== '') i += 2;
        else if (escape === 'u' && /^[0-9a-fA-F]{4}$/.test(text.slice(i + 2, i + 6))) i += 6;
        else fail('invalid escape in a string');
        continue;
      }
      if (char < ' ') fail('a line break or control character inside a string (write \\n)');
      i++;
    }
    fail('a string that is never closed', start);
  };

  const scanValue = (): void => {
    skipSpace();
    const char = text[i];
    if (char === '{') return scanContainer('}', true);
    if (char === '[') return scanContainer(']', false);
    if (char === '"') return scanString();
    for (const word of ['true', 'false', 'null']) {
      if (text.startsWith(word, i)) {
        i += word.length;
        return;
      }
    }
    const number = /-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
    number.lastIndex = i;
    const match = char === '-' || (char >= '0' && char <= '9') ? number.exec(text) : null;
    if (!match) fail(`${found()} where a value was expected`);
    else i += match[0].length;
  };

  const scanContainer = (close: string, isObject: boolean): void => {
    i++;
    skipSpace();
    if (text[i] === close) {
      i++;
      return;
    }
    for (;;) {
      if (isObject) {
        skipSpace();
        if (text[i] !== '"') fail(`${found()} where a property name in double quotes was expected`);
        scanString();
        skipSpace();
        if (text[i] !== ':') fail(`${found()} where ':' was expected after a property name`);
        i++;
      }
      scanValue();
      skipSpace();
      if (text[i] === ',') {
        i++;
        continue;
      }
      if (text[i] === close) {
        i++;
        return;
      }
      fail(`${found()} where ',' or '${close}' was expected`);
    }
  };

  scanValue();
  skipSpace();
  if (i < text.length) fail(`${found()} after the end of the JSON value`);
}

function lineAndColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  return { line, column: offset - (before.lastIndexOf('\n') + 1) + 1 };
}
