/**
 * Who may call what: each role is the part of the Store one kind of caller is handed,
 * named after that caller. The full Store is every role at once (and the few methods no
 * role needs); only the composition root (host/), the chaos harness and tests hold it.
 * A role only names methods: what each does is documented once, in store.ts.
 *
 * A caller that needs a method its role lacks changes the role here, in sight of the
 * others, rather than being handed the whole Store.
 */
import type { Store } from './store.js';

/**
 * A sandbox's gateway (gateway/): the turn it serves (progress, commit, abort, committed
 * state), the schedules its turn may make, model usage and budgets, mediated storage,
 * audit. Every write is fenced by the sandbox's generation.
 */
export interface GatewayStore
  extends Pick<
    Store,
    | 'recordProgress'
    | 'commitTurn'
    | 'abortTurn'
    | 'getState'
    | 'listSchedules'
    | 'countAgentMadeSchedules'
    | 'recordModelUsage'
    | 'sumModelUsage'
    | 'listStorageGrants'
    | 'listStorageObjects'
    | 'getStorageObject'
    | 'putStorageObject'
    | 'recordCheckpoint'
    | 'journalModelResponse'
    | 'findModelResponse'
    | 'deleteStorageObject'
    | 'audit'
  > {}

/**
 * A worker (worker/): its own row and lease renewal, the sweep, the claim queue, the
 * session it supervises (sandbox record, turn start, layer settlement, release) and the
 * local clean-up; it serves its sandboxes' gateways, so it holds their role too.
 */
export interface WorkerStore
  extends GatewayStore,
    Pick<
      Store,
      | 'onChange'
      | 'registerWorker'
      | 'renewWorker'
      | 'removeWorker'
      | 'drainWorker'
      | 'getWorker'
      | 'listWorkers'
      | 'reclaimExpiredLeases'
      | 'claimRunnableSession'
      | 'queueDepth'
      | 'nextProcessAfter'
      | 'recordSandbox'
      | 'recordResidentHolder'
      | 'recordResidentCapture'
      | 'recordSandboxes'
      | 'startTurn'
      | 'getTurn'
      | 'markLayerPromoted'
      | 'getWorkspaceChain'
      | 'recordWorkspaceSnapshot'
      | 'isWorkspaceObjectNamed'
      | 'releaseSession'
      | 'getSessionView'
      | 'isStorageBlobNamed'
      | 'listCheckpoints'
      | 'sweepCheckpoints'
      | 'isCheckpointObjectNamed'
      | 'channelFileUses'
    > {}

/**
 * The HTTP API (api/): what clients ask for (agents, sessions and their messages, turns
 * and events, tokens, webhooks, schedules, storage grants) and what /v1/status and
 * /metrics show. It writes desired state only; status is the worker's (taking back a
 * message no worker has taken is the one status it writes, as archiving does).
 */
export interface ApiStore
  extends Pick<
    Store,
    | 'onChange'
    | 'createAgent'
    | 'getAgent'
    | 'listAgents'
    | 'replaceAgentSpec'
    | 'deleteAgent'
    | 'createSession'
    | 'archiveSession'
    | 'requestRecycle'
    | 'releaseHold'
    | 'forkSession'
    | 'rewindSession'
    | 'enqueueMessage'
    | 'cancelMessage'
    | 'requestInterrupt'
    | 'getSessionView'
    | 'listSessionViews'
    | 'sessionCounts'
    | 'listMessages'
    | 'listTurns'
    | 'getTurnRecord'
    | 'turnActivity'
    | 'getWorkspaceChain'
    | 'eventsAfter'
    | 'eventLog'
    | 'lastEventId'
    | 'queuePositions'
    | 'listQueue'
    | 'meanTurnMs'
    | 'listWorkers'
    | 'drainWorker'
    | 'listSandboxes'
    | 'liveSandboxOf'
    | 'liveSlots'
    | 'queueDepth'
    | 'insertApiToken'
    | 'principalOfTokenHash'
    | 'listApiTokens'
    | 'revokeApiToken'
    | 'createChannel'
    | 'listChannels'
    | 'getChannel'
    | 'pauseChannel'
    | 'deleteChannel'
    | 'listChannelOutbox'
    | 'commitChannelEvent'
    | 'channelEventApplied'
    | 'createWebhook'
    | 'listWebhooks'
    | 'getWebhook'
    | 'deleteWebhook'
    | 'listWebhookDeliveries'
    | 'retryWebhookDelivery'
    | 'webhookDeliveryCounts'
    | 'createSchedule'
    | 'listSchedules'
    | 'moveScheduleTo'
    | 'grantStorage'
    | 'listStorageGrants'
    | 'revokeStorageGrant'
    | 'listStorageObjects'
  > {}

/** The schedule runner (worker/schedule-runner.ts, in every host process): due runs, nothing else. */
export interface ScheduleRunnerStore extends Pick<Store, 'runDueSchedules'> {}

/** The webhook dispatcher (channels/webhook-dispatcher.ts): takes due deliveries and records their attempts. */
export interface WebhookDispatcherStore
  extends Pick<Store, 'onChange' | 'takeWebhookDelivery' | 'recordWebhookAttempt'> {}

/** The channel runner (channels/channel-runner.ts, in every API host process): leases, inbound commits, the outbox. */
export interface ChannelRunnerStore
  extends Pick<
    Store,
    | 'onChange'
    | 'listChannels'
    | 'takeChannelLease'
    | 'releaseChannelLease'
    | 'recordChannelError'
    | 'commitChannelInbound'
    | 'commitChannelEvent'
    | 'channelEventApplied'
    | 'recentChannelChats'
    | 'getAgent'
    | 'takeChannelSend'
    | 'nextChannelSendAt'
    | 'recordChannelPartSent'
    | 'endChannelSendAttempt'
  > {}

/**
 * What only the full Store offers, no role: opening and closing it, its engine and
 * clock (the host reads them), and the audit listing tests read.
 */
export type FullStoreOnly = Exclude<
  keyof Store,
  keyof (GatewayStore &
    WorkerStore &
    ApiStore &
    ScheduleRunnerStore &
    WebhookDispatcherStore &
    ChannelRunnerStore)
>;
