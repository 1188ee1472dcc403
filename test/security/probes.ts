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
 * the runner and to PID 1 (the init), mount a tmpfs, read the session keyring, a new user namespace, setuid(0).
 * Prints {"name": errno} (0 = it worked).
 */
export const SYSCALLS_JOB = `perl -e ${shellQuote(
  [
    'my $arm = (`uname -m` =~ /aarch64/);',
    'my %nr = $arm ? (ptrace=>117, mount=>40, keyctl=>219, unshare=>97, setuid=>146)',
    ' : (ptrace=>101, mount=>165, keyctl=>250, unshare=>272, setuid=>105); $nr{ptrace_init} = $nr{ptrace};',
    'my %args = (ptrace=>[16,0+$ENV{BERTH_RUNNER_PID},0,0], ptrace_init=>[16,1,0,0], mount=>["none","/tmp","tmpfs",0,0], keyctl=>[0,-3,1],',
    ' unshare=>[0x10000000], setuid=>[0]);',
    'my @out; for my $n (sort keys %nr) { $! = 0; my $r = syscall($nr{$n}, @{$args{$n}});',
    ' push @out, "\\"$n\\":" . ($r == -1 ? $!+0 : 0) }',
    'print "{", join(",", @out), "}\\n";',
  ].join(''),
)}`;

/**
 * Searches the sandbox for `marker`: every file (but /proc and /sys) and every process
 * environment. Prints "files:none" when no file holds it, then the count of environments
 * that do (0). The marker is assembled in the shell so the job's own command line cannot
 * match it.
 */
export function secretSearchJob(marker: string): string {
  const [head, tail] = [marker.slice(0, 10), marker.slice(10)];
  return [
    `M="${head}""${tail}"`,
    // exit 1 = no match; 2 = no match, some files unreadable (root's own in the image). 0 would be a match.
    'grep -rlsF --exclude-dir=proc --exclude-dir=sys -e "$M" /; [ $? -ne 0 ] && echo "files:none"',
    'cat /proc/[0-9]*/environ 2>/dev/null | tr "\\0" "\\n" | grep -cF -e "$M"',
  ].join('; ');
}

export function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/**
 * Through the sandbox's proxy (HTTP_PROXY): a plain-HTTP GET of each URL, then a CONNECT
 * tunnel to each host:port with a GET inside. Prints one JSON object: {"GET <url>": "<status>
 * <body>", "CONNECT <target>": "<status> <first line or body>"}.
 */
export function proxyJob(urls: string[], tunnels: string[]): string {
  const script = [
    "const http=require('http');const [urls,tunnels]=JSON.parse(process.argv[1]);",
    'const proxy=new URL(process.env.HTTP_PROXY);const out={};',
    'const get=(u)=>new Promise((done)=>{const r=http.request({host:proxy.hostname,port:proxy.port,path:u,headers:{host:new URL(u).host}},(res)=>{',
    "let b='';res.on('data',(c)=>b+=c);res.on('end',()=>done(res.statusCode+' '+b.trim()))});r.on('error',(e)=>done('ERR '+e.code));r.end()});",
    "const tunnel=(t)=>new Promise((done)=>{const r=http.request({host:proxy.hostname,port:proxy.port,method:'CONNECT',path:t});",
    "r.on('connect',(res,s)=>{if(res.statusCode!==200){done(res.statusCode+'');s.destroy();return}",
    "let b='';s.on('data',(c)=>b+=c);s.on('end',()=>done('200 '+b.split('\\r\\n\\r\\n')[1]));s.write('GET / HTTP/1.1\\r\\nhost: '+t+'\\r\\nconnection: close\\r\\n\\r\\n')});",
    "r.on('response',(res)=>done(res.statusCode+''));r.on('error',(e)=>done('ERR '+e.code));r.end()});",
    "(async()=>{for(const u of urls)out['GET '+u]=await get(u);for(const t of tunnels)out['CONNECT '+t]=await tunnel(t);console.log(JSON.stringify(out))})();",
  ].join('');
  return `node -e ${shellQuote(script)} ${shellQuote(JSON.stringify([urls, tunnels]))}`;
}

/** A raw CONNECT on the gateway socket with the given token; prints the status line. */
export function rawConnectJob(socketPath: string, token: string, target: string): string {
  const script = [
    "const net=require('net');const [path,token,target]=process.argv.slice(1);",
    "const s=net.connect({path},()=>s.write('CONNECT '+target+' HTTP/1.1\\r\\nauthorization: Bearer '+token+'\\r\\n\\r\\n'));",
    "let b='';s.on('data',(c)=>{b+=c;if(b.includes('\\r\\n')){console.log(b.split('\\r\\n')[0]);s.destroy()}});",
  ].join('');
  return `node -e ${shellQuote(script)} ${[socketPath, token, target].map(shellQuote).join(' ')}`;
}
