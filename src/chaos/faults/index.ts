/** faults: the fault injector, one module a fault kind. */
export { FaultInjector, type FaultInjectorOptions } from './fault-injector.js';
