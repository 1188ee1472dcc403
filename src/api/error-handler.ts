/** Every error leaves the API as {error: {code, message, hint}} with the catalogue's status. */
import type { FastifyError, FastifyInstance } from 'fastify';
import { BerthError } from '../core/index.js';

export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    const error = toBerthError(err);
    if (error.code === 'INTERNAL') request.log.error({ err }, 'Request failed');
    void reply.status(error.status).send(error.toJSON());
  });
  app.setNotFoundHandler((request, reply) => {
    const error = new BerthError('NOT_FOUND', `No route ${request.method} ${request.url}`);
    void reply.status(error.status).send(error.toJSON());
  });
}

function toBerthError(err: FastifyError): BerthError {
  if (err instanceof BerthError) return err;
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new BerthError('INVALID_INPUT', `Request body is not valid JSON: ${err.message}`, {
        cause: err,
      });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new BerthError('MESSAGE_TOO_LARGE', 'Request body is over the size limit', { cause: err });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new BerthError('INVALID_INPUT', 'Send the body as application/json', { cause: err });
  }
  if (err.statusCode && err.statusCode < 500)
    return new BerthError('INVALID_INPUT', err.message, { cause: err });
  return new BerthError('INTERNAL', `Internal error: ${err.message}`, { cause: err });
}
