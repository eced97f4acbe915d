/**
 * The delivery processor as a background service of `carepath serve` and `carepath worker`
 * (src/background.ts). Each process compiles its own FHIR validator, lazily, on first use.
 */
import type { BackgroundService } from '../../background.js';
import { workerBasics, type Container } from '../../container.js';
import { createFhirValidator, type FhirValidator } from '../../ingestion/fhir-validate.js';
import { DeliveryProcessor, type DeliveryProcessorOptions } from './delivery-processor.js';

/** What a delivery processor needs from the container, plus the validator it owns. */
export function processorDependencies(container: Container, validator: FhirValidator) {
  return { ...workerBasics(container), validator };
}

export function deliveryProcessorService(options: DeliveryProcessorOptions = {}): BackgroundService {
  return {
    name: 'delivery-processor',
    async start(container) {
      const processor = new DeliveryProcessor(processorDependencies(container, createFhirValidator()), options);
      processor.start();
      return { stop: () => processor.stop() };
    },
  };
}
