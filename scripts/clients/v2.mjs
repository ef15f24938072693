// Drives examples/gateway with the v2 TypeScript SDK
// (@modelcontextprotocol/client) in 2026-07-28 mode
// (versionNegotiation: {mode: "auto"}): no session, and a question comes
// back as an input_required result that the client answers by calling
// again. What the gateway promises such a client (SPEC.md, "Gateway"):
//
//   - its own confirm is an input_required round, answered by the retry;
//   - the upstream (the quickstart, which speaks 2026-07-28 too) asks in a
//     round of its own, which the gateway relays as a round of the
//     gateway's, under a key of its own, the upstream's requestState
//     sealed inside the gateway's: the client answers it by retrying, and
//     the one upstream call goes on with the answer, nothing run twice;
//   - with the tasks extension (io.modelcontextprotocol/tasks) declared,
//     the call becomes a task, and the upstream's question is the task's
//     input request, answered with tasks/update while the upstream call
//     waits.
//
// This client version cannot take a task result from tools/call (it
// rejects resultType "task"): the driver reads the task id from the
// response through the transport's fetch option, then polls and answers
// with the client's own request() (tasks/get, tasks/update).
//
//	node v2.mjs GATEWAY_URL UPSTREAM_ID
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { answerer, CheckFailed, docIds, gatewayQuestion, main, rejection, sameError, text, upstreamQuestion } from './common.mjs';

const [url, up] = process.argv.slice(2);
if (!url || !up) {
	console.error('usage: node v2.mjs GATEWAY_URL UPSTREAM_ID');
	process.exit(2);
}

const TASKS = 'io.modelcontextprotocol/tasks';

// connect connects as the holder of token in 2026-07-28 mode; with ask,
// the client declares form elicitation and answers input requests with
// it; with tasks, it also declares the tasks extension. fetch, when set,
// is the transport's fetch.
async function connect(token, { ask, tasks, fetch } = {}) {
	const capabilities = {};
	if (ask) capabilities.elicitation = { form: {} };
	if (tasks) capabilities.extensions = { [TASKS]: {} };
	const client = new Client({ name: 'mcphandler-clients-v2', version: '1.0.0' }, { capabilities, versionNegotiation: { mode: 'auto' } });
	if (ask) client.setRequestHandler('elicitation/create', async (req) => ask(req.params));
	const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: { token: async () => token }, ...(fetch && { fetch }) });
	await client.connect(transport);
	return client;
}

// anyResult is a Standard Schema that takes any result as it is, for
// request() of the tasks methods, which this client has no schema for.
const anyResult = { '~standard': { version: 1, vendor: 'mcphandler-clients', validate: (value) => ({ value }) } };

// taskPeek is a fetch that keeps, for each tools/call response, the
// JSON-RPC messages it carried (a JSON body or SSE data lines).
function taskPeek() {
	const reads = [];
	const fetchPeek = async (input, init) => {
		const res = await fetch(input, init);
		if (typeof init?.body === 'string' && init.body.includes('"tools/call"')) {
			const ct = res.headers.get('content-type') ?? '';
			reads.push(res.clone().text().then((body) => {
				if (ct.startsWith('text/event-stream')) {
					return body.split('\n').filter((l) => l.startsWith('data:')).map((l) => JSON.parse(l.slice(5)));
				}
				return body ? [JSON.parse(body)] : [];
			}));
		}
		return res;
	};
	const messages = async () => (await Promise.all(reads)).flat();
	return { fetchPeek, messages };
}

await main('v2', async (c) => {
	const open = [];
	try {
		const viewer = await connect('acme-viewer');
		open.push(viewer);
		c.ok(viewer.getProtocolEra() === 'modern' && viewer.getNegotiatedProtocolVersion() === '2026-07-28',
			`acme-viewer: negotiated ${viewer.getNegotiatedProtocolVersion()} (${viewer.getProtocolEra()} era, no session) with the gateway ${JSON.stringify(viewer.getServerVersion())}`,
			{ era: viewer.getProtocolEra(), version: viewer.getNegotiatedProtocolVersion() });
		c.ok(viewer.getDiscoverResult()?.capabilities?.extensions?.[TASKS] !== undefined, `the gateway's server/discover offers the ${TASKS} extension`,
			viewer.getDiscoverResult());
		const search = () => viewer.callTool({ name: `${up}_search_docs`, arguments: {} });

		// What a viewer sees: the read-only upstream tools and whoami.
		const { tools } = await viewer.listTools();
		const names = tools.map((t) => t.name);
		c.ok(names.includes(`${up}_search_docs`) && names.includes('whoami') && !names.includes(`${up}_delete_doc`),
			`acme-viewer lists ${names.join(', ')}: ${up}_search_docs and whoami, not ${up}_delete_doc`);
		c.ok(tools.filter((t) => t.name.startsWith(`${up}_`)).every((t) => t.annotations?.readOnlyHint === true),
			'every upstream tool a viewer lists is annotated readOnlyHint');
		c.eq(text(await viewer.callTool({ name: 'whoami', arguments: {} })), 'tenant acme, subject alice, role viewer', "acme-viewer's whoami (the gateway's own tool)");
		c.eq(docIds(await search()), ['a1', 'a2', 'a3'], `acme-viewer's ${up}_search_docs lists acme's documents`);

		const globex = await connect('globex-editor');
		open.push(globex);
		c.eq(docIds(await globex.callTool({ name: `${up}_search_docs`, arguments: {} })), ['g1', 'g2'],
			`globex-editor's ${up}_search_docs lists globex's documents, with globex's credentials upstream`);

		// Accepted at the gateway (an input_required round the client
		// answers by retrying); the quickstart's own confirm comes next, as
		// the gateway's second round, under the gateway's key for it; the
		// retry that answers it deletes a1.
		const yes = answerer(up, 'a1');
		const rounds = taskPeek();
		const admin = await connect('acme-admin', { ask: yes.answer, fetch: rounds.fetchPeek });
		open.push(admin);
		c.ok((await admin.listTools()).tools.some((t) => t.name === `${up}_delete_doc`), `acme-admin lists ${up}_delete_doc`);
		const deleted = await admin.callTool({ name: `${up}_delete_doc`, arguments: { id: 'a1' } });
		c.eq(yes.asked, [gatewayQuestion(up), upstreamQuestion('a1')],
			"acme-admin was asked the gateway's confirm, then the quickstart's, each an input_required round answered by retrying");
		const keys = (await rounds.messages()).filter((m) => m.result?.resultType === 'input_required').map((m) => Object.keys(m.result.inputRequests ?? {}));
		c.eq(keys, [['mcphandler/confirm'], ['upstream/1/mcphandler/confirm']],
			"the gateway's confirm under its key, the quickstart's (the same key there) under the gateway's key for the upstream's round 1");
		c.ok(deleted.isError !== true && deleted.structuredContent?.deleted === 'a1',
			`${up}_delete_doc a1 ran once both confirms were answered: ${JSON.stringify(deleted.content)}`, deleted);
		c.eq(docIds(await search()), ['a2', 'a3'], 'a1 is gone upstream: the upstream call went on from its round, with the answer');

		// Declined at the gateway: nothing goes upstream, a2 stays.
		const no = answerer(up, 'a2', 'decline');
		const admin2 = await connect('acme-admin', { ask: no.answer });
		open.push(admin2);
		const declined = await admin2.callTool({ name: `${up}_delete_doc`, arguments: { id: 'a2' } });
		c.eq(no.asked, [gatewayQuestion(up)], "declined at the gateway: only the gateway's confirm was asked");
		c.ok(declined.isError === true && text(declined) === `Not run: the user declined ${up}_delete_doc.`,
			`${up}_delete_doc a2, declined at the gateway: ${text(declined)}`, declined);
		c.eq(docIds(await search()), ['a2', 'a3'], 'a2 is still listed upstream: the upstream did not run it');

		// A tool hidden from the viewer answers exactly like an unknown one.
		const hidden = await rejection(viewer.callTool({ name: `${up}_delete_doc`, arguments: { id: 'a2' } }), `acme-viewer calls ${up}_delete_doc`);
		const unknown = await rejection(viewer.callTool({ name: `${up}_no_such_tool`, arguments: { id: 'a2' } }), `acme-viewer calls ${up}_no_such_tool`);
		const same = sameError(hidden, `${up}_delete_doc`, unknown, `${up}_no_such_tool`);
		c.ok(hidden.code === -32602 && same.same, `acme-viewer's ${up}_delete_doc fails as an unknown tool does: ${hidden.message}`, same);

		// With the tasks extension declared, the call becomes a task once the
		// gateway's confirm is answered; the quickstart's question is then
		// the task's input request.
		const task = answerer(up, 'a3');
		const peek = taskPeek();
		const tasker = await connect('acme-admin', { ask: task.answer, tasks: true, fetch: peek.fetchPeek });
		open.push(tasker);
		const e = await rejection(tasker.callTool({ name: `${up}_delete_doc`, arguments: { id: 'a3' } }), `${up}_delete_doc a3 with ${TASKS} declared`);
		c.ok(e.code === 'UNSUPPORTED_RESULT_TYPE' && e.data?.resultType === 'task',
			`declaring ${TASKS}, the call became a task after the gateway's confirm round; this client version rejects it: ${e.message}`, { code: e.code, message: e.message, data: e.data });
		const created = (await peek.messages()).find((m) => m.result?.resultType === 'task')?.result;
		c.ok(typeof created?.taskId === 'string' && created.status === 'working', `the gateway answered a task: ${created?.taskId} (${created?.status})`, await peek.messages());
		const taskId = created.taskId;
		const statuses = [created.status];
		let last;
		for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
			last = await tasker.request({ method: 'tasks/get', params: { taskId } }, anyResult);
			if (statuses.at(-1) !== last.status) statuses.push(last.status);
			if (last.status === 'input_required') {
				const inputResponses = {};
				for (const [key, req] of Object.entries(last.inputRequests ?? {})) {
					if (req.method !== 'elicitation/create') throw new CheckFailed(`the task asks ${JSON.stringify(req)}`);
					inputResponses[key] = task.answer(req.params);
				}
				await tasker.request({ method: 'tasks/update', params: { taskId, inputResponses } }, anyResult);
				continue;
			}
			if (['completed', 'failed', 'cancelled'].includes(last.status)) break;
			await new Promise((r) => setTimeout(r, 100));
		}
		c.eq(task.asked, [gatewayQuestion(up), upstreamQuestion('a3')],
			"the gateway's confirm came as a round, the quickstart's as the task's input request (tasks/get), answered with tasks/update");
		c.ok(last?.status === 'completed' && last.result?.structuredContent?.deleted === 'a3' && !last.result.isError,
			`the task went ${statuses.join(' → ')}; its result: ${JSON.stringify(last?.result?.content)}`, last);
		c.eq(docIds(await search()), ['a2'], 'a3 is gone upstream: the one upstream call ran, after both confirms');
	} finally {
		await Promise.allSettled(open.map((cl) => cl.close()));
	}
});
