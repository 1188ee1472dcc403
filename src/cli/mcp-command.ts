/**
 * `berth mcp`: an MCP server over berth's API, for Claude Code and other MCP clients. On
 * stdio it acts with the CLI's own credentials (BERTH_URL, BERTH_TOKEN or the admin token
 * file); on HTTP with each request's bearer token, which berth must accept. stdout is the
 * protocol on stdio, so everything this command says goes to stderr.
 */
import type { AddressInfo } from 'node:net';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { Command, Option } from 'commander';
import { BerthError, LISTEN_ADDRESS, loadConfig } from '../core/index.js';
import { connect } from './connect.js';
import { listenMcpHttp, MCP_PATH } from './mcp-http.js';
import { berthMcpServer } from './mcp-tools.js';

export function mcpCommand(env: NodeJS.ProcessEnv, version: string): Command {
  return new Command('mcp')
    .description(
      'Serve berth to MCP clients (Claude Code, ...): tools to message sessions, run commands and read and write files in their live sandboxes, list, fork, interrupt and delete sessions',
    )
    .addOption(
      new Option('--transport <kind>', 'stdio (the client starts berth mcp) or http (streamable HTTP)')
        .choices(['stdio', 'http'])
        .default('stdio'),
    )
    .option('--listen <host:port>', `with --transport http: where to serve ${MCP_PATH}`, '127.0.0.1:7421')
    .addHelpText(
      'after',
      `
Auth: on stdio, berth mcp acts as the CLI does (BERTH_URL, and BERTH_TOKEN or the admin
token in <data>/admin-token). On http, every request must carry "Authorization: Bearer
<token>" with a token berth accepts (berth token create --tenant T); the tools act with it,
and a request without one, or with one berth refuses, is 401.
Examples:
  claude mcp add berth -e BERTH_TOKEN=<token> -- berth mcp
  berth mcp --transport http --listen 127.0.0.1:7421     endpoint http://127.0.0.1:7421${MCP_PATH}
See docs/mcp.md.`,
    )
    .action(async (o: { transport: 'stdio' | 'http'; listen: string }) => {
      if (o.transport === 'stdio') {
        await berthMcpServer(await connect(env), version).connect(new StdioServerTransport());
        return;
      }
      if (!LISTEN_ADDRESS.test(o.listen))
        throw new BerthError('INVALID_INPUT', `--listen takes host:port, got ${JSON.stringify(o.listen)}`, {
          hint: 'Give an address and a port, e.g. --listen 127.0.0.1:7421 (port 0: a free one).',
        });
      const config = loadConfig(env);
      const server = await listenMcpHttp(o.listen, config.apiUrl, version);
      const { address, port } = server.address() as AddressInfo;
      const host = address.includes(':') ? `[${address}]` : address;
      process.stderr.write(`berth mcp: serving http://${host}:${port}${MCP_PATH} for ${config.apiUrl}\n`);
    });
}
