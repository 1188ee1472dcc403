/**
 * Shell jobs an attacker would run inside a sandbox, as `command` messages: each prints
 * what it reached as one JSON line (or plain text), for the attack suite to judge.
 * Only what the base image has: sh, coreutils, findutils, util-linux, perl, node.
 */

/** Tries a TCP connection to each target; prints {"host:port": "CONNECTED" | error code}. */
export function connectJob(targets: [string, number][]): string {
  const script = [
    "const net=require('net');",
    'const targets=JSON.parse(process.argv[1]);',
    'Promise.all(targets.map(([host,port])=>new Promise((done)=>{',
    'const s=net.connect({host,port,timeout:3000});',
    "s.on('connect',()=>{s.destroy();done([host+':'+port,'CONNECTED'])});",
    "s.on('timeout',()=>{s.destroy();done([host+':'+port,'TIMEOUT'])});",
    "s.on('error',(e)=>done([host+':'+port,e.code]));",
    '}))).then((r)=>console.log(JSON.stringify(Object.fromEntries(r))));',
  ].join('');
  return `node -e ${shellQuote(script)} ${shellQuote(JSON.stringify(targets))}`;
}

/** Sends one request to a Unix socket's HTTP server with a bearer token; prints {"status", "code"} or {"error"}. */
export function gatewayCallJob(socketPath: string, token: string, method: string, path: string): string {
  const script = [
    "const http=require('http');",
    'const [socketPath,token,method,path]=process.argv.slice(1);',
    "const body=method==='POST'?'{}':undefined;",
    "const req=http.request({socketPath,method,path,headers:{authorization:'Bearer '+token,'content-type':'application/json'}},(res)=>{",
    "let t='';res.on('data',(c)=>t+=c);res.on('end',()=>{let code=null;try{code=JSON.parse(t).error.code}catch{}",
    'console.log(JSON.stringify({status:res.statusCode,code}))})});',
    "req.on('error',(e)=>console.log(JSON.stringify({error:e.code})));req.end(body);",
  ].join('');
  return `node -e ${shellQuote(script)} ${[socketPath, token, method, path].map(shellQuote).join(' ')}`;
}

/**
 * Prints this sandbox's session token, as a tool inside could get it: the boot token in
 * /run/berth/token answers GET /v1/bind with the binding (what a leak would carry out).
 */
export function sessionTokenJob(socketPath: string): string {
  const script = [
    "const http=require('http');const fs=require('fs');",
    'const [socketPath]=process.argv.slice(1);',
    "const boot=fs.readFileSync('/run/berth/token','utf8').trim();",
    "http.get({socketPath,path:'/v1/bind',headers:{authorization:'Bearer '+boot}},(res)=>{",
    "let t='';res.on('data',(c)=>t+=c);res.on('end',()=>console.log(JSON.parse(t).token))});",
  ].join('');
  return `node -e ${shellQuote(script)} ${shellQuote(socketPath)}`;
}

/**
 * Raw syscalls through perl's syscall() (x86_64 and aarch64 numbers): ptrace-attach to
 * PID 1, mount a tmpfs, read the session keyring, a new user namespace, setuid(0).
 * Prints {"name": errno} (0 = it worked).
 */
export const SYSCALLS_JOB = `perl -e ${shellQuote(
  [
    'my $arm = (`uname -m` =~ /aarch64/);',
    'my %nr = $arm ? (ptrace=>117, mount=>40, keyctl=>219, unshare=>97, setuid=>146)',
    ' : (ptrace=>101, mount=>165, keyctl=>250, unshare=>272, setuid=>105);',
    'my %args = (ptrace=>[16,1,0,0], mount=>["none","/tmp","tmpfs",0,0], keyctl=>[0,-3,1],',
    ' unshare=>[0x10000000], setuid=>[0]);',
    'my @out; for my $n (sort keys %nr) { $! = 0; my $r = syscall($nr{$n}, @{$args{$n}});',
    ' push @out, "\\"$n\\":" . ($r == -1 ? $!+0 : 0) }',
    'print "{", join(",", @out), "}\\n";',
  ].join(''),
)}`;

export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}
