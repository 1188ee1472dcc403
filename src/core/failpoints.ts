/**
 * Named points in crash-sensitive sequences (commit and promotion) where a test can make
 * the process die the way a machine does. Inert in production: nothing arms a point
 * unless a test seam does (test/helpers/failpoint-preload.ts, loaded with `node --import`
 * into a berth process a test spawns), so `failpoint()` is a lookup in an empty map.
 *
 * In the order a commit passes them: the layer sealed; uploaded; the store commit made and
 * the promotion not begun; half of the promotion's plan applied; the promotion done and
 * not yet marked in the store. Then a checkpoint's points, and the channel runner's (src/channels/).
 */
export const COMMIT_FAILPOINTS = [
  'after-seal',
  'after-upload',
  'before-promote',
  'mid-promotion',
  'before-mark-promoted',
] as const;
export type CommitFailpointName = (typeof COMMIT_FAILPOINTS)[number];

/**
 * A checkpoint's (worker/turn-checkpoints.ts): its files captured and its sandbox still frozen
 * (context: `merged`, the turn's workspace as the host sees it); its object uploaded and not
 * recorded; recorded and not yet answered. At a model call (gateway/model-proxy.ts), then:
 * recorded and the request not yet forwarded upstream.
 */
export const CHECKPOINT_FAILPOINTS = [
  'checkpoint-frozen',
  'checkpoint-after-upload',
  'checkpoint-after-record',
  'model-before-forward',
] as const;

/**
 * A channel's (src/channels/): an update read from the platform and not yet committed;
 * committed and not yet acknowledged at the platform (Slack Socket Mode; a mail not yet
 * flagged \Seen); a send taken from the outbox and not yet sent; sent and not yet recorded.
 */
export const CHANNEL_FAILPOINTS = [
  'channel-before-commit',
  'channel-before-ack',
  'channel-after-commit',
  'channel-before-send',
  'channel-after-send',
] as const;

/**
 * A resident turn's (worker/resident-capture.ts): committed, its workspace not yet captured
 * into the chain (a machine lost here leaves that commit's writes on its disk only).
 */
export const RESIDENT_FAILPOINTS = ['resident-before-capture'] as const;

export const FAILPOINTS = [
  ...COMMIT_FAILPOINTS,
  ...CHECKPOINT_FAILPOINTS,
  ...CHANNEL_FAILPOINTS,
  ...RESIDENT_FAILPOINTS,
] as const;
export type FailpointName = (typeof FAILPOINTS)[number];

/** What a point tells the test seam of where it is (paths, ids), for a test that looks around there. */
export type FailpointContext = Readonly<Record<string, string>>;

const armed = new Map<FailpointName, (context: FailpointContext) => void>();

/** Runs what a test armed at this point, if anything. */
export function failpoint(name: FailpointName, context: FailpointContext = {}): void {
  armed.get(name)?.(context);
}

/** For test seams only: what `failpoint(name)` does from now on. */
export function armFailpoint(name: FailpointName, action: (context: FailpointContext) => void): void {
  armed.set(name, action);
}
