/** cli: the `berth` command and the in-process host it runs. */
export { ApiClient, type StreamedEvent } from '../client/index.js';
export { type Host, startHost } from '../host/index.js';
export { main } from './main.js';
export { timelineLine } from './turn-timeline-lines.js';
