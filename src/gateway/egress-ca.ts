/**
 * The per-install certificate authority of egress interception: the gateway
 * terminates a sandbox's TLS to a target with header rules, so it must present a
 * certificate for that host the sandbox trusts. The CA is made once per data dir (key
 * file 0600 in a 0700 directory; the key never leaves the host) and its certificate, the
 * public part only, is added to the sandbox's trust bundle at bind time. Leaf
 * certificates are minted on demand, one per host, short-lived, cached in memory.
 *
 * Node 20 cannot create X.509 certificates: node-forge (pure JS, no dependencies, no
 * install script) builds and signs them; keys are made by node:crypto.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { isIPv4 } from 'node:net';
import { join } from 'node:path';
import { createSecureContext, type SecureContext } from 'node:tls';
import forge from 'node-forge';
import { BerthError, type Clock, systemClock } from '../core/index.js';
import { fsyncPath, moveIntoPlace, stagingPath } from '../durable-files/index.js';

const KEY_FILE = 'ca-key.pem';
const CERT_FILE = 'ca.pem';
const HOUR_MS = 3_600_000;
const CA_VALIDITY_MS = 10 * 365 * 24 * HOUR_MS;
const LEAF_VALIDITY_MS = 7 * 24 * HOUR_MS;
/** A cached leaf with less validity left than this is minted again. */
const LEAF_RENEW_MS = 24 * HOUR_MS;
const MAX_CACHED_LEAVES = 1024;

export interface Leaf {
  /** Private key and certificate chain (leaf, then CA), PEM. */
  key: string;
  cert: string;
  /** The same, as a TLS server context. */
  context: SecureContext;
  notAfter: number;
}

export class EgressCa {
  private readonly leaves = new Map<string, Leaf>();
  /** One key for every leaf of this process: minting a leaf is then one signature. */
  private leafKey: { pem: string; forge: forge.pki.rsa.PublicKey } | null = null;

  private constructor(
    /** The CA certificate (PEM): what sandboxes trust. */
    readonly certificatePem: string,
    private readonly caKey: forge.pki.rsa.PrivateKey,
    private readonly caCert: forge.pki.Certificate,
    /** Validity windows start from it. */
    private readonly clock: Clock,
  ) {}

  /** Loads the CA in `dir`, making it on first use (two processes racing: one rename wins, both use it). */
  static async open(dir: string, clock: Clock = systemClock): Promise<EgressCa> {
    const loaded = await EgressCa.load(dir, clock);
    if (loaded) return loaded;
    const staging = stagingPath(dir);
    await mkdir(staging, { recursive: true, mode: 0o700 });
    const made = makeCa(clock.now());
    await writeFile(join(staging, KEY_FILE), made.keyPem, { mode: 0o600 });
    await writeFile(join(staging, CERT_FILE), made.certPem, { mode: 0o644 });
    // Sandboxes are made to trust this certificate: it must not come back torn after a power cut.
    for (const file of [KEY_FILE, CERT_FILE, '']) await fsyncPath(join(staging, file));
    await moveIntoPlace(staging, dir);
    const opened = await EgressCa.load(dir, clock);
    if (!opened)
      throw new BerthError('INTERNAL', `Egress CA in ${dir} vanished while it was made (EgressCa.open)`);
    return opened;
  }

  private static async load(dir: string, clock: Clock): Promise<EgressCa | null> {
    let keyPem: string;
    let certPem: string;
    try {
      [keyPem, certPem] = await Promise.all([
        readFile(join(dir, KEY_FILE), 'utf8'),
        readFile(join(dir, CERT_FILE), 'utf8'),
      ]);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    return new EgressCa(
      certPem,
      forge.pki.privateKeyFromPem(keyPem),
      forge.pki.certificateFromPem(certPem),
      clock,
    );
  }

  /** A certificate for `host` (DNS name or IPv4) signed by this CA, with its key. */
  leafFor(host: string, now = this.clock.now()): Leaf {
    const cached = this.leaves.get(host);
    if (cached && cached.notAfter - now > LEAF_RENEW_MS) return cached;
    if (!this.leafKey) {
      const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      this.leafKey = {
        pem: privateKey.export({ type: 'pkcs1', format: 'pem' }) as string,
        forge: forge.pki.publicKeyFromPem(publicKey.export({ type: 'spki', format: 'pem' }) as string),
      };
    }
    const cert = forge.pki.createCertificate();
    cert.publicKey = this.leafKey.forge;
    cert.serialNumber = serialNumber();
    cert.validity.notBefore = new Date(now - HOUR_MS);
    cert.validity.notAfter = new Date(now + LEAF_VALIDITY_MS);
    cert.setSubject([{ name: 'commonName', value: host }]);
    cert.setIssuer(this.caCert.subject.attributes);
    cert.setExtensions([
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [isIPv4(host) ? { type: 7, ip: host } : { type: 2, value: host }] },
      {
        name: 'authorityKeyIdentifier',
        keyIdentifier: this.caCert.generateSubjectKeyIdentifier().getBytes(),
      },
    ]);
    cert.sign(this.caKey, forge.md.sha256.create());
    const key = this.leafKey.pem;
    const chain = `${forge.pki.certificateToPem(cert)}${this.certificatePem}`;
    const leaf = {
      key,
      cert: chain,
      context: createSecureContext({ key, cert: chain }),
      notAfter: now + LEAF_VALIDITY_MS,
    };
    if (this.leaves.size >= MAX_CACHED_LEAVES) this.leaves.delete(this.leaves.keys().next().value!);
    this.leaves.set(host, leaf);
    return leaf;
  }
}

function makeCa(now: number): { keyPem: string; certPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyPem = privateKey.export({ type: 'pkcs1', format: 'pem' }) as string;
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(publicKey.export({ type: 'spki', format: 'pem' }) as string);
  cert.serialNumber = serialNumber();
  cert.validity.notBefore = new Date(now - HOUR_MS);
  cert.validity.notAfter = new Date(now + CA_VALIDITY_MS);
  const name = [
    { name: 'commonName', value: `berth egress CA ${randomBytes(4).toString('hex')}` },
    { name: 'organizationName', value: 'berth' },
  ];
  cert.setSubject(name);
  cert.setIssuer(name);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(forge.pki.privateKeyFromPem(keyPem), forge.md.sha256.create());
  return { keyPem, certPem: forge.pki.certificateToPem(cert) };
}

/** 16 random bytes as a positive DER integer (hex, high bit clear). */
function serialNumber(): string {
  const bytes = randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f;
  return bytes.toString('hex');
}
