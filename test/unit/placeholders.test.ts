import { describe, expect, it } from 'vitest';
import { compileExpression, evaluate, type ExpressionContext } from '../../src/lib/fhirpath.js';
import { findPlaceholders, renderPlaceholders, renderUrlTemplate, UrlTemplateError } from '../../src/lib/placeholders.js';

const context: ExpressionContext = {
  payload: { riskScore: 7, resource: { resourceType: 'Observation', status: 'final' } },
  subject: { extId: 'p-1', tags: ['copd', 'diabetes'], name: 'Ada' },
  steps: { lookup: { outcome: 'ok', output: { status: 200, body: { ward: 'B2' } } } },
  vars: { empty: [] },
};
const withFhirPath = (text: string) => evaluate(compileExpression(text), context);

describe('findPlaceholders', () => {
  it('finds every expression in nested objects and arrays, trimmed, in document order', () => {
    const value = {
      url: 'https://example.org/patients/{{ subject.extId }}?risk={{payload.riskScore}}',
      body: { items: [{ note: '{{ vars.note }}' }, 42, null, true], plain: 'no placeholders' },
      headers: { 'X-Ward': '{{steps.lookup.output.body.ward}}' },
    };
    expect(findPlaceholders(value)).toEqual([
      'subject.extId',
      'payload.riskScore',
      'vars.note',
      'steps.lookup.output.body.ward',
    ]);
  });

  it('ignores object keys and non-string values', () => {
    expect(findPlaceholders({ '{{ key }}': 1, n: 2, b: false, z: null })).toEqual([]);
  });

  it('reports an empty placeholder as an empty expression', () => {
    expect(findPlaceholders('a {{ }} b')).toEqual(['']);
  });

  it('reads a bare string too', () => {
    expect(findPlaceholders('{{a}} and {{b}}')).toEqual(['a', 'b']);
  });
});

describe('renderPlaceholders', () => {
  it('replaces a whole-string placeholder by the value itself', () => {
    const rendered = renderPlaceholders(
      {
        score: '{{ payload.riskScore }}',
        subject: '{{ subject.extId }}',
        resource: '{{ payload.resource }}',
        missing: '{{ payload.nothing }}',
        tags: '{{ subject.tags }}',
      },
      withFhirPath,
    );
    expect(rendered).toEqual({
      score: 7,
      subject: 'p-1',
      resource: { resourceType: 'Observation', status: 'final' },
      missing: null,
      tags: ['copd', 'diabetes'],
    });
  });

  it('replaces placeholders inside longer text by the text of the value', () => {
    const rendered = renderPlaceholders(
      {
        message: 'Patient {{subject.name}} scored {{ payload.riskScore }}{{ payload.nothing }}.',
        tags: 'tags: {{ subject.tags }}',
        body: 'ward {{ steps.lookup.output.body }}',
        joined: 'tags: {{ subject.tags.join(\' / \') }}',
      },
      withFhirPath,
    );
    expect(rendered).toEqual({
      message: 'Patient Ada scored 7.',
      tags: 'tags: copd,diabetes',
      body: 'ward {"ward":"B2"}',
      joined: 'tags: copd / diabetes',
    });
  });

  it('treats a placeholder with text around it, even spaces, as text', () => {
    expect(renderPlaceholders(' {{ payload.riskScore }}', withFhirPath)).toBe(' 7');
  });

  it('recurses through arrays and objects and copies other values', () => {
    const input = {
      nested: { list: ['{{ payload.riskScore }}', 'plain', 3, false, null, { deep: 'id={{subject.extId}}' }] },
      count: 1,
    };
    const rendered = renderPlaceholders(input, withFhirPath);
    expect(rendered).toEqual({
      nested: { list: [7, 'plain', 3, false, null, { deep: 'id=p-1' }] },
      count: 1,
    });
  });

  it('returns a deep copy and leaves its input alone', () => {
    const input = { a: { b: ['x', { c: 'y' }] }, s: '{{ subject.extId }}' };
    const snapshot = structuredClone(input);
    const rendered = renderPlaceholders(input, withFhirPath) as typeof input;
    expect(input).toEqual(snapshot);
    expect(rendered.a).not.toBe(input.a);
    expect(rendered.a.b).not.toBe(input.a.b);
    expect(rendered.a.b[1]).not.toBe(input.a.b[1]);
  });

  it('passes each trimmed expression to the evaluator', () => {
    const seen: string[] = [];
    renderPlaceholders(['{{  one  }}', 'x {{two}} y {{ three }}'], (text) => {
      seen.push(text);
      return [];
    });
    expect(seen).toEqual(['one', 'two', 'three']);
  });

  it('keeps a "__proto__" key as a plain key', () => {
    const input = JSON.parse('{"__proto__": {"polluted": "{{ subject.extId }}"}}') as unknown;
    const rendered = renderPlaceholders(input, withFhirPath) as Record<string, unknown>;
    expect(Object.getPrototypeOf(rendered)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(rendered, '__proto__')?.value).toEqual({ polluted: 'p-1' });
  });
});

describe('renderUrlTemplate', () => {
  const values: Record<string, unknown[]> = { host: ['lab.example'], id: ['a/b?c#d'], q: ['x&y=z'], url: ['https://other.example/p?q=1'], none: [] };
  const evaluateText = (text: string) => values[text] ?? [];

  it('encodes what fills the path, query or fragment, one component each', () => {
    expect(renderUrlTemplate('https://lab.example/p/{{id}}?q={{q}}#{{id}}', evaluateText)).toBe('https://lab.example/p/a%2Fb%3Fc%23d?q=x%26y%3Dz#a%2Fb%3Fc%23d');
    expect(renderUrlTemplate('https://lab.example?q={{q}}', evaluateText)).toBe('https://lab.example?q=x%26y%3Dz');
  });

  it('fills the scheme and host as written (the allow-list judges the host that results)', () => {
    expect(renderUrlTemplate('https://{{host}}/p/{{id}}', evaluateText)).toBe('https://lab.example/p/a%2Fb%3Fc%23d');
    expect(renderUrlTemplate('https://{{host}}:8443', evaluateText)).toBe('https://lab.example:8443');
  });

  it('fills the scheme and host with what a scheme, host or port is made of only: a value cannot end the host early', () => {
    const parts: Record<string, unknown[]> = { site: ['eu-1'], v6: ['[::1]'], port: [8443], escape: ['127.0.0.1:8080/x?'], at: ['me@127.0.0.1'], hash: ['x#'], space: ['a b'] };
    const fill = (template: string) => renderUrlTemplate(template, (text) => parts[text] ?? []);
    expect(fill('https://{{site}}.lab.example:{{port}}/p')).toBe('https://eu-1.lab.example:8443/p');
    expect(fill('http://{{v6}}:{{port}}/p')).toBe('http://[::1]:8443/p');
    // A sub-domain filled with "127.0.0.1:8080/x?" made the host 127.0.0.1 and the rest a query.
    for (const template of ['https://{{escape}}.lab.example/notify', 'https://{{at}}.lab.example/', 'https://{{hash}}.lab.example/', 'https://{{space}}.lab.example/']) {
      expect(() => fill(template), template).toThrow(/a placeholder before the path was filled with characters a scheme, host or port cannot hold/);
    }
  });

  it('refuses a value that makes a whole path segment "." or "..", which a URL parser would resolve away', () => {
    const dots: Record<string, unknown[]> = { up: ['..'], here: ['.'], encoded: ['%2e%2E'], half: ['.'], name: ['a..b'] };
    const fill = (template: string) => renderUrlTemplate(template, (text) => dots[text] ?? []);
    for (const template of ['https://lab.example/patients/{{up}}/notify', 'https://lab.example/patients/{{here}}', 'https://lab.example/p/{{half}}{{half}}/x']) {
      expect(() => fill(template), template).toThrow(UrlTemplateError);
    }
    // %2e is encoded as %252e, so it is no dot; dots inside a segment, or in the query, are fine.
    expect(fill('https://lab.example/p/{{encoded}}')).toBe('https://lab.example/p/%252e%252E');
    expect(fill('https://lab.example/p/{{name}}?q={{up}}')).toBe('https://lab.example/p/a..b?q=..');
  });

  it('takes a URL that is one placeholder alone as it is, and leaves text without placeholders alone', () => {
    expect(renderUrlTemplate('{{url}}', evaluateText)).toBe('https://other.example/p?q=1');
    expect(renderUrlTemplate('https://lab.example/p?q=a b', evaluateText)).toBe('https://lab.example/p?q=a b');
    expect(renderUrlTemplate('https://lab.example/p/{{none}}', evaluateText)).toBe('https://lab.example/p/');
  });
});
