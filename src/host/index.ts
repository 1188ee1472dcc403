/** host: the composition root. One store, one worker and (unless worker-only) the HTTP API in this process. */
export { type BuildReporter, type Host, resolveImage, startHost } from './host.js';
