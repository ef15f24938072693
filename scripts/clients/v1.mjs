// Drives examples/gateway with the v1 TypeScript SDK
// (@modelcontextprotocol/sdk: Client and StreamableHTTPClientTransport),
// which speaks the 2025 revisions over sessions: the gateway's confirm and
// the upstream's own, relayed, both reach it as elicitation/create
// requests during the call.
//
//	node v1.mjs GATEWAY_URL UPSTREAM_ID
//
// The gateway must front a fresh quickstart as UPSTREAM_ID for the tenants
// acme and globex (scripts/clients.sh sets it up).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { answerer, docIds, gatewayQuestion, main, rejection, sameError, text, upstreamQuestion } from './common.mjs';

const [url, up] = process.argv.slice(2);
if (!url || !up) {
	console.error('usage: node v1.mjs GATEWAY_URL UPSTREAM_ID');
	process.exit(2);
}

// connect opens a session as the holder of token; with ask, the client
// declares form elicitation and answers with it.
async function connect(token, ask) {
	const client = new Client({ name: 'mcphandler-clients-v1', version: '1.0.0' }, { capabilities: ask ? { elicitation: { form: {} } } : {} });
	if (ask) client.setRequestHandler(ElicitRequestSchema, async (req) => ask(req.params));
	const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
	await client.connect(transport);
	return { client, transport };
}

await main('v1', async (c) => {
	const open = [];
	try {
		const viewer = await connect('acme-viewer');
		open.push(viewer.client);
		c.ok(/^2025-/.test(viewer.transport.protocolVersion ?? '') && !!viewer.transport.sessionId,
			`acme-viewer: a 2025 session (${viewer.transport.protocolVersion}) with the gateway ${JSON.stringify(viewer.client.getServerVersion())}`,
			{ protocolVersion: viewer.transport.protocolVersion, sessionId: viewer.transport.sessionId });
		const search = () => viewer.client.callTool({ name: `${up}_search_docs`, arguments: {} });

		// What a viewer sees: the read-only upstream tools and whoami.
		const { tools } = await viewer.client.listTools();
		const names = tools.map((t) => t.name);
		c.ok(names.includes(`${up}_search_docs`) && names.includes('whoami') && !names.includes(`${up}_delete_doc`),
			`acme-viewer lists ${names.join(', ')}: ${up}_search_docs and whoami, not ${up}_delete_doc`);
		c.ok(tools.filter((t) => t.name.startsWith(`${up}_`)).every((t) => t.annotations?.readOnlyHint === true),
			'every upstream tool a viewer lists is annotated readOnlyHint');
		c.eq(text(await viewer.client.callTool({ name: 'whoami', arguments: {} })), 'tenant acme, subject alice, role viewer', "acme-viewer's whoami (the gateway's own tool)");
		c.eq(docIds(await search()), ['a1', 'a2', 'a3'], `acme-viewer's ${up}_search_docs lists acme's documents`);

		const globex = await connect('globex-editor');
		open.push(globex.client);
		c.eq(docIds(await globex.client.callTool({ name: `${up}_search_docs`, arguments: {} })), ['g1', 'g2'],
			`globex-editor's ${up}_search_docs lists globex's documents, with globex's credentials upstream`);

		// An admin deletes a1: the gateway confirms, then the quickstart's
		// own confirm is relayed; both accepted, the upstream deletes it.
		const yes = answerer(up, 'a1');
		const admin = await connect('acme-admin', yes.answer);
		open.push(admin.client);
		c.ok((await admin.client.listTools()).tools.some((t) => t.name === `${up}_delete_doc`), `acme-admin lists ${up}_delete_doc`);
		const deleted = await admin.client.callTool({ name: `${up}_delete_doc`, arguments: { id: 'a1' } });
		c.eq(yes.asked, [gatewayQuestion(up), upstreamQuestion('a1')], "acme-admin was asked the gateway's confirm, then the quickstart's, relayed");
		c.ok(!deleted.isError && text(deleted) === '{"deleted":"a1"}' && deleted.structuredContent?.deleted === 'a1',
			`${up}_delete_doc a1, both accepted, ran upstream: ${text(deleted)}`, deleted);
		c.eq(docIds(await search()), ['a2', 'a3'], 'a1 is gone upstream');

		// Declined at the gateway: nothing goes upstream, so the quickstart
		// never asks its own question and a2 stays.
		const no = answerer(up, 'a2', 'decline');
		const admin2 = await connect('acme-admin', no.answer);
		open.push(admin2.client);
		const declined = await admin2.client.callTool({ name: `${up}_delete_doc`, arguments: { id: 'a2' } });
		c.eq(no.asked, [gatewayQuestion(up)], "declined at the gateway: only the gateway's confirm was asked");
		c.ok(declined.isError === true && text(declined) === `Not run: the user declined ${up}_delete_doc.`,
			`${up}_delete_doc a2, declined at the gateway: ${text(declined)}`, declined);
		c.eq(docIds(await search()), ['a2', 'a3'], 'a2 is still listed upstream: the upstream did not run it');

		// A tool hidden from the viewer answers exactly like an unknown one.
		const hidden = await rejection(viewer.client.callTool({ name: `${up}_delete_doc`, arguments: { id: 'a2' } }), `acme-viewer calls ${up}_delete_doc`);
		const unknown = await rejection(viewer.client.callTool({ name: `${up}_no_such_tool`, arguments: { id: 'a2' } }), `acme-viewer calls ${up}_no_such_tool`);
		const same = sameError(hidden, `${up}_delete_doc`, unknown, `${up}_no_such_tool`);
		c.ok(hidden.code === -32602 && same.same, `acme-viewer's ${up}_delete_doc fails as an unknown tool does: ${hidden.message}`, same);
		c.eq(docIds(await search()), ['a2', 'a3'], 'the refused calls changed nothing upstream');
	} finally {
		await Promise.allSettled(open.map((cl) => cl.close()));
	}
});
