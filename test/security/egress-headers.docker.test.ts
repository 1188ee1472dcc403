/**
 * Egress header rules, from inside real sandboxes: an allowlisted
 * target with a rule gets `Authorization: Bearer {{secret:github}}` set by the gateway,
 * for plain HTTP and for HTTPS (TLS terminated with the per-install CA the runner put in
 * the sandbox's trust bundle, upstream TLS verified against BERTH_EGRESS_CA_FILE); the
 * header the sandbox sent is replaced; a secret the host lacks refuses the request
 * (audited, never sent); a target without rules is still spliced (the tool sees the
 * upstream's own certificate); a target off the list is denied. The secret is in nothing
 * the sandbox can read.
 */
import assert from 'node:assert/strict';
import { randomBytes, X509Certificate } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { EgressCa } from '../../src/gateway/index.js';
import { SecretStore } from '../../src/secrets/index.js';
import { startTestHost } from '../helpers/test-host.js';
import { availableTiers, type Tier } from '../helpers/tiers.js';
import { secretSearchJob, shellQuote } from './probes.js';

for (const { tier, skip } of await availableTiers()) {
  test(`egress header rules (${tier}): secrets set by the gateway, never in the sandbox`, { skip }, (t) =>
    headerRules(t, tier),
  );
}

interface Upstream {
  target: string;
  /** The Authorization header of each request it got. */
  seen: (string | undefined)[];
}

async function upstream(
  t: TestContext,
  name: string,
  tls?: { key: string; cert: string },
): Promise<Upstream> {
  const seen: (string | undefined)[] = [];
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    seen.push(req.headers.authorization);
    res.end(`hello from ${name}`);
  };
  const server = tls ? createHttpsServer(tls, handler) : createHttpServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  return { target: `127.0.0.1:${(server.address() as { port: number }).port}`, seen };
}

/**
 * Through the sandbox's proxy: plain-HTTP GETs and HTTPS GETs in CONNECT tunnels (Node's
 * default trust, i.e. NODE_EXTRA_CA_CERTS from the runner), each sending its own forged
 * Authorization header. Prints one JSON object.
 */
function requestsJob(targets: Record<string, string>): string {
  const script = [
    "const http=require('http'),https=require('https'),tls=require('tls');",
    'const t=JSON.parse(process.argv[1]);const proxy=new URL(process.env.HTTP_PROXY);',
    "const forged={authorization:'Bearer forged-by-the-sandbox'};",
    "const text=(res)=>new Promise((ok)=>{let b='';res.on('data',(c)=>b+=c);res.on('end',()=>ok(b.trim()))});",
    "const get=(target)=>new Promise((ok)=>{const r=http.request({host:proxy.hostname,port:proxy.port,path:'http://'+target+'/p',headers:{host:target,...forged}},async(res)=>ok(res.statusCode+' '+await text(res)));r.on('error',(e)=>ok('ERR '+e.code));r.end()});",
    "const tunnel=(target)=>new Promise((ok,ko)=>{const r=http.request({host:proxy.hostname,port:proxy.port,method:'CONNECT',path:target});r.on('connect',(res,s)=>res.statusCode===200?ok(s):ko(new Error('CONNECT '+res.statusCode)));r.on('error',ko);r.end()});",
    "const tlsGet=(target,verify)=>tunnel(target).then((s)=>new Promise((ok)=>{const [host,port]=target.split(':');let sock;",
    "const r=https.request({host,port,path:'/s',headers:forged,createConnection:()=>(sock=tls.connect({socket:s,host,rejectUnauthorized:verify}))},async(res)=>{",
    'const cert=sock.getPeerCertificate();ok({status:res.statusCode,body:await text(res),authorized:sock.authorized,issuer:cert.issuer.CN})});',
    "r.on('error',(e)=>ok({error:e.code||e.message}));r.end()}));",
    '(async()=>{console.log(JSON.stringify({',
    'plain:await get(t.plain),tls:await tlsGet(t.tls,true),splicedVerified:await tlsGet(t.spliced,true),',
    'spliced:await tlsGet(t.spliced,false),missing:await get(t.missing),denied:await get(t.denied),',
    'trust:[process.env.SSL_CERT_FILE,process.env.NODE_EXTRA_CA_CERTS]}))})();',
  ].join('');
  return `node -e ${shellQuote(script)} ${shellQuote(JSON.stringify(targets))}`;
}

async function headerRules(t: TestContext, tier: Tier): Promise<void> {
  // A throw-away CA for the HTTPS upstreams, trusted by the gateway only (BERTH_EGRESS_CA_FILE).
  const testCaDir = await mkdtemp(join(tmpdir(), 'berth-test-ca-'));
  t.after(() => rm(testCaDir, { recursive: true, force: true }));
  const testCa = await EgressCa.open(join(testCaDir, 'ca'));
  const serverCert = testCa.leafFor('127.0.0.1');
  const plain = await upstream(t, 'plain');
  const secure = await upstream(t, 'tls', serverCert);
  const spliced = await upstream(t, 'spliced', serverCert);
  const missing = await upstream(t, 'missing');
  const denied = await upstream(t, 'denied');

  const { host, client, dataDir, sendAndCollect } = await startTestHost(t, {
    BERTH_EGRESS_CA_FILE: join(testCaDir, 'ca', 'ca.pem'),
  });
  const marker = `ghp-berth-${randomBytes(12).toString('hex')}`;
  await new SecretStore({ path: join(dataDir, 'secrets.json'), key: '' }).set('github', marker);
  const rule = { Authorization: 'Bearer {{secret:github}}' };
  await client.request('POST', '/v1/agents', {
    name: 'net',
    provider: 'command',
    isolation: tier,
    egress: [
      { target: plain.target, headers: rule },
      { target: secure.target, headers: rule },
      spliced.target,
      { target: missing.target, headers: { Authorization: 'Bearer {{secret:absent}}' } },
    ],
  });
  const run = async (session: string, job: string) => {
    const events = await sendAndCollect(session, { agent: 'net', text: job }, (e) =>
      ['reply', 'failed'].includes(e.type),
    );
    assert.equal(events.at(-1)?.type, 'reply', JSON.stringify(events.at(-1)));
    return String(events.at(-1)!.data.text);
  };

  const reply = await run(
    'h1',
    requestsJob({
      plain: plain.target,
      tls: secure.target,
      spliced: spliced.target,
      missing: missing.target,
      denied: denied.target,
    }),
  );
  assert.ok(!reply.includes(marker), 'the tool never sees the secret');
  const out = JSON.parse(reply);
  const berthCa = new X509Certificate(await readFile(join(dataDir, 'egress-ca', 'ca.pem'))).subject;
  const testCaName = new X509Certificate(testCa.certificatePem).subject;
  const cn = (subject: string) => /CN=([^\n]+)/.exec(subject)![1];
  assert.deepEqual(out, {
    plain: '200 hello from plain',
    // TLS terminated by the gateway with a leaf of the install's CA, which the sandbox trusts.
    tls: { status: 200, body: 'hello from tls', authorized: true, issuer: cn(berthCa) },
    // No rules: spliced, so the tool meets the upstream's own certificate (whose CA it does not trust).
    splicedVerified: { error: 'SELF_SIGNED_CERT_IN_CHAIN' },
    spliced: { status: 200, body: 'hello from spliced', authorized: false, issuer: cn(testCaName) },
    missing: `502 ${JSON.stringify({
      error: {
        code: 'EGRESS_SECRET_UNAVAILABLE',
        message: `Secret absent of the Authorization header rule for ${missing.target} is not set on the host; the request was not sent`,
        hint: 'A header rule of the agent egress names a secret the host cannot read; the request was not sent. Set it with berth secret set NAME (and check BERTH_SECRET_KEY).',
      },
    })}`,
    denied: `403 ${JSON.stringify({
      error: {
        code: 'EGRESS_DENIED',
        message: `Agent net may not connect to ${denied.target} (not in its egress allowlist)`,
        hint: 'The sandbox may reach only the host:port entries of its agent egress allowlist; add the target to the agent (egress) if it should be reachable.',
      },
    })}`,
    trust: ['/tmp/berth-ca/ca-bundle.pem', '/tmp/berth-ca/berth-egress-ca.pem'],
  });
  // The upstreams saw the secret, never the sandbox's own header; the refused ones saw nothing.
  assert.deepEqual(plain.seen, [`Bearer ${marker}`]);
  assert.deepEqual(secure.seen, [`Bearer ${marker}`]);
  assert.deepEqual(spliced.seen, ['Bearer forged-by-the-sandbox'], 'a spliced tunnel is not touched');
  assert.deepEqual(missing.seen, []);
  assert.deepEqual(denied.seen, []);

  const rows = (await host.store.listAudit(0, 1000))
    .filter((a) => a.kind.startsWith('egress-') && a.sessionId === 'h1')
    .map((a): Record<string, unknown> => ({ kind: a.kind, ...(a.data as object) }));
  const of = (target: string) => rows.filter((r) => `${r.host}:${r.port}` === target);
  for (const target of [plain.target, secure.target]) {
    const [row, ...more] = of(target);
    assert.equal(more.length, 0, JSON.stringify(of(target)));
    assert.equal(row?.kind, 'egress-allowed');
    assert.deepEqual(row?.injected, ['authorization']);
    assert.equal(row?.requests, 1);
    assert.ok((row?.bytesUp as number) > 0 && (row?.bytesDown as number) > 0, JSON.stringify(row));
  }
  assert.deepEqual(
    of(missing.target).map((r) => [r.kind, r.reason]),
    [
      [
        'egress-denied',
        `Secret absent of the Authorization header rule for ${missing.target} is not set on the host; the request was not sent`,
      ],
      ['egress-allowed', undefined],
    ],
  );
  assert.deepEqual(
    of(denied.target).map((r) => r.kind),
    ['egress-denied'],
  );
  assert.ok(!JSON.stringify(rows).includes(marker), 'audit rows name headers, never values');

  // The credential search: no file, no process environment in the sandbox holds the secret.
  assert.equal(await run('h1', secretSearchJob(marker)), 'files:none\n0\n');
}
