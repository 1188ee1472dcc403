/** The session a route names, as the caller's tenant sees it: another tenant's is SESSION_NOT_FOUND, like one that does not exist. */
import { assertSessionId, BerthError, type Clock, type SessionView } from '../core/index.js';
import type { ApiStore } from '../store/index.js';

export async function ownSessionView(
  store: Pick<ApiStore, 'getSessionView'>,
  clock: Clock,
  id: string,
  tenant: string | undefined,
): Promise<SessionView> {
  const sessionId = assertSessionId(id);
  const view = await store.getSessionView(sessionId, clock.now(), tenant);
  if (!view) throw new BerthError('SESSION_NOT_FOUND', `Session ${sessionId} does not exist`);
  return view;
}
