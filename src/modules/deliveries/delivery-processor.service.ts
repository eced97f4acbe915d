/**
 * The delivery processor as a background service of `carepath serve` and `carepath worker`
 * (src/background.ts). Each process compiles its own FHIR validator, and does the expensive part
 * of it (about 3 s of synchronous CPU) when the service starts: compiled lazily, it stalled
 * every request in flight at the process's first delivery instead.
 */
import type { BackgroundService } from '../../background.js';
import { workerBasics, type Container } from '../../container.js';
import { createFhirValidator, type FhirValidator } from '../../ingestion/fhir-validate.js';
import { DeliveryProcessor, type DeliveryProcessorOptions } from './delivery-processor.js';

/** What a delivery processor needs from the container, plus the validator it owns. */
export function processorDependencies(container: Container, validator: FhirValidator) {
  return { ...workerBasics(container), validator };
}

export function deliveryProcessorService(options: DeliveryProcessorOptions & { warmValidator?: boolean } = {}): BackgroundService {
  const { warmValidator = true, ...processorOptions } = options;
  return {
    name: 'delivery-processor',
    async start(container) {
      const validator = createFhirValidator();
      if (warmValidator) {
        const ms = validator.warm();
        container.logger.info({ component: 'delivery-processor', ms: Math.round(ms) }, 'FHIR R4 validation compiled');
      }
      const processor = new DeliveryProcessor(processorDependencies(container, validator), processorOptions);
      processor.start();
      return { stop: () => processor.stop() };
    },
  };
}
