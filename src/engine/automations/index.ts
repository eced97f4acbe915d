/** Every automation type and its handler: the engine looks types up here and nowhere else. */
import type { AutomationType } from '../../modules/blueprints/blueprint.js';
import type { AutomationHandler } from './automation.js';
import { cancelAutomation } from './cancel.js';
import { failAutomation } from './fail.js';
import { httpAutomation } from './http.js';
import { setAutomation } from './set.js';
import { startPathwayAutomation } from './start-pathway.js';
import { stopAutomation } from './stop.js';
import { tagAutomation } from './tag.js';
import { waitForEventAutomation } from './wait-for-event.js';
import { waitAutomation } from './wait.js';

export const AUTOMATIONS: Record<AutomationType, AutomationHandler> = {
  wait: waitAutomation,
  wait_for_event: waitForEventAutomation,
  tag: tagAutomation,
  set: setAutomation,
  http: httpAutomation,
  start_pathway: startPathwayAutomation,
  fail: failAutomation,
  stop: stopAutomation,
  cancel: cancelAutomation,
};
