/**
 * The delivery processor as a background service of `carepath serve` and `carepath worker`
 * (src/background.ts). The process's delivery reader compiles its FHIR validation (about 3 s of
 * CPU, on the reader's thread; far longer on a busy machine) when the service starts rather than
 * at the first delivery, and the processor takes deliveries only once that is done. It took them
 * at once, and each claim counts an attempt: a process killed again and again while starting up
 * (a crash loop, an orchestrator's restarts) used up the five attempts of deliveries it never
 * began to process, and marked them `failed` (a durability review).
 */
import type { BackgroundService } from '../../background.js';
import { workerBasics, type Container } from '../../container.js';
import { DeliveryProcessor, type DeliveryProcessorDeps, type DeliveryProcessorOptions } from './delivery-processor.js';
import { loggableError } from '../../lib/store-errors.js';

/** What a delivery processor needs from the container. */
export function processorDependencies(container: Container): DeliveryProcessorDeps {
  return { ...workerBasics(container), reader: container.deliveryReader };
}

export function deliveryProcessorService(options: DeliveryProcessorOptions & { warmValidator?: boolean } = {}): BackgroundService {
  const { warmValidator = true, ...processorOptions } = options;
  return {
    name: 'delivery-processor',
    async start(container) {
      const processor = new DeliveryProcessor(processorDependencies(container), processorOptions);
      let stopped = false;
      const begin = () => {
        if (!stopped) processor.start();
      };
      if (warmValidator) {
        // Not awaited: the thread compiles while this one serves (bodies wait behind it, requests
        // do not); deliveries stored meanwhile wait `received` for no one.
        void container.deliveryReader
          .warm()
          .then((ms) => container.logger.info({ component: 'delivery-processor', ms: Math.round(ms) }, 'FHIR R4 validation compiled'))
          .catch((error: unknown) => container.logger.warn({ component: 'delivery-processor', err: loggableError(error) }, 'compiling FHIR R4 validation ahead failed; it compiles at the first delivery'))
          .finally(begin);
      } else {
        begin();
      }
      return {
        owner: processor.owner,
        stop: () => {
          stopped = true;
          return processor.stop();
        },
      };
    },
  };
}
