/**
 * The delivery processor as a background service of `carepath serve` and `carepath worker`
 * (src/background.ts). Each process compiles its own FHIR validator, lazily, on first use.
 */
import type { BackgroundService } from '../../background.js';
import { createFhirValidator } from '../../ingestion/fhir-validate.js';
import { DeliveryProcessor, type DeliveryProcessorOptions } from './delivery-processor.js';

export function deliveryProcessorService(options: DeliveryProcessorOptions = {}): BackgroundService {
  return {
    name: 'delivery-processor',
    async start(container) {
      const processor = new DeliveryProcessor(
        {
          db: container.db,
          dialect: container.store.dialect,
          clock: container.clock,
          logger: container.logger,
          signals: container.signals,
          runCreator: container.runCreator,
          validator: createFhirValidator(),
        },
        options,
      );
      processor.start();
      return { stop: () => processor.stop() };
    },
  };
}
