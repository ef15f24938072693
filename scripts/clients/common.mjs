// What both drivers check, and how: the expected questions, the documents
// search_docs lists, the error of an unknown tool. Each driver imports it
// and passes its own client calls in; no SDK is imported here.

// The gateway's own confirm, then the quickstart's, relayed.
export const gatewayQuestion = (upstream) => `Run delete_doc on ${upstream}?`;
export const upstreamQuestion = (doc) => `Delete document ${doc} for good? Type its id to confirm.`;

// A check that fails throws; main() prints what failed and exits 1.
export class CheckFailed extends Error {}

export function checker(label) {
	let passed = 0;
	return {
		ok(cond, what, detail) {
			if (!cond) {
				throw new CheckFailed(`${what}${detail === undefined ? '' : `: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}`}`);
			}
			passed++;
			console.log(`${label}: ✓ ${what}`);
		},
		eq(got, want, what) {
			const g = JSON.stringify(got), w = JSON.stringify(want);
			this.ok(g === w, what, `got ${g}, want ${w}`);
		},
		get passed() {
			return passed;
		},
	};
}

// text returns the text of a tool result's only content block.
export function text(res) {
	if (!res || !Array.isArray(res.content) || res.content.length !== 1 || res.content[0].type !== 'text') {
		throw new CheckFailed(`not a result with one text block: ${JSON.stringify(res)}`);
	}
	return res.content[0].text;
}

// docIds returns the ids search_docs listed, from the text of its result
// (the quickstart answers {docs:[{id,title}], count} as JSON text and as
// structuredContent; the text is what every client shows).
export function docIds(res) {
	const t = text(res);
	let v;
	try {
		v = JSON.parse(t);
	} catch {
		throw new CheckFailed(`search_docs text is not JSON: ${t}`);
	}
	if (!Array.isArray(v.docs) || v.count !== v.docs.length) {
		throw new CheckFailed(`search_docs text is not {docs, count}: ${t}`);
	}
	return v.docs.map((d) => d.id);
}

// answerer records every elicitation it is asked and answers it: the
// gateway's confirm with confirm: gatewayAnswer (or declines it when
// gatewayAnswer is 'decline'), the quickstart's type-to-confirm with the
// document id. Anything else is declined.
export function answerer(upstream, doc, gatewayAnswer = true) {
	const asked = [];
	const answer = (params) => {
		asked.push(params.message);
		if (params.message === gatewayQuestion(upstream)) {
			const props = params.requestedSchema?.properties ?? {};
			if (props.confirm?.type !== 'boolean') {
				return { action: 'decline' }; // the check on asked[] then fails with the schema in view
			}
			return gatewayAnswer === 'decline' ? { action: 'decline' } : { action: 'accept', content: { confirm: gatewayAnswer } };
		}
		if (params.message === upstreamQuestion(doc) && params.requestedSchema?.properties?.id?.type === 'string') {
			return { action: 'accept', content: { id: doc } };
		}
		return { action: 'decline' };
	};
	return { asked, answer };
}

// sameError reports whether two JSON-RPC errors, for tool names a and b,
// are the same once each names its own tool: code, message and data.
export function sameError(ea, a, eb, b) {
	const norm = (e, name) => JSON.stringify({ code: e?.code, message: String(e?.message).split(name).join('<tool>'), data: e?.data ?? null });
	return { same: ea !== undefined && eb !== undefined && norm(ea, a) === norm(eb, b), a: norm(ea, a), b: norm(eb, b) };
}

// rejection returns the error a promise rejects with, or fails when it
// resolves.
export async function rejection(p, what) {
	try {
		const v = await p;
		throw new CheckFailed(`${what}: answered ${JSON.stringify(v)}, want an error`);
	} catch (e) {
		if (e instanceof CheckFailed) throw e;
		return e;
	}
}

// main runs a driver and exits 0 only when every check passed.
export async function main(label, run) {
	const c = checker(label);
	try {
		await run(c);
		console.log(`${label}: ${c.passed} passed, 0 failed`);
		process.exit(0);
	} catch (e) {
		console.log(`${label}: ✗ ${e instanceof CheckFailed ? e.message : e?.stack ?? e}`);
		console.log(`${label}: ${c.passed} passed, 1 failed`);
		process.exit(1);
	}
}
