/**
 * The statements on `channels`, `channel_sessions`, `channel_messages`, `channel_refusals`
 * and `channel_outbox`. Written once for both engines (../statements.ts says in which
 * dialect). Each header lists the statement's parameters and what it returns.
 */

import { afterKey, afterTimeAndId } from '../keyset.js';

/**
 * A new channel.
 * @param id the channel
 * @param tenant its owner
 * @param platform telegram
 * @param agent the agent its sessions run
 * @param mapping per-chat or per-user
 * @param allowUsers JSON array
 * @param allowChats JSON array
 * @param tokenSecret the secret's name
 * @param signingSecret the signing secret's name, or null
 * @param appTokenSecret Slack's app-level token's name (Socket Mode), or null
 * @param webhookUrl Telegram's webhook base URL, or null (long polling)
 * @param respondTo all or mention
 * @param perThread 1 = mapping per-thread (stored with mapping per-chat)
 * @param email an email channel's settings (JSON), or null
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1
 */
export const INSERT_CHANNEL = `
INSERT INTO channels (id, tenant, platform, agent, mapping, allow_users, allow_chats, token_secret, signing_secret, app_token_secret, webhook_url, respond_to, per_thread, email, created_at)
VALUES (:id, :tenant, :platform, :agent, :mapping, :allowUsers, :allowChats, :tokenSecret, :signingSecret, :appTokenSecret, :webhookUrl, :respondTo, :perThread, :email, :now)`;

/**
 * A live channel.
 * @param id the channel
 * @returns the row, or none
 */
export const CHANNEL_BY_ID = `SELECT * FROM channels WHERE id = :id AND deleted_at IS NULL`;

/**
 * A page of a tenant's live channels, oldest first.
 * @param tenant null = every tenant
 * @param afterAt created_at of the previous page's last row (-1: the first page)
 * @param afterId its id ('' for the first page)
 * @param limit at most this many
 * @returns rows
 */
export const ALL_CHANNELS = `
SELECT * FROM channels WHERE deleted_at IS NULL AND (CAST(:tenant AS TEXT) IS NULL OR tenant = :tenant)
  AND ${afterTimeAndId('created_at')}`;

/**
 * A channel paused or resumed.
 * @param id the channel
 * @param paused 1 or 0
 * @returns changed rows: 1 = set, 0 = no live channel (the caller says CHANNEL_NOT_FOUND)
 */
export const SET_CHANNEL_PAUSED = `UPDATE channels SET paused = :paused WHERE id = :id AND deleted_at IS NULL`;

/**
 * A live channel removed (soft: its sessions and owed sends stay; it is polled no more).
 * @param id the channel
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = removed, 0 = there was none live
 */
export const DELETE_CHANNEL = `UPDATE channels SET deleted_at = :now, lease_owner = NULL WHERE id = :id AND deleted_at IS NULL`;

/**
 * Takes (or renews) the lease of a live, unpaused channel: free, expired, or already the caller's.
 * @param id the channel
 * @param owner the host process
 * @param now the transition's time, epoch ms
 * @param leaseUntil now + the lease
 * @returns changed rows: 1 = the caller holds it, 0 = another holds it (or it is paused or gone)
 */
export const TAKE_CHANNEL_LEASE = `
UPDATE channels SET lease_owner = :owner, lease_until = :leaseUntil
WHERE id = :id AND deleted_at IS NULL AND paused = 0
AND (lease_owner IS NULL OR lease_owner = :owner OR lease_until < :now)`;

/**
 * Gives a lease up.
 * @param id the channel
 * @param owner the host process
 * @returns changed rows: 1 = given up, 0 = it was not the caller's
 */
export const RELEASE_CHANNEL_LEASE = `
UPDATE channels SET lease_owner = NULL, lease_until = 0 WHERE id = :id AND lease_owner = :owner`;

/**
 * The fence of an inbound commit: the caller still holds the lease and the update is not
 * behind the cursor.
 * @param id the channel
 * @param owner the host process
 * @param now the transition's time, epoch ms
 * @param updateId the update
 * @returns the row when both hold, none otherwise
 */
export const CHANNEL_FENCE = `
SELECT * FROM channels WHERE id = :id AND lease_owner = :owner AND lease_until >= :now AND cursor <= :updateId AND deleted_at IS NULL`;

/**
 * The fence of a pushed event's commit: the channel is live and not paused (no lease: any
 * process may take a push, the event's id keeps it once).
 * @param id the channel
 * @returns the row, or none
 */
export const CHANNEL_ACCEPTING = `SELECT * FROM channels WHERE id = :id AND paused = 0 AND deleted_at IS NULL`;

/**
 * A pushed event marked applied; a second insert of the same id changes nothing.
 * @param channelId the channel
 * @param eventId the platform's event id
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = new, 0 = applied already
 */
export const INSERT_CHANNEL_EVENT = `
INSERT INTO channel_events (channel_id, event_id, created_at) VALUES (:channelId, :eventId, :now)
ON CONFLICT (channel_id, event_id) DO NOTHING`;

/**
 * Whether an event id of a channel was applied (and is still kept).
 * @param channelId the channel
 * @param eventId the platform's event id
 * @returns one row when it was
 */
export const CHANNEL_EVENT_APPLIED = `SELECT 1 AS applied FROM channel_events WHERE channel_id = :channelId AND event_id = :eventId`;

/**
 * A channel's pushed event ids applied before `before` forgotten: the platform retries no
 * delivery that old.
 * @param channelId the channel
 * @param before epoch ms
 * @returns changed rows: how many were forgotten
 */
export const PRUNE_CHANNEL_EVENTS = `DELETE FROM channel_events WHERE channel_id = :channelId AND created_at < :before`;

/**
 * The cursor moved past an update.
 * @param id the channel
 * @param cursor the update's id + 1
 * @returns changed rows: 1 = moved, 0 = it was past already (the caller rolls back)
 */
export const ADVANCE_CHANNEL_CURSOR = `UPDATE channels SET cursor = :cursor WHERE id = :id AND cursor < :cursor`;

/**
 * The last error a channel met (polling, sending), shown by list; null clears it.
 * @param id the channel
 * @param error or null
 * @returns changed rows: 0 or 1
 */
export const SET_CHANNEL_ERROR = `UPDATE channels SET last_error = :error WHERE id = :id`;

/**
 * A session bound to a chat (its first message); a second bind changes nothing.
 * @param sessionId the session
 * @param channelId the channel
 * @param chatId the chat
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = bound, 0 = it was already
 */
export const BIND_CHANNEL_SESSION = `
INSERT INTO channel_sessions (session_id, channel_id, chat_id, created_at) VALUES (:sessionId, :channelId, :chatId, :now)
ON CONFLICT (session_id) DO NOTHING`;

/**
 * The chat a session answers to.
 * @param sessionId the session
 * @returns the row, or none
 */
export const CHANNEL_SESSION = `SELECT * FROM channel_sessions WHERE session_id = :sessionId`;

/**
 * The chats of a channel whose sessions were active (claimed, released, committed) since
 * `since`, the most recently active first.
 * @param channelId the channel
 * @param since epoch ms
 * @param limit how many chats at most
 * @returns rows (chat_id)
 */
export const RECENT_CHANNEL_CHATS = `
SELECT cs.chat_id, MAX(s.updated_at) AS active_at FROM channel_sessions cs JOIN sessions s ON s.id = cs.session_id
WHERE cs.channel_id = :channelId AND s.updated_at >= :since
GROUP BY cs.chat_id ORDER BY active_at DESC, cs.chat_id LIMIT :limit`;

/**
 * The platform's id of an inbound message.
 * @param messageId berth's message
 * @param channelId the channel
 * @param chatId the chat
 * @param platformMessageId the platform's id
 * @param updateId the update it came in
 * @returns changed rows: 1
 */
export const INSERT_CHANNEL_MESSAGE = `
INSERT INTO channel_messages (message_id, channel_id, chat_id, platform_message_id, update_id)
VALUES (:messageId, :channelId, :chatId, :platformMessageId, :updateId)`;

/**
 * The platform's id of an inbound message.
 * @param messageId berth's message
 * @returns the row, or none
 */
export const CHANNEL_MESSAGE = `SELECT * FROM channel_messages WHERE message_id = :messageId`;

/**
 * When the chat was last refused.
 * @param channelId the channel
 * @param chatId the chat
 * @returns the row (last_at), or none
 */
export const CHANNEL_REFUSAL = `SELECT last_at FROM channel_refusals WHERE channel_id = :channelId AND chat_id = :chatId`;

/**
 * A refusal sent now to the chat.
 * @param channelId the channel
 * @param chatId the chat
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1
 */
export const UPSERT_CHANNEL_REFUSAL = `
INSERT INTO channel_refusals (channel_id, chat_id, last_at) VALUES (:channelId, :chatId, :now)
ON CONFLICT (channel_id, chat_id) DO UPDATE SET last_at = :now`;

/**
 * A send owed to a chat, due now.
 * @param channelId the channel
 * @param chatId the chat
 * @param kind reply, failure or refusal
 * @param eventId the event it comes from, or null
 * @param text what to send
 * @param replyTo the platform's id of the message it answers, or null
 * @param file JSON of the file to send (name, blob key, size), or null for a text
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1
 */
export const INSERT_CHANNEL_OUTBOX = `
INSERT INTO channel_outbox (channel_id, chat_id, kind, event_id, text, reply_to, file, status, next_attempt_at, created_at)
VALUES (:channelId, :chatId, :kind, :eventId, :text, :replyTo, :file, 'pending', :now, :now)`;

/**
 * A channel's oldest pending send: sends go out strictly in the order they were written
 * (a chat never sees a later reply before an earlier one), so the head waits for its own
 * retry time and nothing passes it.
 * @param channelId the channel
 * @returns the row, or none
 */
export const HEAD_CHANNEL_OUTBOX = `
SELECT * FROM channel_outbox WHERE channel_id = :channelId AND status = 'pending' ORDER BY id LIMIT 1`;

/**
 * One send.
 * @param id the send
 * @returns the row, or none
 */
export const CHANNEL_OUTBOX_BY_ID = `SELECT * FROM channel_outbox WHERE id = :id`;

/**
 * Takes a send for one attempt: next_attempt_at moves to the end of the attempt's lease.
 * It is due when its time came, or at once when another host process took it last: that
 * process lost the channel's lease (only the lease holder sends), so its attempt is over.
 * A send cut by a crash is therefore sent again (at-least-once).
 * @param id the send
 * @param owner the host process
 * @param now the transition's time, epoch ms
 * @param leaseUntil now + the attempt's lease
 * @returns changed rows: 1 = taken, 0 = it was not due
 */
export const TAKE_CHANNEL_OUTBOX = `
UPDATE channel_outbox SET attempts = attempts + 1, next_attempt_at = :leaseUntil, taken_by = :owner
WHERE id = :id AND status = 'pending' AND (next_attempt_at <= :now OR (taken_by IS NOT NULL AND taken_by <> :owner))`;

/**
 * One part of a send recorded as sent, with the platform's message id; the last part ends it.
 * @param id the send
 * @param attempt the number it was taken with
 * @param part the part's index (= parts_sent before it)
 * @param platformMessageIds the JSON array with this part's id appended
 * @param done 1 when this was the last part
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = recorded, 0 = stale (another attempt took the send)
 */
export const RECORD_CHANNEL_PART_SENT = `
UPDATE channel_outbox SET parts_sent = parts_sent + 1, platform_message_ids = :platformMessageIds,
  status = CASE WHEN :done = 1 THEN 'sent' ELSE status END,
  sent_at = CASE WHEN :done = 1 THEN CAST(:now AS BIGINT) ELSE sent_at END, last_error = NULL
WHERE id = :id AND attempts = :attempt AND parts_sent = :part AND status = 'pending'`;

/**
 * An attempt that did not send: due again at nextAttemptAt, or dead.
 * @param id the send
 * @param attempt the number it was taken with
 * @param status pending or dead
 * @param nextAttemptAt when it is due again
 * @param error why
 * @returns changed rows: 1 = recorded, 0 = stale
 */
export const END_CHANNEL_OUTBOX_ATTEMPT = `
UPDATE channel_outbox SET status = :status, next_attempt_at = :nextAttemptAt, last_error = :error
WHERE id = :id AND attempts = :attempt AND status = 'pending'`;

/**
 * A page of a channel's sends, oldest first (tests and the API read them).
 * @param channelId the channel
 * @param after id of the previous page's last row (null: the first page)
 * @param limit at most this many
 * @returns rows
 */
export const CHANNEL_OUTBOX_OF_CHANNEL = `SELECT * FROM channel_outbox WHERE channel_id = :channelId AND ${afterKey('id', 'BIGINT')}`;

/**
 * The messages that may still need the chat files their data names (not yet done with);
 * the rule itself is core's (usesChannelFile).
 * @returns rows (status, data)
 */
export const CHANNEL_FILES_OF_MESSAGES = `
SELECT status, data FROM messages WHERE status IN ('pending', 'processing') AND data LIKE '%"inbox"%'`;

/**
 * The outbox rows that may still need the file they send (not yet sent or dead).
 * @returns rows (status, file)
 */
export const CHANNEL_FILES_OF_OUTBOX = `
SELECT status, file FROM channel_outbox WHERE status = 'pending' AND file IS NOT NULL`;
