/** Scopes of the interface spec. A key with none has full access; listed scopes narrow it. */
export const SCOPES = [
  'search:read',
  'queries:read',
  'queries:write',
  'diagrams:read',
  'triggers:read',
  'triggers:write',
  'runs:read',
  'runs:write',
  'webhooks:read',
  'webhooks:write',
  'audit:read',
] as const;

export type Scope = (typeof SCOPES)[number];

export function isScope(text: string): text is Scope {
  return (SCOPES as readonly string[]).includes(text);
}

export function allows(granted: readonly string[], needed: Scope | null): boolean {
  return needed === null || granted.length === 0 || granted.includes(needed);
}
