/**
 * The route modules, in one list each. A feature adds its register function here.
 * `apiRouteModules` run inside the API-key context; `publicRouteModules` outside it.
 */
import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { registerTriggerRoutes } from './triggers.js';
import { registerRunRoutes } from './runs.js';
import { registerAuditRoutes } from './audit-events.js';
import { registerQueryRoutes } from './queries.js';
import { registerSearchRoutes } from './search.js';
import { registerDiagramRoutes } from './diagrams.js';
import { registerWebhookRoutes } from './webhooks.js';
import { registerDeliveryRoutes } from './deliveries.js';
import { registerInboundRoutes } from './inbound.js';
import { registerEngineRoutes } from './engine.js';

export type RouteModule = (api: Api, container: Container) => void | Promise<void>;

export const apiRouteModules: RouteModule[] = [registerTriggerRoutes, registerRunRoutes, registerAuditRoutes, registerQueryRoutes, registerSearchRoutes, registerDiagramRoutes, registerWebhookRoutes, registerInboundRoutes, registerEngineRoutes];

export const publicRouteModules: RouteModule[] = [registerDeliveryRoutes];
