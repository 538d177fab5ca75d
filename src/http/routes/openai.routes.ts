/**
 * The OpenAI-compatible routes: `POST /v1/audio/speech` (bearer key, in the tenant API with its
 * limits) and the lists `GET /v1/models`, `/v1/audio/models`, `/v1/audio/voices`, which answer
 * without a key (public entries only) as Open WebUI asks them, unless the operator turns that off.
 * Errors on every `/v1` path are in OpenAI's shape (openai-errors.ts).
 */
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AccountService } from '../../accounts/account-service.js';
import { errors } from '../../errors/app-error.js';
import type { OpenAiCatalogue } from '../../openai/catalogue.js';
import type { OpenAiSpeech } from '../../openai/openai-speech.js';
import { accountOf, bearerToken } from '../auth.js';
import { clientGone } from '../response-signals.js';
import { openAiSchemas } from './openai.schemas.js';

/** `POST /v1/audio/speech`; register inside the tenant scope (bearer key, rate limits). */
export function openAiSpeechRoutes(speech: OpenAiSpeech) {
  return async (app: FastifyInstance): Promise<void> => {
    app.post('/v1/audio/speech', { schema: openAiSchemas.speech }, async (request, reply) => {
      const signal = clientGone(reply);
      let answer: Awaited<ReturnType<OpenAiSpeech['speak']>>;
      try {
        answer = await speech.speak(accountOf(request).id, request.body, signal);
      } catch (err) {
        // The client left while waiting: nobody to answer (the task itself goes on).
        if (signal.aborted) return reply.hijack();
        throw err;
      }
      void reply
        .header('Content-Type', answer.contentType)
        .header('Cache-Control', 'no-store')
        .header('X-Service-Audio-Id', answer.info.id)
        .header('X-Service-Response-Data', JSON.stringify(answer.info));
      // No Content-Length: the audio is still being generated, so the reply is chunked.
      return reply.send(Readable.from(answer.body, { objectMode: false }));
    });
  };
}

export interface OpenAiListOptions {
  accounts: Pick<AccountService, 'authenticate'>;
  /** Lists answer without a key (public entries only); false = 401 without a key. */
  publicLists: boolean;
}

/**
 * The lists; register outside the tenant scope (their key is optional), behind a per-address
 * rate limit. A key that is given must be valid: a wrong key is 401, not a public list.
 */
export function openAiListRoutes(catalogue: OpenAiCatalogue, options: OpenAiListOptions) {
  return async (app: FastifyInstance): Promise<void> => {
    const accountId = async (request: FastifyRequest): Promise<string | undefined> => {
      if (request.headers.authorization === undefined) {
        if (!options.publicLists)
          throw errors.unauthorized('an API key is required (Authorization: Bearer …)');
        return undefined;
      }
      return (await options.accounts.authenticate(bearerToken(request))).id;
    };
    app.get('/v1/models', { schema: openAiSchemas.models }, async (request) => {
      await accountId(request);
      return catalogue.modelList();
    });
    app.get('/v1/audio/models', { schema: openAiSchemas.audioModels }, async (request) => {
      await accountId(request);
      return { models: (await catalogue.models()).map((id) => ({ id })) };
    });
    app.get('/v1/audio/voices', { schema: openAiSchemas.audioVoices }, async (request) => ({
      voices: await catalogue.voiceList(await accountId(request)),
    }));
  };
}
