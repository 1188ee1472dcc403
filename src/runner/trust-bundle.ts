/**
 * The sandbox's trust in the egress CA: the gateway terminates TLS to targets
 * with header rules, presenting certificates signed by the install's CA. The root file
 * system is read-only, so the runner writes a bundle (the image's system CAs, or Node's
 * own roots when the image has none, plus the berth CA) to the scratch tmpfs and points
 * the usual variables at it for every process it starts. Node built-ins only; ships into
 * the sandbox.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { rootCertificates } from 'node:tls';

/** Where distributions keep their CA bundle (Debian/Alpine, RHEL, macOS-style, SUSE). */
const SYSTEM_BUNDLES = [
  '/etc/ssl/certs/ca-certificates.crt',
  '/etc/pki/tls/certs/ca-bundle.crt',
  '/etc/ssl/cert.pem',
  '/etc/ssl/ca-bundle.pem',
];

/** Writes the bundle under `dir`; returns the environment that makes tools use it. */
export async function installTrustBundle(caPem: string, dir: string): Promise<Record<string, string>> {
  let system = '';
  for (const path of SYSTEM_BUNDLES) {
    system = await readFile(path, 'utf8').catch(() => '');
    if (system) break;
  }
  if (!system) system = `${rootCertificates.join('\n')}\n`;
  await mkdir(dir, { recursive: true, mode: 0o755 });
  const caFile = join(dir, 'berth-egress-ca.pem');
  const bundleFile = join(dir, 'ca-bundle.pem');
  await writeFile(caFile, caPem, { mode: 0o644 });
  await writeFile(bundleFile, `${system.trimEnd()}\n${caPem}`, { mode: 0o644 });
  return {
    // OpenSSL (curl, wget, python's ssl, git, ruby), curl, Python requests, git.
    SSL_CERT_FILE: bundleFile,
    CURL_CA_BUNDLE: bundleFile,
    REQUESTS_CA_BUNDLE: bundleFile,
    GIT_SSL_CAINFO: bundleFile,
    // Node keeps its own roots and adds these.
    NODE_EXTRA_CA_CERTS: caFile,
  };
}
