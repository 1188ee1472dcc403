/**
 * The host's secret store: provider API keys and per-agent secrets, by name, in one
 * JSON file in the data dir (mode 0600, written through a temp file, fsync and rename,
 * so a reader sees the old file or the new one, never half of one). Values never enter
 * a sandbox: the gateway reads them on the host and adds them to requests in transit.
 *
 * With a key (BERTH_SECRET_KEY) every value is encrypted at rest with AES-256-GCM: the
 * AES key is scrypt(BERTH_SECRET_KEY, salt) with a random salt kept in the file, each
 * value has its own random 96-bit IV, and the secret's name is the additional
 * authenticated data, so a value moved to another name fails to decrypt. Without a key
 * values are stored as they are (the file mode is then the only protection); a file
 * holding encrypted values refuses to be read or written without the right key.
 * Two processes setting secrets at the same moment: the last rename wins.
 */
import { createCipheriv, createDecipheriv, randomBytes, scryptSync } from 'node:crypto';
import { mkdir, readFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { BerthError, NAME_PATTERN } from '../core/index.js';
import { writeFileAtomic } from '../durable-files/index.js';

type Entry = { plain: string } | { iv: string; tag: string; data: string };

interface SecretFile {
  version: 1;
  /** base64 scrypt salt; present once a value was encrypted. */
  salt?: string;
  secrets: Record<string, Entry>;
}

export interface SecretStoreOptions {
  /** The file, e.g. <data>/secrets.json. */
  path: string;
  /** BERTH_SECRET_KEY; empty = values stored unencrypted. */
  key: string;
}

export class SecretStore {
  /** scrypt is slow on purpose: derive once per salt. */
  private derived: { salt: string; key: Buffer } | null = null;

  constructor(private readonly o: SecretStoreOptions) {}

  /** The value, or undefined when no secret has this name. */
  async get(name: string): Promise<string | undefined> {
    const file = await this.read();
    const entry = file.secrets[name];
    return entry === undefined ? undefined : this.open(file, name, entry);
  }

  async set(name: string, value: string): Promise<void> {
    if (!NAME_PATTERN.test(name)) {
      throw new BerthError(
        'INVALID_INPUT',
        `Secret name ${JSON.stringify(name.slice(0, 80))} is not allowed: 1-64 of A-Z a-z 0-9 _ - . starting with a letter or digit`,
        { hint: 'Use a name like anthropic, openai or github-token.' },
      );
    }
    if (value.length === 0) throw new BerthError('INVALID_INPUT', `Secret ${name} needs a non-empty value`);
    const file = await this.read();
    if (this.o.key) {
      // Re-seal every value: values stored before a key was set become encrypted too.
      const values = Object.entries(file.secrets).map(([n, e]) => [n, this.open(file, n, e)] as const);
      file.salt ??= randomBytes(16).toString('base64');
      for (const [n, v] of [...values, [name, value] as const]) file.secrets[n] = this.seal(file, n, v);
    } else {
      if (file.salt !== undefined) this.keyFor(file); // throws SECRET_STORE_LOCKED: no key, encrypted file
      file.secrets[name] = { plain: value };
    }
    await this.write(file);
  }

  /** Names only, sorted; values are never listed. */
  async list(): Promise<string[]> {
    return Object.keys((await this.read()).secrets).sort();
  }

  private async read(): Promise<SecretFile> {
    let text: string;
    try {
      text = await readFile(this.o.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, secrets: {} };
      throw err;
    }
    try {
      const file = JSON.parse(text) as SecretFile;
      if (file.version !== 1 || typeof file.secrets !== 'object' || file.secrets === null) throw new Error();
      return file;
    } catch (err) {
      throw new BerthError('SECRET_STORE_LOCKED', `Secret file ${this.o.path} is not a berth secret file`, {
        cause: err,
        hint: 'Restore it from a backup, or move it away and set the secrets again.',
      });
    }
  }

  private async write(file: SecretFile): Promise<void> {
    await mkdir(dirname(this.o.path), { recursive: true });
    await writeFileAtomic(this.o.path, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
  }

  private open(file: SecretFile, name: string, entry: Entry): string {
    if ('plain' in entry) return entry.plain;
    const decipher = createDecipheriv('aes-256-gcm', this.keyFor(file), Buffer.from(entry.iv, 'base64'));
    decipher.setAAD(Buffer.from(name));
    decipher.setAuthTag(Buffer.from(entry.tag, 'base64'));
    try {
      return Buffer.concat([decipher.update(Buffer.from(entry.data, 'base64')), decipher.final()]).toString(
        'utf8',
      );
    } catch (err) {
      throw new BerthError(
        'SECRET_STORE_LOCKED',
        `Secret ${name} in ${this.o.path} does not decrypt with this BERTH_SECRET_KEY`,
        { cause: err },
      );
    }
  }

  private seal(file: SecretFile, name: string, value: string): Entry {
    const iv = randomBytes(12);
    const cipher = createCipheriv('aes-256-gcm', this.keyFor(file), iv);
    cipher.setAAD(Buffer.from(name));
    const data = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
    return {
      iv: iv.toString('base64'),
      tag: cipher.getAuthTag().toString('base64'),
      data: data.toString('base64'),
    };
  }

  private keyFor(file: SecretFile): Buffer {
    if (!this.o.key) {
      throw new BerthError(
        'SECRET_STORE_LOCKED',
        `Secret file ${this.o.path} is encrypted and BERTH_SECRET_KEY is not set`,
      );
    }
    const salt = file.salt!;
    if (this.derived?.salt !== salt)
      this.derived = { salt, key: scryptSync(this.o.key, Buffer.from(salt, 'base64'), 32) };
    return this.derived.key;
  }
}
