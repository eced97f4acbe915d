/**
 * Who is asking: every service call carries this. It is built once per request by the auth
 * plugin from the API key, so a workspace id never comes from the request itself.
 */
export interface KeyContext {
  tenantId: string;
  workspaceId: string;
  keyId: string;
  keyName: string;
  scopes: string[];
  environment: 'staging' | 'production';
}

export interface RequestContext extends KeyContext {
  requestId: string;
}

/** Work done by the service itself (worker, scheduler, ingestion) rather than a key. */
export function systemContext(tenantId: string, workspaceId: string, requestId: string): RequestContext {
  return {
    tenantId,
    workspaceId,
    keyId: '',
    keyName: 'carepath',
    scopes: [],
    environment: 'staging',
    requestId,
  };
}
