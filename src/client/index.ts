/** client: the TypeScript SDK for the berth API (package export `berth/client`). */

export type * from '../core/api-schemas.js';
export type {
  Agent,
  ApiTokenRow,
  FileChange,
  FileSide,
  Message,
  SandboxFileEntry,
  SessionEvent,
  SessionView,
  TreeEntryInfo,
  Turn,
  TurnDetail,
  TurnDiff,
  TurnFault,
  WorkerRow,
  WorkspacePathInfo,
} from '../core/index.js';
export { BerthError, isBerthError, verifyWebhookSignature, type WebhookPayload } from '../core/index.js';
export * from './berth.js';
export { ApiClient, parseSseBlock, type StreamedEvent } from './http.js';
export type { FileBody, SandboxFiles } from './sandbox-files.js';
