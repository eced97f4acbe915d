import { Type } from '@sinclair/typebox';
import type { Api } from '../types.js';
import { Uuid, commonErrors, named } from '../schemas/common.js';

const KeyContextSchema = named('KeyContext', Type.Object({
  tenantId: Uuid,
  workspaceId: Uuid,
  keyId: Uuid,
  keyName: Type.String(),
  scopes: Type.Array(Type.String()),
  environment: Type.Union([Type.Literal('staging'), Type.Literal('production')]),
}));

export function registerMeRoutes(api: Api): void {
  api.get(
    '/v1/me',
    {
      config: { scope: null },
      schema: {
        operationId: 'getKeyContext',
        summary: 'The key context: tenant, workspace, key and environment',
        tags: ['Key context'],
        response: { 200: KeyContextSchema, ...commonErrors },
      },
    },
    async (request) => {
      const { tenantId, workspaceId, keyId, keyName, scopes, environment } = request.ctx;
      return { tenantId, workspaceId, keyId, keyName, scopes, environment };
    },
  );
}
