/** The operator operations over a running server's /admin API (fetch), for the CLI. */
import type {
  AccountRecord,
  AdminOperations,
  ApiKeyRecord,
  CreateAccountRequest,
  IssuedApiKey,
  VoiceImportRequest,
} from '../admin/admin-service.js';
import type { AddModelRequest, ModelRecord } from '../audio/engines/neural-install.js';
import type { Voice } from '../voices/voice-service.js';
import { CliError } from './cli-error.js';

interface Envelope {
  status?: number;
  code?: string;
  message?: string;
  data?: unknown;
}

/** Talks to `baseUrl`/admin with the admin token; API errors become CliErrors carrying the server's message. */
export class AdminHttpClient implements AdminOperations {
  private readonly baseUrl: string;

  constructor(
    baseUrl: string,
    private readonly adminToken: string,
    private readonly timeoutMs = 60_000,
  ) {
    this.baseUrl = baseUrl.replace(/\/+$/, '');
  }

  async createAccount(request: CreateAccountRequest): Promise<AccountRecord> {
    return this.call<AccountRecord>('POST', '/admin/accounts', request);
  }

  async listAccounts(): Promise<AccountRecord[]> {
    return this.call<AccountRecord[]>('GET', '/admin/accounts');
  }

  async createKey(account: string): Promise<IssuedApiKey> {
    return this.call<IssuedApiKey>('POST', `/admin/accounts/${encodeURIComponent(account)}/keys`);
  }

  async listKeys(account: string): Promise<ApiKeyRecord[]> {
    return this.call<ApiKeyRecord[]>('GET', `/admin/accounts/${encodeURIComponent(account)}/keys`);
  }

  async revokeKey(keyId: string): Promise<void> {
    await this.call<unknown>('POST', `/admin/keys/${encodeURIComponent(keyId)}/revoke`);
  }

  async importVoice(account: string, request: VoiceImportRequest): Promise<Voice> {
    return this.call<Voice>('POST', `/admin/accounts/${encodeURIComponent(account)}/voices/import`, request);
  }

  async listModels(): Promise<ModelRecord[]> {
    return this.call<ModelRecord[]>('GET', '/admin/models');
  }

  async addModel(request: AddModelRequest): Promise<ModelRecord> {
    // A download of a large model takes minutes.
    return this.call<ModelRecord>('POST', '/admin/models', request, 60 * 60_000);
  }

  async removeModel(name: string): Promise<void> {
    await this.call<unknown>('DELETE', `/admin/models/${encodeURIComponent(name)}`);
  }

  async exportVoices(account: string): Promise<VoiceImportRequest[]> {
    return this.call<VoiceImportRequest[]>(
      'GET',
      `/admin/accounts/${encodeURIComponent(account)}/voices/export`,
    );
  }

  private async call<T>(
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body?: unknown,
    timeoutMs = this.timeoutMs,
  ): Promise<T> {
    const url = `${this.baseUrl}${path}`;
    let response: Response;
    try {
      response = await fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${this.adminToken}`,
          ...(body !== undefined && { 'content-type': 'application/json' }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      const reason =
        err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : '';
      throw new CliError(`cannot reach the voicegen server at ${this.baseUrl}: ${reason}`, 2);
    }
    const text = await response.text();
    let envelope: Envelope | undefined;
    try {
      envelope = JSON.parse(text) as Envelope;
    } catch {
      envelope = undefined;
    }
    if (response.ok && envelope !== undefined) return envelope.data as T;
    throw this.failure(response.status, envelope);
  }

  private failure(status: number, envelope: Envelope | undefined): CliError {
    const message = envelope?.message ?? `HTTP ${status}`;
    if (status === 401) {
      return new CliError(
        `${message} — pass the server's admin token with --admin-token TOKEN or ADMIN_TOKEN`,
        2,
      );
    }
    if (status === 404 && envelope?.code === 'RESOURCE_NOT_FOUND' && message.startsWith('no route')) {
      return new CliError(
        `the server at ${this.baseUrl} has no admin API (it needs ADMIN_TOKEN when it uses DATABASE_URL)`,
        2,
      );
    }
    return new CliError(message, 1);
  }
}
