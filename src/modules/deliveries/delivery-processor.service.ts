/**
 * The delivery processor as a background service of `carepath serve` and `carepath worker`
 * (src/background.ts). The process's delivery reader compiles its FHIR validation (about 3 s of
 * CPU, on the reader's thread) when the service starts rather than at the first delivery.
 */
import type { BackgroundService } from '../../background.js';
import { workerBasics, type Container } from '../../container.js';
import { DeliveryProcessor, type DeliveryProcessorDeps, type DeliveryProcessorOptions } from './delivery-processor.js';

/** What a delivery processor needs from the container. */
export function processorDependencies(container: Container): DeliveryProcessorDeps {
  return { ...workerBasics(container), reader: container.deliveryReader };
}

export function deliveryProcessorService(options: DeliveryProcessorOptions & { warmValidator?: boolean } = {}): BackgroundService {
  const { warmValidator = true, ...processorOptions } = options;
  return {
    name: 'delivery-processor',
    async start(container) {
      if (warmValidator) {
        // Not awaited: the thread compiles while this one serves (bodies wait behind it, requests do not).
        void container.deliveryReader
          .warm()
          .then((ms) => container.logger.info({ component: 'delivery-processor', ms: Math.round(ms) }, 'FHIR R4 validation compiled'));
      }
      const processor = new DeliveryProcessor(processorDependencies(container), processorOptions);
      processor.start();
      return { stop: () => processor.stop() };
    },
  };
}
