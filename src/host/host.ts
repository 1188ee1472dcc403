/**
 * A host: one store, one worker and (unless worker-only) the HTTP API in this process:
 * `berth up` is both, `berth worker` a worker alone sharing the store. Checks the blob
 * store, the engine, the image and overlayfs before anything is accepted, so a broken
 * set-up fails at start with the fix, not at the first message.
 */

import type Dockerode from 'dockerode';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import {
  assertListenAllowed,
  BerthMetrics,
  buildApp,
  ensureAdminToken,
  timeStoreCalls,
} from '../api/index.js';
import { type BlobStore, openBlobStore } from '../blobs/index.js';
import {
  ChannelRunner,
  discordClientFactory,
  emailClientFactory,
  slackClientFactory,
  telegramClientFactory,
  WebhookDispatcher,
} from '../channels/index.js';
import { blobsConfigOf, type Clock, hostPaths, type ResolvedConfig, systemClock } from '../core/index.js';
import { EgressInterceptor } from '../gateway/index.js';
import {
  agentImageCheck,
  type BuildProgress,
  baseImageRecipe,
  baseImageTag,
  ensureBaseImage,
} from '../image/index.js';
import {
  assertDockerReachable,
  connectDocker,
  DockerRuntime,
  KubernetesRuntime,
  loadKubeConfig,
  type SandboxRuntime,
} from '../runtime/index.js';
import { SecretStore } from '../secrets/index.js';
import { openStore, type Store } from '../store/index.js';
import { ScheduleRunner, Worker } from '../worker/index.js';
import { WorkspaceHistory } from '../workspace/index.js';

export interface Host {
  config: ResolvedConfig;
  store: Store;
  /** Where mediated storage's contents live: a dir of this machine or a shared S3 bucket. */
  blobs: BlobStore;
  worker: Worker;
  /** null for a worker-only host. */
  app: FastifyInstance | null;
  /** This machine's Docker engine (the docker runtime's; not used by the kubernetes runtime). */
  docker: Dockerode;
  /** Where the API listens; '' for a worker-only host. */
  url: string;
  /** The operator's token (also in <data>/admin-token); '' for a worker-only host. */
  adminToken: string;
  close(): Promise<void>;
}

/** Shows a base image build (the CLI draws a progress line); none by default. */
export interface BuildReporter {
  update(p: BuildProgress): void;
  finish(message?: string): void;
}

const SILENT_BUILD: BuildReporter = { update: () => undefined, finish: () => undefined };

export async function resolveImage(
  docker: Dockerode,
  config: ResolvedConfig,
  reporter: BuildReporter = SILENT_BUILD,
): Promise<string> {
  if (config.image) return config.image;
  const paths = hostPaths(config.dataDir);
  const tag = baseImageTag(await baseImageRecipe(paths.imageCacheDir));
  const exists = await docker
    .getImage(tag)
    .inspect()
    .then(
      () => true,
      () => false,
    );
  if (exists) return tag;
  const result = await ensureBaseImage(docker, {
    cacheDir: paths.imageCacheDir,
    onProgress: (p) => reporter.update(p),
  });
  reporter.finish(`${result.tag} built`);
  return result.tag;
}

/** The configured sandbox runtime, checked: engine or cluster reachable, image (Docker) or nodes (Kubernetes) there. */
async function openRuntime(
  config: ResolvedConfig,
  docker: Dockerode,
  reporter: BuildReporter | undefined,
  clock: Clock,
): Promise<{ runtime: SandboxRuntime; image: string }> {
  if (config.runtime === 'kubernetes') {
    // The nodes' engines must hold the image (a registry's, via BERTH_IMAGE, or the base image loaded there).
    const image =
      config.image || baseImageTag(await baseImageRecipe(hostPaths(config.dataDir).imageCacheDir));
    const runtime = new KubernetesRuntime(
      loadKubeConfig(config.kubeconfig),
      {
        namespace: config.kubeNamespace,
        nodeSelector: config.kubeNodeSelector,
        runtimeClassRunsc: config.kubeRuntimeClassRunsc,
      },
      clock,
    );
    await runtime.check(image);
    return { runtime, image };
  }
  await assertDockerReachable(docker, config.dockerSocket);
  const image = await resolveImage(docker, config, reporter);
  const runtime = new DockerRuntime(docker, config.dockerSocket, clock);
  await runtime.check(image);
  return { runtime, image };
}

export async function startHost(
  config: ResolvedConfig,
  log: Logger,
  options: { api?: boolean; clock?: Clock; buildReporter?: BuildReporter } = {},
): Promise<Host> {
  // First: quick, and nothing to undo when it refuses (BLOBS_UNREACHABLE).
  const blobs = await openBlobStore(blobsConfigOf(config));
  const docker = connectDocker(config.dockerSocket);
  // The runtime is checked before the store opens (a broken engine fails first); its event
  // times follow the host's clock, known once the store is open.
  let clock: Clock = options.clock ?? systemClock;
  const { runtime, image } = await openRuntime(config, docker, options.buildReporter, {
    now: () => clock.now(),
  }).catch(async (err: unknown) => {
    await blobs.close();
    throw err;
  });
  const paths = hostPaths(config.dataDir);
  const untimedStore = await openStore({
    store: config.store,
    sqlitePath: paths.storeFile,
    leaseMs: config.leaseMs,
    retry: { retryBaseMs: config.retryBaseMs, retryMaxMs: config.retryMaxMs, maxTries: config.maxTries },
    onWarning: (message, err) => log.warn({ err }, message),
  });
  // PostgreSQL: the database server's clock, so workers on several machines agree on leases.
  clock = options.clock ?? untimedStore.clock;
  // The worker is created after the metrics (its store is the timed one); its pool is read at scrape time.
  const started: { worker?: Worker } = {};
  const metrics = new BerthMetrics({
    store: untimedStore,
    clock,
    warmPoolSize: () => started.worker?.warmPoolStats.ready ?? 0,
    workspaceCache: () => started.worker?.workspaceCacheStats,
  });
  const store = timeStoreCalls(untimedStore, metrics.storeCallSeconds);
  const api = options.api !== false;
  if (api) await assertListenAllowed(store, config.apiHost);
  const adminToken = api ? await ensureAdminToken(store, config.dataDir, clock.now()) : '';
  const secrets = new SecretStore({ path: paths.secretsFile, key: config.secretKey });
  const egress = await EgressInterceptor.open({
    caDir: paths.egressCaDir,
    secrets,
    extraCaFile: config.egressCaFile,
    clock,
  });
  const worker = new Worker({ config, store, runtime, clock, log, paths, image, secrets, egress, blobs });
  started.worker = worker;
  await worker.start();
  const schedules = new ScheduleRunner(store, clock, log);
  schedules.start();
  // Webhooks go out from the API process(es); a worker-only host sends none.
  const webhooks = api ? new WebhookDispatcher({ store, clock, config, log }) : undefined;
  webhooks?.start();
  // Channels run beside the webhooks, in the API process(es); a lease in the store lets one
  // process at a time drive each channel.
  const channels = api
    ? new ChannelRunner({
        store,
        clock,
        log: log.child({ component: 'channels' }),
        secrets,
        blobs,
        clients: {
          telegram: telegramClientFactory({ apiUrl: config.telegramApiUrl }),
          slack: slackClientFactory({ apiUrl: config.slackApiUrl }),
          discord: discordClientFactory({
            apiUrl: config.discordApiUrl,
            clock,
            recentChats: (channelId, since, limit) => store.recentChannelChats(channelId, since, limit),
          }),
          email: emailClientFactory(),
        },
        leaseMs: config.leaseMs,
        pollTimeoutMs: config.channelPollTimeoutMs,
        sendPolicy: {
          retryBaseMs: config.webhookRetryBaseMs,
          retryMaxMs: config.webhookRetryMaxMs,
          maxTries: config.webhookMaxAttempts,
        },
      })
    : undefined;
  channels?.start();
  // Agent images are built on, and checked against, this machine's engine; not a cluster's nodes.
  const agentImage =
    config.runtime === 'kubernetes' ? undefined : agentImageCheck(docker, paths.imageCacheDir);
  const history = new WorkspaceHistory(blobs);
  const app = api
    ? await buildApp({
        config,
        store,
        clock,
        log,
        webhooks,
        metrics,
        agentImage,
        history,
        blobs,
        secretNames: () => secrets.list(),
        secrets,
      })
    : null;
  const address = app ? await app.listen({ host: config.apiHost, port: config.apiPort }) : '';
  log.info(
    { address, dataDir: config.dataDir, blobs: blobs.location, image, workerId: worker.id },
    'berth host up',
  );
  let closing: Promise<void> | undefined;
  return {
    config,
    store,
    blobs,
    worker,
    app,
    docker,
    url: address,
    adminToken,
    /** Idempotent: API first (no new work), then the worker (sandboxes ended), then the store. */
    close() {
      closing ??= (async () => {
        await app?.close();
        await webhooks?.stop();
        await channels?.stop();
        await schedules.stop();
        await worker.stop();
        await store.close();
        await blobs.close();
      })();
      return closing;
    },
  };
}
