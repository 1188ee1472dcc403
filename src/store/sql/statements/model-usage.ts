/**
 * The statements on `model_usage`: one row per upstream model call. Written once for both
 * engines (../statements.ts says in which dialect). Each header lists the statement's
 * parameters and what it returns; a guarded one (@guard) must change exactly one row, and
 * says why nothing else can happen (statements.test.ts holds the headers to the SQL and
 * the guards to their callers).
 */

/**
 * One upstream model call's token counts.
 * @param now the transition's time, epoch ms
 * @param agent the calling agent
 * @param sessionId its session
 * @param turnId its turn
 * @param generation its generation
 * @param provider anthropic or openai
 * @param model the model
 * @param inputTokens as reported
 * @param outputTokens as reported
 * @returns changed rows: 1
 */
export const INSERT_MODEL_USAGE = `
INSERT INTO model_usage (at, agent, session_id, turn_id, generation, provider, model, input_tokens, output_tokens)
VALUES (:now, :agent, :sessionId, :turnId, :generation, :provider, :model, :inputTokens, :outputTokens)`;

/**
 * Totals over the model calls matching every given filter (null matches all).
 * @param agent or null
 * @param turnId or null
 * @param since epoch ms, or null
 * @returns one row (calls, input_tokens, output_tokens, turns: distinct)
 */
export const SUM_MODEL_USAGE = `
SELECT COUNT(*) AS calls, COALESCE(SUM(input_tokens), 0) AS input_tokens,
  COALESCE(SUM(output_tokens), 0) AS output_tokens, COUNT(DISTINCT turn_id) AS turns
FROM model_usage
WHERE (CAST(:agent AS TEXT) IS NULL OR agent = :agent) AND (CAST(:turnId AS TEXT) IS NULL OR turn_id = :turnId)
  AND (CAST(:since AS BIGINT) IS NULL OR at >= :since)`;

/**
 * One turn's model calls, oldest first (a turn's timeline).
 * @param turnId the turn
 * @returns rows (at, turn_id, provider, model, input_tokens, output_tokens)
 */
export const MODEL_CALLS_OF_TURN = `
SELECT at, turn_id, provider, model, input_tokens, output_tokens FROM model_usage WHERE turn_id = :turnId ORDER BY at, id`;
